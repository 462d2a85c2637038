package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Lines as the worker process writes them (log/slog's JSON handler).
const (
	lineApplied   = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker_message_completed","sqsMessageId":"m1","result":"applied","receiveCount":1,"processingMs":12,"idempotencyKey":"k1","attempt":1}`
	lineInFlight  = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker_message_in_flight","sqsMessageId":"m2","result":"in_flight","receiveCount":1,"visibilityS":3}`
	lineRetry     = `{"time":"2026-01-01T00:00:00Z","level":"WARN","msg":"worker_message_retry","sqsMessageId":"m2","result":"retry","failureKind":"retryable","failureCode":"TRANSACTION_CONFLICT"}`
	lineDuplicate = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker_message_duplicate","sqsMessageId":"m2","result":"duplicate"}`
	lineTerminal  = `{"time":"2026-01-01T00:00:00Z","level":"ERROR","msg":"worker_message_terminal","sqsMessageId":"m3","result":"terminal","failureKind":"terminal","failureCode":"INVALID_JSON","terminalPolicy":"dlq"}`
	lineDLQFailed = `{"time":"2026-01-01T00:00:00Z","level":"ERROR","msg":"DLQ send failed; message kept","sqsMessageId":"m4","error":"boom"}`
	lineTerminal4 = `{"time":"2026-01-01T00:00:00Z","level":"ERROR","msg":"worker_message_terminal","sqsMessageId":"m4","result":"terminal","failureCode":"CASE_NOT_FOUND","terminalPolicy":"dlq"}`
	lineRedrive   = `{"time":"2026-01-01T00:00:00Z","level":"ERROR","msg":"worker_message_terminal","sqsMessageId":"m5","result":"terminal","failureCode":"X","terminalPolicy":"redrive"}`
	lineFault     = `{"time":"2026-01-01T00:00:00Z","level":"WARN","msg":"fault injected","fault":"lost_response","service":"DynamoDB","operation":"PutItem"}`
	lineFailpoint = `{"time":"2026-01-01T00:00:00Z","level":"WARN","msg":"failpoint kill","failpoint":"after-gate","pid":42}`
	lineAlert     = `{"time":"2026-01-01T00:00:00Z","level":"ERROR","msg":"ALERT idempotency hash mismatch: the key already holds other work; the existing record is untouched","idempotencyKey":"k"}`
	lineStarted   = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker started","table":"t"}`
	lineWarn      = `{"time":"2026-01-01T00:00:00Z","level":"WARN","msg":"change visibility failed","sqsMessageId":"m9"}`
	lineCustom    = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker_message_completed","sqsMessageId":"m6","result":"already_recorded"}`
	lineLate      = `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"worker_message_duplicate","sqsMessageId":"m7","result":"duplicate","processingMs":5012}`
)

func TestParseLine(t *testing.T) {
	l, ok := ParseLine([]byte(lineTerminal))
	require.True(t, ok)
	require.Equal(t, LogLine{Level: "ERROR", Msg: "worker_message_terminal", SQSMessageID: "m3", Outcome: "terminal", FailureCode: "INVALID_JSON", TerminalPolicy: "dlq"}, l)

	for _, bad := range []string{"", "panic: boom", "goroutine 1 [running]:", `{"level":"INFO"}`, `{"msg":`, "ddbworker: --queue-url is required"} {
		_, ok := ParseLine([]byte(bad))
		require.False(t, ok, bad)
	}
}

func TestIsFinal(t *testing.T) {
	for line, want := range map[string]bool{
		lineApplied: true, lineDuplicate: true, lineCustom: true, lineTerminal: true,
		lineInFlight: false, lineRetry: false, lineRedrive: false, lineFault: false, lineStarted: false,
		`{"level":"INFO","msg":"worker_message_lease_lost","sqsMessageId":"x","result":"lease_lost"}`:         false,
		`{"level":"INFO","msg":"worker_message_deferred","sqsMessageId":"x","result":"deferred"}`:             false,
		`{"level":"INFO","msg":"worker_message_released","sqsMessageId":"x","result":"released"}`:             false,
		`{"level":"WARN","msg":"worker_message_parked","sqsMessageId":"x","result":"parked"}`:                 false,
		`{"level":"INFO","msg":"worker_message_superseded","sqsMessageId":"x","result":"superseded"}`:         true,
		`{"level":"ERROR","msg":"worker_message_terminal","result":"terminal","terminalPolicy":"quarantine"}`: true,
	} {
		l, ok := ParseLine([]byte(line))
		require.True(t, ok, line)
		require.Equal(t, want, IsFinal(l, false), line)
	}
	l, _ := ParseLine([]byte(lineTerminal))
	require.False(t, IsFinal(l, true), "a terminal whose DLQ copy failed stays in the queue")
}

func TestTally(t *testing.T) {
	tl := NewTally(3 * time.Second)
	for _, line := range []string{lineStarted, lineFault, lineFault, lineFailpoint, lineApplied, lineInFlight, lineRetry, lineDuplicate,
		lineTerminal, lineDLQFailed, lineTerminal4, lineRedrive, lineAlert, lineWarn, lineCustom, lineLate, "panic: runtime error", ""} {
		tl.Observe([]byte(line))
	}
	s := tl.Snapshot()
	require.Equal(t, 18, s.Lines)
	require.Equal(t, 2, s.Unparsed)
	require.Equal(t, []string{"panic: runtime error"}, s.LastUnparsed)
	require.Equal(t, map[string]int{"lost_response": 2}, s.Faults)
	require.Equal(t, 2, s.FaultTotal())
	require.Equal(t, map[string]int{"after-gate": 1}, s.FailpointKills)
	require.Equal(t, 1, s.FailpointKillTotal())
	require.Equal(t, map[string]int{"applied": 1, "in_flight": 1, "retry": 1, "duplicate": 2, "terminal": 3, "already_recorded": 1}, s.Outcomes)
	require.Equal(t, map[string]int{"duplicate": 1}, s.Late, "only deliveries of at least a lease")
	require.Equal(t, map[string]int{"INVALID_JSON": 1, "CASE_NOT_FOUND": 1, "X": 1}, s.Terminal)
	require.Equal(t, map[string]int{"TRANSACTION_CONFLICT": 1}, s.Retries)
	require.Equal(t, map[string]int{"DLQ send failed; message kept": 1, "change visibility failed": 1}, s.Events)
	require.Equal(t, 1, s.Alerts)

	// m1 applied, m2 duplicate after in-flight and retry, m3 terminal in
	// the DLQ, m6 a handler's own outcome: settled. m4's DLQ copy failed,
	// m5 is left to the redrive policy: not settled.
	require.Equal(t, 5, s.Final)
	for id, want := range map[string]bool{"m1": true, "m2": true, "m3": true, "m6": true, "m4": false, "m5": false, "m9": false} {
		require.Equal(t, want, tl.IsSettled(id), id)
	}
	require.Equal(t, 2, tl.Settled([]string{"m1", "m4", "m3", "nope"}))

	// The DLQ failure applies to one delivery only: the redelivery's
	// terminal line settles m4.
	tl.Observe([]byte(lineTerminal4))
	require.True(t, tl.IsSettled("m4"))

	// Final outcomes by idempotency key: a line without a key, or not
	// final, counts for none.
	require.Equal(t, map[string]map[string]int{"k1": {"applied": 1}}, tl.KeyOutcomes())
	tl.Observe([]byte(`{"level":"INFO","msg":"worker_message_superseded","sqsMessageId":"m8","result":"superseded","idempotencyKey":"k1"}`))
	tl.Observe([]byte(`{"level":"INFO","msg":"worker_message_in_flight","sqsMessageId":"m8","result":"in_flight","idempotencyKey":"k2"}`))
	require.Equal(t, map[string]map[string]int{"k1": {"applied": 1, "superseded": 1}}, tl.KeyOutcomes())
}

func TestErrorCode(t *testing.T) {
	for line, want := range map[string]string{
		`{"level":"WARN","msg":"delete gave up; the redelivery will be a duplicate","reason":"operation error SQS: DeleteMessageBatch, https response error StatusCode: 400, RequestID: , AWS.SimpleQueueService.TooManyEntriesInBatchRequest: Maximum number of entries per request are 10."}`: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
		`{"level":"WARN","msg":"delete gave up; the redelivery will be a duplicate","reason":"operation error SQS: DeleteMessageBatch, AWS.SimpleQueueService.InternalError: injected SQS failure"}`:                                                                                            "AWS.SimpleQueueService.InternalError",
		`{"level":"WARN","msg":"change visibility failed","error":"operation error SQS: ChangeMessageVisibility, https response error StatusCode: 400, RequestID: , AWS.SimpleQueueService.MessageNotInflight: "}`:                                                                              "AWS.SimpleQueueService.MessageNotInflight",
		`{"level":"WARN","msg":"lease renewal failed; retrying","error":"stale: renew k/T: operation error DynamoDB: UpdateItem, exceeded maximum number of attempts, 3, ProvisionedThroughputExceededException: injected"}`:                                                                    "ProvisionedThroughputExceededException",
		`{"level":"WARN","msg":"could not record failure","error":"faults: UpdateItem: read: connection reset by peer (injected: response lost after the server applied the request)"}`:                                                                                                         "",
		lineApplied: "",
	} {
		l, ok := ParseLine([]byte(line))
		require.True(t, ok, line)
		require.Equal(t, want, l.ErrorCode(), line)
	}
	require.True(t, IsMalformed("AWS.SimpleQueueService.TooManyEntriesInBatchRequest"))
	require.True(t, IsMalformed("ValidationException"))
	require.False(t, IsMalformed("AWS.SimpleQueueService.InternalError"))
	require.False(t, IsMalformed("ProvisionedThroughputExceededException"))

	tl := NewTally(0)
	tl.Observe([]byte(`{"level":"WARN","msg":"delete gave up; the redelivery will be a duplicate","reason":"x, AWS.SimpleQueueService.TooManyEntriesInBatchRequest: y"}`))
	tl.Observe([]byte(`{"level":"INFO","msg":"something","error":"ValidationException: ignored below WARN"}`))
	s := tl.Snapshot()
	require.Equal(t, map[string]int{"AWS.SimpleQueueService.TooManyEntriesInBatchRequest": 1}, s.ErrorCodes)
	require.Empty(t, s.Late, "no lease given: nothing counted as late")
}

// The highest receive count logged per message, for the outage windows.
func TestTallyReceiveCount(t *testing.T) {
	tl := NewTally(0)
	for _, line := range []string{
		`{"level":"WARN","msg":"worker_message_retry","sqsMessageId":"a","result":"retry","receiveCount":1}`,
		`{"level":"WARN","msg":"worker_message_parked","sqsMessageId":"a","result":"parked","receiveCount":3}`,
		`{"level":"INFO","msg":"worker_message_completed","sqsMessageId":"a","result":"applied","receiveCount":3}`,
		`{"level":"INFO","msg":"worker_message_completed","sqsMessageId":"b","result":"applied","receiveCount":2}`,
	} {
		tl.Observe([]byte(line))
	}
	require.Equal(t, 3, tl.MaxReceiveCount([]string{"a", "b"}))
	require.Equal(t, 2, tl.MaxReceiveCount([]string{"b", "nope"}))
	require.Zero(t, tl.MaxReceiveCount(nil))
	require.Equal(t, 1, tl.Snapshot().Outcomes["parked"])
}

// Redeliveries' final outcomes by message type: a redelivery of work that
// applied (a worker killed between its commit and its ack) ends duplicate.
func TestTallyRedelivered(t *testing.T) {
	tl := NewTally(0)
	for _, line := range []string{
		`{"level":"INFO","msg":"worker_message_completed","sqsMessageId":"a","result":"applied","receiveCount":1,"messageType":"S"}`,
		`{"level":"INFO","msg":"worker_message_duplicate","sqsMessageId":"a","result":"duplicate","receiveCount":2,"messageType":"S"}`,
		`{"level":"INFO","msg":"worker_message_duplicate","sqsMessageId":"b","result":"duplicate","receiveCount":1,"messageType":"S"}`,
		`{"level":"WARN","msg":"worker_message_retry","sqsMessageId":"c","result":"retry","receiveCount":2,"messageType":"S"}`,
		`{"level":"INFO","msg":"worker_message_superseded","sqsMessageId":"d","result":"superseded","receiveCount":3,"messageType":"S"}`,
		`{"level":"INFO","msg":"worker_message_completed","sqsMessageId":"e","result":"applied","receiveCount":2,"messageType":"T"}`,
	} {
		tl.Observe([]byte(line))
	}
	require.Equal(t, map[string]map[string]int{"S": {"duplicate": 1, "superseded": 1}, "T": {"applied": 1}}, tl.Snapshot().Redelivered,
		"final outcomes only, receive count above 1 only")
}
