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
)

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
	// Attempt is the business attempt (0 when no lease was taken).
	Attempt int
	// Policy is the terminal policy applied (terminal outcomes only).
	Policy   TerminalPolicy
	Duration time.Duration
	// Visibility is the visibility set on a kept message (retry, in_flight,
	// deferred).
	Visibility time.Duration
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
		Commit: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "transaction_seconds", Help: "TransactWriteItems latency of commits.",
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
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.Received, m.Outcomes, m.Failures, m.HashMismatches, m.Processing, m.Commit,
		m.InFlight, m.Concurrency, m.Throttles, m.Conflicts, m.Extensions, m.Deletes, m.DLQSent, m.MessageAge, m.ReceiveErrors} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
