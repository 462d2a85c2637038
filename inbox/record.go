package inbox

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ddbworker/ddbworker/internal/attr"
)

// Status of an inbox record.
type Status string

// The inbox state machine (transition.go): PROCESSING → COMPLETED |
// FAILED_RETRYABLE | FAILED_TERMINAL; FAILED_RETRYABLE → PROCESSING
// (takeover); an expired PROCESSING lease → PROCESSING (takeover) or, long
// expired, FAILED_TERMINAL LEASE_ABANDONED (sweeper), which a delivery of
// the same work takes over again.
const (
	StatusProcessing      Status = "PROCESSING"
	StatusCompleted       Status = "COMPLETED"
	StatusFailedRetryable Status = "FAILED_RETRYABLE"
	StatusFailedTerminal  Status = "FAILED_TERMINAL"
)

// Outcomes of a COMPLETED record. Handlers may report others.
const (
	OutcomeApplied    = "APPLIED"
	OutcomeSuperseded = "SUPERSEDED"
)

// Attributes of the reopen audit (ddbworker inbox reopen).
const (
	attrReopenedAt   = attr.ReopenedAt
	attrReopenedBy   = attr.ReopenedBy
	attrReopenReason = attr.ReopenReason
)

// Key prefixes.
const (
	prefixIdempotency = "IDEMP#"
	prefixWorker      = "WORKER#"
	prefixAggregate   = "AGG#"
	prefixRejection   = "REJECT#"
	rejectionSK       = "REJECT"
)

// TimeLayout is the fixed-width UTC form of every timestamp attribute except
// leaseExpiresAt (epoch ms) and ttl (epoch s). Fixed width keeps index sort
// keys in time order.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t in TimeLayout ("" for the zero time).
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

// ErrDecode reports an item that is not an inbox record.
var ErrDecode = errors.New("inbox: not an inbox record")

// Record is one inbox record: the idempotency state of one work item, or a
// rejection (Rejection true) of a message that had no usable key.
type Record struct {
	Key           string `dynamodbav:"idempotencyKey,omitempty"`
	MessageType   string `dynamodbav:"messageType,omitempty"`
	Status        Status `dynamodbav:"status"`
	RequestHash   string `dynamodbav:"requestHash,omitempty"`
	SchemaVersion int    `dynamodbav:"schemaVersion,omitempty"`
	AggregateType string `dynamodbav:"aggregateType,omitempty"`
	AggregateID   string `dynamodbav:"aggregateId,omitempty"`
	CorrelationID string `dynamodbav:"correlationId,omitempty"`
	CausationID   string `dynamodbav:"causationId,omitempty"`
	Producer      string `dynamodbav:"producer,omitempty"`
	SQSMessageID  string `dynamodbav:"sqsMessageId,omitempty"`
	FirstSeenAt   string `dynamodbav:"firstSeenAt,omitempty"`
	LastSeenAt    string `dynamodbav:"lastSeenAt,omitempty"`
	StartedAt     string `dynamodbav:"startedAt,omitempty"`
	CompletedAt   string `dynamodbav:"completedAt,omitempty"`
	FailedAt      string `dynamodbav:"failedAt,omitempty"`
	// Attempts counts the business attempts that failed: each recorded
	// handler failure adds one, in the same fenced write (Fail). Taking a
	// lease charges nothing, so trouble with the infrastructure — which
	// ends a lease without a business outcome — never counts.
	Attempts int `dynamodbav:"attempts,omitempty"`
	// Deliveries counts the acquisitions of the record's lease (the fresh
	// claim and every takeover).
	Deliveries int `dynamodbav:"deliveries,omitempty"`
	// Takeovers counts the leases that expired without any outcome (their
	// holder crashed, hung or lost the database) and were taken over; a
	// lease given back (Release) is not counted. Bounded by the worker's
	// MaxTakeovers, so work that kills its worker every time ends.
	Takeovers      int    `dynamodbav:"takeovers,omitempty"`
	LeaseOwner     string `dynamodbav:"leaseOwner,omitempty"`
	LeaseToken     string `dynamodbav:"leaseToken,omitempty"`
	LeaseExpiresAt int64  `dynamodbav:"leaseExpiresAt,omitempty"` // epoch ms
	FailureCode    string `dynamodbav:"failureCode,omitempty"`
	FailureMessage string `dynamodbav:"failureMessage,omitempty"`
	Outcome        string `dynamodbav:"outcome,omitempty"`
	ResultRef      string `dynamodbav:"resultRef,omitempty"`
	// ReopenedAt, ReopenedBy and ReopenReason audit the last time an
	// operator reopened the record (ddbworker inbox reopen).
	ReopenedAt   string `dynamodbav:"reopenedAt,omitempty"`
	ReopenedBy   string `dynamodbav:"reopenedBy,omitempty"`
	ReopenReason string `dynamodbav:"reopenReason,omitempty"`
	// DiscardedAt, DiscardedBy and DiscardReason say that an operator
	// removed the work's message from the DLQ for good (ddbworker dlq
	// discard): the work will never run, and the record says so.
	DiscardedAt   string    `dynamodbav:"discardedAt,omitempty"`
	DiscardedBy   string    `dynamodbav:"discardedBy,omitempty"`
	DiscardReason string    `dynamodbav:"discardReason,omitempty"`
	TTL           int64     `dynamodbav:"ttl,omitempty"` // epoch s
	PK            string    `dynamodbav:"PK"`
	SK            string    `dynamodbav:"SK"`
	GSI1PK        string    `dynamodbav:"GSI1PK,omitempty"`
	GSI1SK        string    `dynamodbav:"GSI1SK,omitempty"`
	GSI2PK        string    `dynamodbav:"GSI2PK,omitempty"`
	GSI2SK        string    `dynamodbav:"GSI2SK,omitempty"`
	Rejection     bool      `dynamodbav:"-"`
	LeaseExpiry   time.Time `dynamodbav:"-"`
}

// finish checks a decoded record's key and fills what the key implies.
func (r *Record) finish() (*Record, error) {
	switch {
	case strings.HasPrefix(r.PK, prefixIdempotency) && strings.HasPrefix(r.SK, prefixWorker):
		if r.Key == "" {
			r.Key = strings.TrimPrefix(r.PK, prefixIdempotency)
		}
		if r.MessageType == "" {
			r.MessageType = strings.TrimPrefix(r.SK, prefixWorker)
		}
	case strings.HasPrefix(r.PK, prefixRejection) && r.SK == rejectionSK:
		r.Rejection = true
	default:
		return nil, fmt.Errorf("%w: key %q/%q", ErrDecode, r.PK, r.SK)
	}
	// What the record does not repeat (Store.Encode): the aggregate the
	// index key holds, the start and the last activity its timestamps hold.
	if r.AggregateType == "" && r.AggregateID == "" {
		r.AggregateType, r.AggregateID, _ = aggregateOf(r.GSI1PK)
	}
	if r.StartedAt == "" {
		r.StartedAt = r.FirstSeenAt
	}
	if r.LeaseExpiresAt > 0 {
		r.LeaseExpiry = time.UnixMilli(r.LeaseExpiresAt)
	}
	return r, nil
}

// LastActivity is when anything last happened to r: the latest of its
// timestamps (lastSeenAt is written only by the transitions that set no
// timestamp of their own: a renewal, a release, a takeover).
func (r *Record) LastActivity() string {
	return max(r.LastSeenAt, r.FirstSeenAt, r.StartedAt, r.CompletedAt, r.FailedAt) // fixed-width UTC: sorts as time
}

// Released reports whether r is PROCESSING with its lease given back
// (Release): no holder, nothing to wait for, and no crash to count when
// the next delivery takes it over. Records released by workers before
// version 0.9 kept their token and set leaseExpiresAt to 0.
func (r *Record) Released() bool {
	return r.Status == StatusProcessing && (r.LeaseToken == "" || r.LeaseExpiresAt == 0)
}

// AbandonedLease reports whether r holds a lease that, if it has expired,
// ended without any outcome: PROCESSING under a token that was never given
// back (its holder crashed, hung, or could not reach the database), or a
// record the sweeper ended LEASE_ABANDONED. Taking it over counts one
// takeover.
func (r *Record) AbandonedLease() bool {
	return (r.Status == StatusProcessing && !r.Released()) ||
		(r.Status == StatusFailedTerminal && r.FailureCode == codeLeaseAbandoned)
}

// codeLeaseAbandoned is failure.CodeLeaseAbandoned (package failure
// imports this one).
const codeLeaseAbandoned = "LEASE_ABANDONED"

// PK is the partition key of key's records.
func PK(key string) string { return prefixIdempotency + key }

// SK is the sort key of messageType's record.
func SK(messageType string) string { return prefixWorker + messageType }

// AggregatePK is the aggregate index partition key.
func AggregatePK(aggregateType, aggregateID string) string {
	return prefixAggregate + aggregateType + "#" + aggregateID
}

// AggregateSK is the aggregate index sort key: the first-seen time, so one
// aggregate's history lists in arrival order. The index is KEYS_ONLY: each
// entry carries the table's own key (the idempotency key and the message
// type) beside it, so the sort key repeats neither. Records written before
// 0.9 carry firstSeenAt#messageType#key, which sorts the same.
func AggregateSK(firstSeenAt, messageType, key string) string { return firstSeenAt }

// aggregateOf splits an aggregate index partition key into the aggregate's
// type and id (an aggregate type holds no '#': envelope names are
// [A-Za-z0-9._-]).
func aggregateOf(pk string) (aggregateType, aggregateID string, ok bool) {
	rest, found := strings.CutPrefix(pk, prefixAggregate)
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, "#")
}

// DynamoDB's key size limits, in bytes of UTF-8.
const (
	maxPartitionKeyBytes = 2048
	maxSortKeyBytes      = 1024
)

// CheckKeyLimits reports whether every key an inbox record derives from a
// work item fits DynamoDB's limits when idempotency keys are at most
// maxKeyBytes and message types, aggregate types and ids and SQS message
// ids at most maxFieldBytes: the record's own key, the aggregate index's
// partition key (its sort key is a timestamp) and a rejection's key. A request whose key does not fit is refused by DynamoDB with a
// ValidationException that no retry heals.
func CheckKeyLimits(maxKeyBytes, maxFieldBytes int) error {
	var errs []error
	if n := len(prefixIdempotency) + maxKeyBytes; n > maxPartitionKeyBytes {
		errs = append(errs, fmt.Errorf("inbox: idempotency keys of %d bytes make a partition key of %d bytes, DynamoDB allows %d", maxKeyBytes, n, maxPartitionKeyBytes))
	}
	if n := len(prefixWorker) + maxFieldBytes; n > maxSortKeyBytes {
		errs = append(errs, fmt.Errorf("inbox: message types of %d bytes make a sort key of %d bytes, DynamoDB allows %d", maxFieldBytes, n, maxSortKeyBytes))
	}
	if n := len(prefixAggregate) + 1 + 2*maxFieldBytes; n > maxPartitionKeyBytes {
		errs = append(errs, fmt.Errorf("inbox: aggregate types and ids of %d bytes make an aggregate index key of %d bytes, DynamoDB allows %d", maxFieldBytes, n, maxPartitionKeyBytes))
	}
	return errors.Join(errs...)
}

// Shard spreads attention-index entries of one status over n partitions so
// a burst of failures does not make one hot key. Stable for a key.
func Shard(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint32(h[:4]) % uint32(n))
}

// AttentionPK is the attention index partition key of status in shard.
func AttentionPK(status Status, shard int) string {
	return string(status) + "#" + fmt.Sprintf("%02d", shard)
}

// Lease is a worker's claim on one record: proof, by its token, that it may
// complete or fail the record. A new token is minted at every acquisition, so
// a worker whose lease was taken over cannot write (fencing).
type Lease struct {
	Key         string
	MessageType string
	Token       string
	Owner       string
	// Attempt is the business attempt this lease runs: the failed attempts
	// recorded before it, plus one. Fail records it as the record's
	// attempts; nothing else changes the count.
	Attempt int
	// ExpiresAt is the lease's end as written to leaseExpiresAt.
	ExpiresAt time.Time
	// RequestHash of the work item, carried into the fused path's record.
	RequestHash string
}

// Work identifies one work item and carries what its record remembers of
// the message that first brought it.
type Work struct {
	Key           string
	MessageType   string
	RequestHash   string
	SchemaVersion int
	AggregateType string
	AggregateID   string
	CorrelationID string
	CausationID   string
	Producer      string
}

// NewRecord returns the record of w first seen at now: keys, messageType
// (the key itself lives only in PK, it may be long), identity,
// timestamps and aggregate-index keys, with Deliveries 1 and no attempt
// counted (attempts count failures). The caller sets status, lease and TTL.
func NewRecord(w *Work, now time.Time) *Record {
	ts := FormatTime(now)
	return &Record{
		PK: PK(w.Key), SK: SK(w.MessageType), MessageType: w.MessageType,
		RequestHash: w.RequestHash, SchemaVersion: w.SchemaVersion,
		AggregateType: w.AggregateType, AggregateID: w.AggregateID,
		CorrelationID: w.CorrelationID, CausationID: w.CausationID, Producer: w.Producer,
		FirstSeenAt: ts, LastSeenAt: ts, StartedAt: ts,
		Deliveries: 1,
		GSI1PK:     AggregatePK(w.AggregateType, w.AggregateID),
		GSI1SK:     AggregateSK(ts, w.MessageType, w.Key),
	}
}
