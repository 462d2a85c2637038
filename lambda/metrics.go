package lambda

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/lambda/internal/emf"
	"github.com/ddbworker/ddbworker/metrics"
)

// The dimensions every metric the function writes carries, besides the
// labels of its Prometheus series (message_type, outcome): a CloudWatch
// alarm on one names them.
const (
	// DimensionFunctionName is the function's name (AWS_LAMBDA_FUNCTION_NAME).
	DimensionFunctionName = "function_name"
	// DimensionQueueName is the name of the queue the records came from.
	DimensionQueueName = "queue_name"
)

// DefaultMetricsNamespace is DDBWORKER_METRICS_NAMESPACE's default.
const DefaultMetricsNamespace = "ddbworker"

// reportedMetrics are the worker's metrics the function writes as
// CloudWatch metrics (EMF), by their Prometheus names, with their units:
// outcomes by message type and outcome, processing and commit latency,
// hash mismatches, handler re-runs, the database's health and capacity,
// and the keys parked by a hot-key throttle. The others stay
// in the worker's registry: each metric and label set is a custom metric
// CloudWatch bills.
func reportedMetrics() []emf.Metric {
	return []emf.Metric{
		{Name: "ddbworker_messages_total", Unit: emf.UnitCount},
		{Name: "ddbworker_processing_seconds", Unit: emf.UnitSeconds},
		{Name: "ddbworker_transaction_seconds", Unit: emf.UnitSeconds},
		{Name: "ddbworker_hash_mismatches_total", Unit: emf.UnitCount},
		{Name: "ddbworker_database_healthy", Unit: emf.UnitNone},
		{Name: "ddbworker_database_capacity", Unit: emf.UnitCount},
		{Name: "ddbworker_handler_reruns_total", Unit: emf.UnitCount},
		{Name: "ddbworker_hot_keys_parked", Unit: emf.UnitCount},
	}
}

// invocationMetrics are the function's metrics: each queue's worker counts
// into a Prometheus registry of its own (through internal/prommetrics), and at the end of every
// invocation what changed is written to out as EMF lines (package emf),
// where Lambda's log ingestion turns them into CloudWatch metrics.
type invocationMetrics struct {
	out       io.Writer
	namespace string
	function  string
	log       *slog.Logger
	now       func() time.Time

	mu     sync.Mutex
	queues map[string]*queueMetrics // by queue URL
	order  []string
	write  sync.Mutex // one line at a time
}

type queueMetrics struct {
	metrics  metrics.Provider
	reporter *emf.Reporter
}

func newInvocationMetrics(out io.Writer, namespace, function string, log *slog.Logger) (*invocationMetrics, error) {
	// The configuration is checked once, here, with the dimensions a queue
	// will have.
	if _, err := emf.New(prometheus.NewRegistry(), emfConfig(namespace, function, "queue")); err != nil {
		return nil, err
	}
	return &invocationMetrics{out: out, namespace: namespace, function: function, log: log, now: time.Now, queues: map[string]*queueMetrics{}}, nil
}

func emfConfig(namespace, function, queue string) emf.Config {
	return emf.Config{Namespace: namespace, Metrics: reportedMetrics(),
		Dimensions: []emf.Dimension{{Key: DimensionFunctionName, Value: function}, {Key: DimensionQueueName, Value: queue}}}
}

// forQueue returns the metrics of queueURL's workers: the same collectors
// for every worker of the queue (one rebuilt after the table check counts
// on, its instruments the ones registered first), so nothing counted is
// lost between reports.
func (m *invocationMetrics) forQueue(queueURL string) (metrics.Provider, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := m.queues[queueURL]; ok {
		return q.metrics, nil
	}
	reg := prometheus.NewRegistry()
	provider := prommetrics.New(reg)
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	reporter, err := emf.New(reg, emfConfig(m.namespace, m.function, name))
	if err != nil {
		return nil, err
	}
	m.queues[queueURL] = &queueMetrics{metrics: provider, reporter: reporter}
	m.order = append(m.order, queueURL)
	return provider, nil
}

// flush writes what changed since the last flush, one line per document.
func (m *invocationMetrics) flush(ctx context.Context) {
	m.mu.Lock()
	queues := make([]*queueMetrics, 0, len(m.order))
	for _, u := range m.order {
		queues = append(queues, m.queues[u])
	}
	m.mu.Unlock()
	now := m.now()
	for _, q := range queues {
		docs, err := q.reporter.Report(now)
		if err != nil {
			m.log.WarnContext(ctx, "metrics: some series could not be written as EMF", "error", err.Error())
		}
		m.write.Lock()
		for _, d := range docs {
			// One write per line: a line is one log event.
			if _, err := m.out.Write(append(bytes.Clone(d), '\n')); err != nil {
				m.log.WarnContext(ctx, "metrics: writing an EMF line", "error", err.Error())
			}
		}
		m.write.Unlock()
	}
}

// wrap writes the metrics at the end of every invocation of next.
func (m *invocationMetrics) wrap(next func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		defer m.flush(ctx)
		return next(ctx, ev)
	}
}
