package worker

import (
	"time"

	"github.com/ddbworker/ddbworker/metrics"
)

// Outcome labels of a processed delivery.
const (
	OutcomeApplied    = "applied"
	OutcomeDuplicate  = "duplicate"
	OutcomeSuperseded = "superseded"
	OutcomeInFlight   = "in_flight"
	OutcomeRetry      = "retry"
	OutcomeTerminal   = "terminal"
	OutcomeDeferred   = "deferred"
	OutcomeLeaseLost  = "lease_lost"
	OutcomeReleased   = "released"
	// OutcomeParked: held while the database is unhealthy (not started, or
	// stopped by infrastructure trouble); it runs when the database is
	// healthy again.
	OutcomeParked = "parked"
)

// outcomeLabel bounds the outcome label: a handler's own outcome (any
// string it returns) is counted as applied.
func outcomeLabel(o string) string {
	switch o {
	case OutcomeApplied, OutcomeDuplicate, OutcomeSuperseded, OutcomeInFlight, OutcomeRetry, OutcomeTerminal,
		OutcomeDeferred, OutcomeLeaseLost, OutcomeReleased, OutcomeParked:
		return o
	}
	return OutcomeApplied
}

// Event describes one processed delivery; Deps.OnEvent receives it after the
// delivery's disposition (delete queued, visibility changed, DLQ sent).
type Event struct {
	SQSMessageID   string
	IdempotencyKey string
	MessageType    string
	// Outcome is one of the Outcome* labels.
	Outcome string
	// Final is true when the message left the queue (deleted, or moved to
	// the DLQ by this worker): nothing will redeliver it.
	Final bool
	// Code and Kind describe a failure (retry, terminal).
	Code string
	Kind string
	// Attempt is the business attempt the delivery ran as: the number of a
	// run that applied, was superseded or failed (and counted); 0 when no
	// business attempt was made or counted (duplicates, in flight,
	// infrastructure trouble, rejections).
	Attempt int
	// Policy is the terminal policy applied (terminal outcomes only).
	Policy   TerminalPolicy
	Duration time.Duration
	// Visibility is the visibility set on a kept message (retry, in_flight,
	// deferred, parked).
	Visibility time.Duration
	// Infrastructure is true when the delivery ended for infrastructure
	// reasons (throttling, 5xx, timeouts, conflicts, shutdown): no business
	// attempt was counted.
	Infrastructure bool
}

// instruments are what the worker reports through Deps.Metrics; the
// field names are the call sites'.
type instruments struct {
	Received       metrics.Counter
	Outcomes       metrics.Vec[metrics.Counter]
	Failures       metrics.Vec[metrics.Counter]
	HashMismatches metrics.Counter
	Processing     metrics.Vec[metrics.Histogram]
	Commit         metrics.Histogram
	InFlight       metrics.Gauge
	// TenantDwell is each delivery's time from receipt to disposition by
	// tenant: the busiest few by name, the rest as "other" (fair.go).
	TenantDwell metrics.Vec[metrics.Histogram]
	// FairHeld is how many messages are held for their tenant's turn.
	FairHeld      metrics.Gauge
	Concurrency   metrics.Gauge
	Throttles     metrics.Counter
	Conflicts     metrics.Counter
	Extensions    metrics.Counter
	Deletes       metrics.Vec[metrics.Counter]
	DLQSent       metrics.Counter
	MessageAge    metrics.Histogram
	ReceiveErrors metrics.Counter
	// DatabaseHealthy is 1 while the health gate lets the worker receive.
	DatabaseHealthy metrics.Gauge
	// HealthTransitions counts the gate's transitions by the state entered.
	HealthTransitions metrics.Vec[metrics.Counter]
	// Probes counts health probes by result (ok, failed).
	Probes metrics.Vec[metrics.Counter]
	// Parked is how many messages are held until the database is healthy.
	Parked metrics.Gauge
	// DatabaseCapacity is how many messages the worker can have in flight
	// now without harming the database: 0 while the health gate holds,
	// otherwise the adaptive concurrency limit, at most what the write
	// budget (MaxWCU) sustains (capacity.go). The scaling signal: a fleet
	// grows on its queue's backlog only while the database takes it
	// (docs/scaling.md).
	DatabaseCapacity metrics.Gauge
	// DynamoDBCalls counts the worker's DynamoDB calls by operation and
	// result (ok, condition_failed, refused, conflict, throttled,
	// unavailable, timeout, cancelled).
	DynamoDBCalls metrics.Vec[metrics.Counter]
	// BudgetWait is the time writes waited for the write budget (MaxWCU).
	BudgetWait metrics.Counter
	// PayloadFetches counts fetches of payloads by S3 reference by source
	// (payload_ref, extended_client) and result (ok, or the failure code
	// in lower case: payload_not_found, throttled, …).
	PayloadFetches metrics.Vec[metrics.Counter]
	// PayloadAccessDenied counts fetches S3 or KMS refused the worker
	// (alert on any: a permission to fix).
	PayloadAccessDenied metrics.Counter
	// InboxRecordBytes is the size of each work item's COMPLETED inbox
	// record as DynamoDB counts it, by message type: over 1 KB, each
	// write of it costs two units (the worker warns once per type from
	// 900 bytes). Not observed for work that has no record: a
	// single-write route's fresh path, unless it recorded a failure.
	InboxRecordBytes metrics.Vec[metrics.Histogram]
	// CopyAttributesDropped counts the attributes the worker's copies of
	// messages went without, by copy (dlq, resend): SQS carries 10
	// attributes, and ddbworker's own join the producer's. Never one a
	// route reads to take the message (such a copy is not made); the log
	// names them and the message.
	CopyAttributesDropped metrics.Vec[metrics.Counter]
	// HandlerReruns counts handler re-runs by message type: a guard with
	// the Rerun policy (ExpectVersion, Equal by default) failed and the
	// worker ran the handler again within the attempt. Steady re-runs are
	// contention on one item (or an ordering a NewerThan or NewerVersion
	// guard would settle without a read).
	HandlerReruns metrics.Vec[metrics.Counter]
	// HotKeysParked is how many keys are parked now by a key-range
	// throttle or a conflict storm (hotkey.go); the keys themselves are
	// logged, never labels.
	HotKeysParked metrics.Gauge
	// HotKeyDeliveries counts deliveries of parked keys by result (held,
	// probe, parked, ended).
	HotKeyDeliveries metrics.Vec[metrics.Counter]
}

// newInstruments declares the worker's instruments on p.
func newInstruments(p metrics.Provider) *instruments {
	return &instruments{
		Received:              p.Counter("ddbworker_messages_received_total", "SQS messages received.").WithLabelValues(),
		Outcomes:              p.Counter("ddbworker_messages_total", "Processed deliveries by message type and outcome (applied, duplicate, superseded, in_flight, retry, terminal, deferred, lease_lost, released).", "message_type", "outcome"),
		Failures:              p.Counter("ddbworker_failures_total", "Failures by message type, kind and code.", "message_type", "kind", "code"),
		HashMismatches:        p.Counter("ddbworker_hash_mismatches_total", "Deliveries whose idempotency key holds other work (alert on any).").WithLabelValues(),
		Processing:            p.Histogram("ddbworker_processing_seconds", "Time from dispatch to disposition.", exponentialBuckets(0.002, 2, 14), "message_type"),
		Commit:                p.Histogram("ddbworker_transaction_seconds", "Latency of commits: the TransactWriteItems of a gated or fused commit, the one UpdateItem or PutItem of a single-write commit (a single-write result with no write makes no call and is not observed).", exponentialBuckets(0.001, 2, 14)).WithLabelValues(),
		InFlight:              p.Gauge("ddbworker_in_flight", "Messages being processed.").WithLabelValues(),
		TenantDwell:           p.Histogram("ddbworker_tenant_dwell_seconds", "Time from receipt to disposition by tenant (MessageGroupId or the route's tenant field): the busiest tenants of the last minute by name, the rest as other.", exponentialBuckets(0.002, 2, 16), "tenant"),
		FairHeld:              p.Gauge("ddbworker_fair_held", "Messages received and held for their tenant's turn (their tenant is at its share of the concurrency).").WithLabelValues(),
		Concurrency:           p.Gauge("ddbworker_concurrency_limit", "Current concurrency limit.").WithLabelValues(),
		Throttles:             p.Counter("ddbworker_throttles_total", "Throttled DynamoDB or SQS calls seen by the protocol.").WithLabelValues(),
		Conflicts:             p.Counter("ddbworker_transaction_conflicts_total", "Commits cancelled by TransactionConflict, or refused by an MRSC global table's ReplicatedWriteConflictException.").WithLabelValues(),
		Extensions:            p.Counter("ddbworker_visibility_extensions_total", "Heartbeats that extended visibility and lease.").WithLabelValues(),
		Deletes:               p.Counter("ddbworker_deletes_total", "Message deletes by result (ok, stale_handle, failed).", "result"),
		DLQSent:               p.Counter("ddbworker_dlq_sent_total", "Terminal messages copied to the DLQ.").WithLabelValues(),
		MessageAge:            p.Histogram("ddbworker_message_age_seconds", "Age of messages at receipt (now - SentTimestamp).", exponentialBuckets(0.01, 4, 12)).WithLabelValues(),
		ReceiveErrors:         p.Counter("ddbworker_receive_errors_total", "Failed ReceiveMessage calls.").WithLabelValues(),
		DatabaseHealthy:       p.Gauge("ddbworker_database_healthy", "1 while DynamoDB is healthy and the worker receives; 0 while the health gate holds receiving and probes.").WithLabelValues(),
		HealthTransitions:     p.Counter("ddbworker_database_health_transitions_total", "Health gate transitions by the state entered (healthy, unhealthy).", "to"),
		Probes:                p.Counter("ddbworker_database_probes_total", "Health probes of an unhealthy database by result (ok, failed).", "result"),
		Parked:                p.Gauge("ddbworker_parked_messages", "Messages held (hidden, visibility renewed) until the database is healthy again.").WithLabelValues(),
		DatabaseCapacity:      p.Gauge("ddbworker_database_capacity", "Messages this worker can have in flight now without harming the database: 0 while the health gate holds, otherwise the adaptive concurrency limit, at most MaxWCU x (seconds per message) / (write units per message).").WithLabelValues(),
		DynamoDBCalls:         p.Counter("ddbworker_dynamodb_calls_total", "The worker's DynamoDB calls by operation and result.", "operation", "result"),
		BudgetWait:            p.Counter("ddbworker_write_budget_wait_seconds_total", "Time DynamoDB writes waited for the write budget (--max-wcu).").WithLabelValues(),
		PayloadFetches:        p.Counter("ddbworker_payload_fetches_total", "Fetches of payloads by S3 reference by source (payload_ref, extended_client) and result (ok, or the failure code in lower case).", "source", "result"),
		PayloadAccessDenied:   p.Counter("ddbworker_payload_access_denied_total", "Payload fetches S3 or KMS refused the worker (alert on any: fix the permission; the messages are retried).").WithLabelValues(),
		InboxRecordBytes:      p.Histogram("ddbworker_inbox_record_bytes", "Size of each work item's COMPLETED inbox record as DynamoDB counts it, by message type (over 1024 bytes a write costs two units).", []float64{256, 512, 768, 900, 1024, 2048, 4096}, "message_type"),
		CopyAttributesDropped: p.Counter("ddbworker_copy_attributes_dropped_total", "Attributes the worker's copies of messages went without for SQS's limits, by copy (dlq, resend); the log names them.", "copy"),
		HandlerReruns:         p.Counter("ddbworker_handler_reruns_total", "Handler re-runs by message type: a guard with the Rerun policy (an optimistic-concurrency loss) failed and the handler ran again within the attempt.", "message_type"),
		HotKeysParked:         p.Gauge("ddbworker_hot_keys_parked", "Keys (aggregates, or FIFO groups) parked now by a key-range throttle or a conflict storm; the rest of the worker runs on.").WithLabelValues(),
		HotKeyDeliveries:      p.Counter("ddbworker_hot_key_deliveries_total", "Deliveries of parked keys by result: held (back after the key's backoff, no DynamoDB call), probe (ran as the key's probe), parked (throttled on a key range or a conflict storm: the key parked), ended (HOT_KEY_THROTTLED).", "result"),
	}
}

// exponentialBuckets are count buckets from start, each factor times the
// last (prometheus.ExponentialBuckets' figures).
func exponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}
