package bench

import (
	"errors"
	"time"

	"github.com/ddbworker/ddbworker/inbox"
)

// Variant is how the throttled scenario's worker runs.
type Variant string

// The variants of the throttled scenario.
const (
	// VariantGated is the worker as shipped: the database health gate and
	// the adaptive concurrency limit.
	VariantGated Variant = "gated"
	// VariantUngated turns both off through internal/hooks: the worker as
	// it was before it had them.
	VariantUngated Variant = "ungated"
)

// errNoThrottle is the production build's answer to Config.Throttle.
var errNoThrottle = errors.New("bench: the throttled scenario needs the development build (go build -tags ddbworker_dev; bin/ddbworker-dev)")

// Throttled scenario defaults.
const (
	ThrottleMessagesDefault    = 300
	ThrottleConcurrencyDefault = 16
	ThrottleTimeoutDefault     = 3 * time.Minute
	ThrottleSeedDefault        = 1
	// ThrottleMaxReceiveCount is the scenario queue's redrive policy: a
	// realistic one, which a worker that keeps receiving through throttling
	// walks messages to.
	ThrottleMaxReceiveCount = 10
)

// ThrottledResult is one run of the throttled scenario: one variant of the
// default worker (gate + commit) at one throttle fraction, through a
// ddbproxy that throttles that share of the requests at random.
type ThrottledResult struct {
	Fraction    float64 `json:"throttleFraction"`
	Variant     Variant `json:"variant"`
	Concurrency int     `json:"concurrency"`
	Messages    int     `json:"messages"`
	// Applied counts the messages whose work is applied, read back from the
	// case items.
	Applied int `json:"applied"`
	// TimedOut: the run was stopped at Config.ThrottleTimeout with messages
	// neither applied nor dead-lettered.
	TimedOut bool          `json:"timedOut"`
	Elapsed  time.Duration `json:"elapsedNs"`
	// Throughput is applied messages per second of Elapsed.
	Throughput float64 `json:"appliedPerSecond"`
	// Requests are the DynamoDB requests the proxy received (the SDK's
	// retries and the throttled ones included), by operation in
	// RequestsByOperation; Throttled of them were answered with a throttle.
	Requests            int            `json:"dynamodbRequests"`
	Throttled           int            `json:"throttledRequests"`
	RequestsByOperation map[string]int `json:"requestsByOperation"`
	// Calls are the worker's DynamoDB calls (its metrics; each is up to
	// CallAttempts requests) and its probes (one request each).
	Calls int `json:"dynamodbCalls"`
	// SQSCalls are the worker's SQS calls, by operation in SQSByOperation.
	SQSCalls       int            `json:"sqsCalls"`
	SQSByOperation map[string]int `json:"sqsByOperation"`
	Probes         int            `json:"probes"`
	// Pauses counts the health gate's trips; Paused is the time it held
	// receiving (sampled every 25 ms).
	Pauses int           `json:"pauses"`
	Paused time.Duration `json:"pausedNs"`
	// MinLimit is the lowest concurrency limit seen; AvgLimit its time
	// average while the worker was receiving (sampled every 25 ms).
	MinLimit int     `json:"minConcurrencyLimit"`
	AvgLimit float64 `json:"avgConcurrencyLimit"`
	// DeadLettered counts the messages the queue's redrive policy moved to
	// the DLQ (maxReceiveCount 10); WorkerDLQ those the worker sent there
	// by its terminal policy.
	DeadLettered int `json:"deadLettered"`
	WorkerDLQ    int `json:"workerDlq"`
	// AttemptsUsed is the business attempts the inbox records count beyond
	// one per applied message: infrastructure trouble is not an attempt, so
	// it must be 0.
	AttemptsUsed int `json:"businessAttemptsUsed"`
	// MaxAttempts is the most business attempts any record counts (the
	// worker's default limit is 5).
	MaxAttempts int `json:"maxBusinessAttempts"`
	// InboxStatus counts the run's inbox records by status.
	InboxStatus map[inbox.Status]int `json:"inboxStatus"`
	// AppliedTwice counts work applied more than once (must be 0).
	AppliedTwice int `json:"appliedTwice"`
	// Per applied message.
	RequestsPerMessage  float64 `json:"dynamodbRequestsPerApplied"`
	ThrottledPerMessage float64 `json:"throttledRequestsPerApplied"`
	SQSPerMessage       float64 `json:"sqsCallsPerApplied"`
}

// Left is how many messages were neither applied nor dead-lettered.
func (r *ThrottledResult) Left() int { return max(0, r.Messages-r.Applied-r.DeadLettered-r.WorkerDLQ) }
