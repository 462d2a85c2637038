package chaos

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ddbworker/ddbworker/internal/logevent"
	"github.com/ddbworker/ddbworker/worker"
)

// Log messages of the worker process that the tally reads.
const (
	// msgMessage stands for every delivery line: its msg is the outcome's
	// event (worker.LogEvent), which starts with logevent.Prefix.
	msgMessage       = logevent.Prefix
	msgFaultInjected = "fault injected"
	msgFailpointKill = "failpoint kill"
	msgDLQSendFailed = "DLQ send failed; message kept"
	msgHashMismatch  = "ALERT idempotency hash mismatch: the key already holds other work; the existing record is untouched"
	// The database health gate's transitions (worker/health.go).
	msgUnhealthy = "database unhealthy: receiving paused; held messages parked; probing"
	msgHealthy   = "database healthy: receiving resumed, concurrency ramping up from 1"
	// msgStarted is a worker process past its startup checks (daemon/run.go):
	// a successor started during an outage says it once the database answers.
	msgStarted = "worker started"
	levelWarn  = "WARN"
	levelError = "ERROR"
)

// LogLine is what the harness reads of one JSON log line of a worker.
type LogLine struct {
	Level        string `json:"level"`
	Msg          string `json:"msg"`
	Fault        string `json:"fault"`
	Service      string `json:"service"`
	Operation    string `json:"operation"`
	Failpoint    string `json:"failpoint"`
	SQSMessageID string `json:"sqsMessageId"`
	// Outcome is a delivery line's result (an Outcome* label, or a
	// handler's own outcome).
	Outcome        string `json:"result"`
	FailureCode    string `json:"failureCode"`
	TerminalPolicy string `json:"terminalPolicy"`
	IdempotencyKey string `json:"idempotencyKey"`
	MessageType    string `json:"messageType"`
	ProcessingMs   int64  `json:"processingMs"`
	ReceiveCount   int    `json:"receiveCount"`
	Error          string `json:"error"`
	Reason         string `json:"reason"`
}

// errorCode matches an AWS error code in an SDK error message.
var errorCode = regexp.MustCompile(`\b(AWS\.SimpleQueueService\.[A-Za-z]+|[A-Z][A-Za-z]+(?:Exception|Error))\b`)

// ErrorCode is the AWS error code in a log line's error or reason ("" when
// there is none).
func (l LogLine) ErrorCode() string {
	for _, s := range []string{l.Error, l.Reason} {
		if m := errorCode.FindString(s); m != "" {
			return m
		}
	}
	return ""
}

// malformed are error codes that mean the worker sent a request the service
// refuses as malformed: a client bug, never a transient condition.
var malformed = map[string]bool{
	"AWS.SimpleQueueService.TooManyEntriesInBatchRequest": true, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct": true,
	"AWS.SimpleQueueService.EmptyBatchRequest": true, "AWS.SimpleQueueService.InvalidBatchEntryId": true,
	"AWS.SimpleQueueService.BatchRequestTooLong": true, "ValidationException": true, "SerializationException": true,
}

// IsMalformed reports whether code means a malformed request.
func IsMalformed(code string) bool { return malformed[code] }

// IsDelivery reports whether l is a delivery's line (one per delivery,
// named by its outcome: worker.LogEvent).
func (l LogLine) IsDelivery() bool { return strings.HasPrefix(l.Msg, msgMessage) }

// ParseLine decodes one log line; ok is false for anything that is not a
// JSON object with a msg (a panic's stack trace, the CLI's last error line).
func ParseLine(b []byte) (LogLine, bool) {
	var l LogLine
	if len(b) == 0 || b[0] != '{' {
		return l, false
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Msg == "" {
		return LogLine{}, false
	}
	return l, true
}

// nonFinal are the outcomes after which the message stays in the queue
// (parked: held hidden while the database is unhealthy).
var nonFinal = map[string]bool{
	worker.OutcomeInFlight: true, worker.OutcomeRetry: true, worker.OutcomeDeferred: true,
	worker.OutcomeLeaseLost: true, worker.OutcomeReleased: true, worker.OutcomeParked: true,
}

// IsFinal reports whether a delivery line's outcome means the message left
// the queue (deleted, or copied to the DLQ and deleted): applied, duplicate,
// superseded, a handler's own outcome (e.g. already_recorded), or terminal
// under the dlq or quarantine policy. dlqFailed says the worker logged that
// the DLQ copy of this delivery failed (the message was kept).
func IsFinal(l LogLine, dlqFailed bool) bool {
	if !l.IsDelivery() || l.Outcome == "" || nonFinal[l.Outcome] {
		return false
	}
	if l.Outcome == worker.OutcomeTerminal {
		if dlqFailed {
			return false
		}
		return l.TerminalPolicy == string(worker.PolicyDLQ) || l.TerminalPolicy == string(worker.PolicyQuarantine)
	}
	return true
}

// Tally counts what the workers logged. Safe for concurrent use.
type Tally struct {
	mu        sync.Mutex
	lines     int
	unparsed  int
	faults    map[string]int
	killed    map[string]int // failpoint kills by name
	outcomes  map[string]int
	terminal  map[string]int // terminal outcomes by failure code
	retries   map[string]int // retry outcomes by failure code
	codes     map[string]int // AWS error codes in warnings and errors
	events    map[string]int // other WARN/ERROR messages by msg
	alerts    int
	long      time.Duration             // a delivery at least this long outlived its lease
	late      map[string]int            // outcomes of deliveries that took at least long
	final     map[string]bool           // SQS message ids that reached a final outcome
	dlqFailed map[string]bool           // pending: the next terminal line of this id is not final
	receives  map[string]int            // highest receive count logged per SQS message id
	byKey     map[string]map[string]int // final outcomes per idempotency key
	redeliv   map[string]map[string]int // final outcomes of redeliveries (receive count > 1) per message type
	lastBad   []string                  // the last unparsed lines
}

// NewTally returns an empty Tally; deliveries that took at least lease are
// also counted by outcome in Snapshot.Late (0: not counted).
func NewTally(lease time.Duration) *Tally {
	return &Tally{long: lease, late: map[string]int{}, faults: map[string]int{}, killed: map[string]int{}, outcomes: map[string]int{}, terminal: map[string]int{},
		retries: map[string]int{}, codes: map[string]int{}, events: map[string]int{}, final: map[string]bool{}, dlqFailed: map[string]bool{},
		receives: map[string]int{}, byKey: map[string]map[string]int{}, redeliv: map[string]map[string]int{}}
}

// Observe tallies one raw log line. It returns the parsed line and whether
// it was one.
func (t *Tally) Observe(raw []byte) (LogLine, bool) {
	l, ok := ParseLine(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines++
	if !ok {
		t.unparsed++
		if len(raw) > 0 {
			s := string(raw)
			if len(s) > 300 {
				s = s[:300] + "…"
			}
			t.lastBad = append(t.lastBad, s)
			if len(t.lastBad) > 10 {
				t.lastBad = t.lastBad[1:]
			}
		}
		return l, false
	}
	if l.Level == levelWarn || l.Level == levelError {
		if code := l.ErrorCode(); code != "" {
			t.codes[code]++
		}
	}
	msg := l.Msg
	if l.IsDelivery() {
		msg = msgMessage
	}
	switch msg {
	case msgFaultInjected:
		t.faults[l.Fault]++
	case msgFailpointKill:
		t.killed[l.Failpoint]++
	case msgDLQSendFailed:
		t.dlqFailed[l.SQSMessageID] = true
		t.events[l.Msg]++
	case msgMessage:
		t.outcomes[l.Outcome]++
		switch l.Outcome {
		case worker.OutcomeTerminal:
			t.terminal[l.FailureCode]++
		case worker.OutcomeRetry:
			t.retries[l.FailureCode]++
		}
		if l.SQSMessageID != "" && l.ReceiveCount > t.receives[l.SQSMessageID] {
			t.receives[l.SQSMessageID] = l.ReceiveCount
		}
		if t.long > 0 && time.Duration(l.ProcessingMs)*time.Millisecond >= t.long {
			t.late[l.Outcome]++
		}
		failed := t.dlqFailed[l.SQSMessageID]
		if l.Outcome == worker.OutcomeTerminal {
			delete(t.dlqFailed, l.SQSMessageID)
		}
		if IsFinal(l, failed) && l.SQSMessageID != "" {
			t.final[l.SQSMessageID] = true
			if l.IdempotencyKey != "" {
				if t.byKey[l.IdempotencyKey] == nil {
					t.byKey[l.IdempotencyKey] = map[string]int{}
				}
				t.byKey[l.IdempotencyKey][l.Outcome]++
			}
			if l.ReceiveCount > 1 && l.MessageType != "" {
				if t.redeliv[l.MessageType] == nil {
					t.redeliv[l.MessageType] = map[string]int{}
				}
				t.redeliv[l.MessageType][l.Outcome]++
			}
		}
	case msgHashMismatch:
		t.alerts++
	default:
		if l.Level == levelWarn || l.Level == levelError {
			t.events[l.Msg]++
		}
	}
	return l, true
}

// IsSettled reports whether the message with this SQS id reached a final
// outcome in some log.
func (t *Tally) IsSettled(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.final[id]
}

// Settled counts how many of ids reached a final outcome.
func (t *Tally) Settled(ids []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range ids {
		if t.final[id] {
			n++
		}
	}
	return n
}

// KeyOutcomes are the final outcomes logged per idempotency key, how
// often each (a copy).
func (t *Tally) KeyOutcomes() map[string]map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneNested(t.byKey)
}

func cloneNested(m map[string]map[string]int) map[string]map[string]int {
	out := make(map[string]map[string]int, len(m))
	for k, inner := range m {
		out[k] = maps.Clone(inner)
	}
	return out
}

// MaxReceiveCount is the highest receive count logged for any of ids.
func (t *Tally) MaxReceiveCount(ids []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range ids {
		n = max(n, t.receives[id])
	}
	return n
}

// Snapshot is a copy of the tallies.
type Snapshot struct {
	Lines          int            `json:"logLines"`
	Unparsed       int            `json:"unparsedLines"`
	Faults         map[string]int `json:"faults"`
	FailpointKills map[string]int `json:"failpointKills"`
	Outcomes       map[string]int `json:"outcomes"`
	Terminal       map[string]int `json:"terminalByCode"`
	Retries        map[string]int `json:"retriesByCode"`
	Events         map[string]int `json:"warningsAndErrors"`
	// ErrorCodes are the AWS error codes the warnings and errors carry.
	ErrorCodes map[string]int `json:"errorCodes"`
	Alerts     int            `json:"hashMismatchAlerts"`
	// Late are the outcomes of deliveries that took at least a lease (a
	// paused worker, a delayed commit): applied only while the heartbeat
	// kept the lease, otherwise fenced (duplicate, lease_lost).
	Late map[string]int `json:"lateDeliveries"`
	// Redelivered are the final outcomes of redeliveries (SQS receive
	// count above 1: a worker killed or paused while it held the message,
	// a lost delete, an expired visibility) by message type. A
	// redelivery that ends duplicate found its work applied by an earlier
	// delivery that never acked it.
	Redelivered  map[string]map[string]int `json:"redeliveredFinalOutcomes"`
	Final        int                       `json:"messagesSettled"`
	LastUnparsed []string                  `json:"lastUnparsed,omitempty"`
}

// Snapshot copies the tallies.
func (t *Tally) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Snapshot{Lines: t.lines, Unparsed: t.unparsed, Faults: maps.Clone(t.faults), FailpointKills: maps.Clone(t.killed),
		Outcomes: maps.Clone(t.outcomes), Terminal: maps.Clone(t.terminal), Retries: maps.Clone(t.retries), ErrorCodes: maps.Clone(t.codes),
		Events: maps.Clone(t.events), Alerts: t.alerts, Late: maps.Clone(t.late), Redelivered: cloneNested(t.redeliv), Final: len(t.final),
		LastUnparsed: append([]string(nil), t.lastBad...)}
}

// FailpointKillTotal is the total of failpoint kills.
func (s Snapshot) FailpointKillTotal() int {
	n := 0
	for _, v := range s.FailpointKills {
		n += v
	}
	return n
}

// FaultTotal is the total of injected faults.
func (s Snapshot) FaultTotal() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}
