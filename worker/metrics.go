package worker

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Metrics are the worker's Prometheus collectors.
type Metrics struct {
	Received       prometheus.Counter
	Outcomes       *prometheus.CounterVec
	Failures       *prometheus.CounterVec
	HashMismatches prometheus.Counter
	Processing     *prometheus.HistogramVec
	Commit         prometheus.Histogram
	InFlight       prometheus.Gauge
	Concurrency    prometheus.Gauge
	Throttles      prometheus.Counter
	Conflicts      prometheus.Counter
	Extensions     prometheus.Counter
	Deletes        *prometheus.CounterVec
	DLQSent        prometheus.Counter
	MessageAge     prometheus.Histogram
	ReceiveErrors  prometheus.Counter
	// DatabaseHealthy is 1 while the health gate lets the worker receive.
	DatabaseHealthy prometheus.Gauge
	// HealthTransitions counts the gate's transitions by the state entered.
	HealthTransitions *prometheus.CounterVec
	// Probes counts health probes by result (ok, failed).
	Probes *prometheus.CounterVec
	// Parked is how many messages are held until the database is healthy.
	Parked prometheus.Gauge
	// DatabaseCapacity is how many messages the worker can have in flight
	// now without harming the database: 0 while the health gate holds,
	// otherwise the adaptive concurrency limit, at most what the write
	// budget (MaxWCU) sustains (capacity.go). The scaling signal: a fleet
	// grows on its queue's backlog only while the database takes it
	// (docs/scaling.md).
	DatabaseCapacity prometheus.Gauge
	// DynamoDBCalls counts the worker's DynamoDB calls by operation and
	// result (ok, condition_failed, refused, conflict, throttled,
	// unavailable, timeout, cancelled).
	DynamoDBCalls *prometheus.CounterVec
	// BudgetWait is the time writes waited for the write budget (MaxWCU).
	BudgetWait prometheus.Counter
	// PayloadFetches counts fetches of payloads by S3 reference by source
	// (payload_ref, extended_client) and result (ok, or the failure code
	// in lower case: payload_not_found, throttled, …).
	PayloadFetches *prometheus.CounterVec
	// PayloadAccessDenied counts fetches S3 or KMS refused the worker
	// (alert on any: a permission to fix).
	PayloadAccessDenied prometheus.Counter
	// InboxRecordBytes is the size of each work item's COMPLETED inbox
	// record as DynamoDB counts it, by message type: over 1 KB, each
	// write of it costs two units (the worker warns once per type from
	// 900 bytes). Not observed for work that has no record: a
	// single-write route's fresh path, unless it recorded a failure.
	InboxRecordBytes *prometheus.HistogramVec
	// CopyAttributesDropped counts the attributes the worker's copies of
	// messages went without, by copy (dlq, resend): SQS carries 10
	// attributes, and ddbworker's own join the producer's. Never one a
	// route reads to take the message (such a copy is not made); the log
	// names them and the message.
	CopyAttributesDropped *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, e.g. in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ns := "ddbworker"
	m := &Metrics{
		Received: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "messages_received_total", Help: "SQS messages received."}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_total",
			Help: "Processed deliveries by message type and outcome (applied, duplicate, superseded, in_flight, retry, terminal, deferred, lease_lost, released)."}, []string{"message_type", "outcome"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "failures_total",
			Help: "Failures by message type, kind and code."}, []string{"message_type", "kind", "code"}),
		HashMismatches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "hash_mismatches_total", Help: "Deliveries whose idempotency key holds other work (alert on any)."}),
		Processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "processing_seconds", Help: "Time from dispatch to disposition.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 14)}, []string{"message_type"}),
		Commit: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "transaction_seconds", Help: "Latency of commits: the TransactWriteItems of a gated or fused commit, the one UpdateItem or PutItem of a single-write commit (a single-write result with no write makes no call and is not observed).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		InFlight:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "in_flight", Help: "Messages being processed."}),
		Concurrency: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "concurrency_limit", Help: "Current concurrency limit."}),
		Throttles:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "throttles_total", Help: "Throttled DynamoDB or SQS calls seen by the protocol."}),
		Conflicts:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "transaction_conflicts_total", Help: "Commits cancelled by TransactionConflict."}),
		Extensions:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "visibility_extensions_total", Help: "Heartbeats that extended visibility and lease."}),
		Deletes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "deletes_total",
			Help: "Message deletes by result (ok, stale_handle, failed)."}, []string{"result"}),
		DLQSent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "dlq_sent_total", Help: "Terminal messages copied to the DLQ."}),
		MessageAge: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "message_age_seconds", Help: "Age of messages at receipt (now - SentTimestamp).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}),
		ReceiveErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "receive_errors_total", Help: "Failed ReceiveMessage calls."}),
		DatabaseHealthy: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "database_healthy",
			Help: "1 while DynamoDB is healthy and the worker receives; 0 while the health gate holds receiving and probes."}),
		HealthTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "database_health_transitions_total",
			Help: "Health gate transitions by the state entered (healthy, unhealthy)."}, []string{"to"}),
		Probes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "database_probes_total",
			Help: "Health probes of an unhealthy database by result (ok, failed)."}, []string{"result"}),
		Parked: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "parked_messages",
			Help: "Messages held (hidden, visibility renewed) until the database is healthy again."}),
		DatabaseCapacity: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "database_capacity",
			Help: "Messages this worker can have in flight now without harming the database: 0 while the health gate holds, otherwise the adaptive concurrency limit, at most MaxWCU x (seconds per message) / (write units per message)."}),
		DynamoDBCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "dynamodb_calls_total",
			Help: "The worker's DynamoDB calls by operation and result."}, []string{"operation", "result"}),
		BudgetWait: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "write_budget_wait_seconds_total",
			Help: "Time DynamoDB writes waited for the write budget (--max-wcu)."}),
		PayloadFetches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "payload_fetches_total",
			Help: "Fetches of payloads by S3 reference by source (payload_ref, extended_client) and result (ok, or the failure code in lower case)."}, []string{"source", "result"}),
		PayloadAccessDenied: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "payload_access_denied_total",
			Help: "Payload fetches S3 or KMS refused the worker (alert on any: fix the permission; the messages are retried)."}),
		InboxRecordBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "inbox_record_bytes",
			Help:    "Size of each work item's COMPLETED inbox record as DynamoDB counts it, by message type (over 1024 bytes a write costs two units).",
			Buckets: []float64{256, 512, 768, 900, 1024, 2048, 4096}}, []string{"message_type"}),
		CopyAttributesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "copy_attributes_dropped_total",
			Help: "Attributes the worker's copies of messages went without for SQS's limits, by copy (dlq, resend); the log names them."}, []string{"copy"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.Received, m.Outcomes, m.Failures, m.HashMismatches, m.Processing, m.Commit,
		m.InFlight, m.Concurrency, m.Throttles, m.Conflicts, m.Extensions, m.Deletes, m.DLQSent, m.MessageAge, m.ReceiveErrors,
		m.DatabaseHealthy, m.HealthTransitions, m.Probes, m.Parked, m.DatabaseCapacity, m.DynamoDBCalls, m.BudgetWait, m.PayloadFetches, m.PayloadAccessDenied, m.InboxRecordBytes,
		m.CopyAttributesDropped} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
