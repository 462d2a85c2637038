package lambda_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/lambda/internal/emf/emftest"
	"github.com/ddbworker/ddbworker/worker"
)

// emfLines are the EMF documents among a function's output lines, each
// checked against the specification.
func emfLines(t *testing.T, out string) []*emftest.Document {
	t.Helper()
	var docs []*emftest.Document
	for line := range strings.Lines(out) {
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		doc, err := emftest.Validate([]byte(line))
		require.NoError(t, err, "%s", line)
		docs = append(docs, doc)
	}
	return docs
}

// metricsOf sums the documents' values of metric whose dimensions are
// exactly the function's, the queue's and labels.
func metricsOf(docs []*emftest.Document, metric string, labels map[string]string) []float64 {
	var out []float64
	for _, d := range docs {
		vs, ok := d.Metrics[metric]
		if !ok || len(d.Dimensions[0]) != 2+len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && d.Values[k] == v
		}
		if match {
			out = append(out, vs...)
		}
	}
	return out
}

// Under Lambda the worker's own Prometheus metrics are written as EMF
// lines on stdout after each invocation: the increases since the last one,
// under the Prometheus names and label values, with the function's and the
// queue's names as dimensions — and nothing after an invocation in which
// nothing happened.
func TestInvocationMetricsAreEMF(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	env := w.functionEnv(true)
	env["AWS_LAMBDA_FUNCTION_NAME"] = "invoices-fn"
	env["DDBWORKER_METRICS_NAMESPACE"] = "ddbworker/invoices"
	env["DDBWORKER_CONCURRENCY"] = "8"
	queue := queueName(w.env.Queues.URL)
	w.seedOrder("o-1")
	w.send(request(t, "k-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1250, Currency: "EUR"}),
		request(t, "k-2", invoices.InvoiceRequested{OrderID: "o-missing", AmountCents: 990, Currency: "EUR"}),
		`{not an envelope`)

	// One capture (the function's logs and metrics go to the stdout of
	// its start), a marker line between the invocations.
	const next = "--- next invocation"
	out := captureStdout(t, func() {
		handle, err := lambda.New(ctx, registerInvoices, lookup(env))
		require.NoError(t, err)
		fmt.Println(next)
		resp, err := handle(ctx, w.receive(3, time.Minute))
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
		fmt.Println(next)
		// The same work again, and the key reused for other work.
		w.send(request(t, "k-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1250, Currency: "EUR"}),
			request(t, "k-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 9999, Currency: "EUR"}))
		_, err = handle(ctx, w.receive(2, time.Minute))
		require.NoError(t, err)
		fmt.Println(next)
		_, err = handle(ctx, events.SQSEvent{})
		require.NoError(t, err)
	})
	parts := strings.Split(out, next+"\n")
	require.Len(t, parts, 4)
	require.Empty(t, emfLines(t, parts[0]), "no metrics before the first invocation")

	docs := emfLines(t, parts[1])
	require.NotEmpty(t, docs)
	for _, d := range docs {
		require.Equal(t, "ddbworker/invoices", d.Namespace)
		require.Equal(t, []string{lambda.DimensionFunctionName, lambda.DimensionQueueName}, d.Dimensions[0][:2])
		require.Equal(t, "invoices-fn", d.Values[lambda.DimensionFunctionName])
		require.Equal(t, queue, d.Values[lambda.DimensionQueueName])
	}
	typ := invoices.TypeInvoiceRequested
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_messages_total", map[string]string{"message_type": typ, "outcome": worker.OutcomeApplied}))
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_messages_total", map[string]string{"message_type": typ, "outcome": worker.OutcomeTerminal}))
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_messages_total", map[string]string{"outcome": worker.OutcomeTerminal}),
		"the undecodable body: no message type, as in Prometheus")
	require.Len(t, metricsOf(docs, "ddbworker_processing_seconds", map[string]string{"message_type": typ}), 2, "one observation per message of the type")
	require.NotEmpty(t, metricsOf(docs, "ddbworker_transaction_seconds", nil), "the commit's latency")
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_database_healthy", nil))
	require.Equal(t, []float64{8}, metricsOf(docs, "ddbworker_database_capacity", nil), "healthy, no write budget: the concurrency")
	require.Empty(t, metricsOf(docs, "ddbworker_hash_mismatches_total", nil), "no mismatch, no value")

	docs = emfLines(t, parts[2])
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_messages_total", map[string]string{"message_type": typ, "outcome": worker.OutcomeDuplicate}))
	require.Empty(t, metricsOf(docs, "ddbworker_messages_total", map[string]string{"message_type": typ, "outcome": worker.OutcomeApplied}),
		"the increase since the last invocation: none")
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_hash_mismatches_total", nil))

	require.Empty(t, emfLines(t, parts[3]), "nothing happened: no EMF")
}

// typed is a Registerer that keeps each registered collector's metric
// type by name: a vector's is its Go type (it has no series yet), any
// other's its series'.
type typed struct {
	*prometheus.Registry
	types map[string]dto.MetricType
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *typed) Register(c prometheus.Collector) error {
	typ := dto.MetricType_UNTYPED
	switch c := c.(type) {
	case *prometheus.CounterVec:
		typ = dto.MetricType_COUNTER
	case *prometheus.GaugeVec:
		typ = dto.MetricType_GAUGE
	case *prometheus.HistogramVec:
		typ = dto.MetricType_HISTOGRAM
	case prometheus.Metric:
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			return err
		}
		switch {
		case m.Counter != nil:
			typ = dto.MetricType_COUNTER
		case m.Gauge != nil:
			typ = dto.MetricType_GAUGE
		case m.Histogram != nil:
			typ = dto.MetricType_HISTOGRAM
		}
	}
	ch := make(chan *prometheus.Desc, 8)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.types[m[1]] = typ
		}
	}
	return r.Registry.Register(c)
}

// Every metric the function writes is one the worker registers, under the
// same name, with a unit that fits its type.
func TestReportedMetricsAreTheWorkers(t *testing.T) {
	reg := &typed{Registry: prometheus.NewRegistry(), types: map[string]dto.MetricType{}}
	p := prommetrics.New(reg)
	handlers := ddbworker.NewRegistry()
	require.NoError(t, handlers.Register("T", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Result{}, nil
	})))
	const queueURL = "https://sqs.us-east-1.amazonaws.com/000000000000/q"
	_, err := worker.New(worker.Deps{DynamoDB: dynamodb.New(dynamodb.Options{Region: "us-east-1"}), SQS: sqs.New(sqs.Options{Region: "us-east-1"}),
		Handlers: handlers, Metrics: p}, worker.Config{QueueURL: queueURL, DLQURL: queueURL + "-dlq", Store: inbox.Store{Table: "t"}})
	require.NoError(t, err)
	require.NoError(t, p.Err())
	units := map[dto.MetricType][]string{dto.MetricType_COUNTER: {"Count"}, dto.MetricType_HISTOGRAM: {"Seconds"}, dto.MetricType_GAUGE: {"None", "Count"}}
	for _, rm := range lambda.ReportedMetricsForTest() {
		typ, ok := reg.types[rm.Name]
		require.True(t, ok, "%s is not a worker metric", rm.Name)
		require.Contains(t, units[typ], rm.Unit, rm.Name)
	}
	require.Len(t, lambda.ReportedMetricsForTest(), 8)
}

// A namespace CloudWatch would refuse fails the init, naming the variable.
func TestMetricsNamespaceIsChecked(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	_, err := lambda.New(context.Background(), registerInvoices, lookup(map[string]string{"DDBWORKER_TABLE": "orders",
		"DDBWORKER_DLQ_URL": "https://sqs.us-east-1.amazonaws.com/1/orders-dlq", "DDBWORKER_METRICS_NAMESPACE": "AWS/Lambda"}))
	require.ErrorContains(t, err, `DDBWORKER_METRICS_NAMESPACE="AWS/Lambda"`)
}

// The example's function under the Runtime Interface Emulator, as Lambda
// runs it: its EMF lines are on its stdout, beside its JSON logs, where
// Lambda's log ingestion extracts them.
func TestRIEWritesEMF(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	f := startFunction(t, examplePkg, w.functionEnv(false))
	w.seedOrder("o-1")
	w.send(request(t, "k-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1250, Currency: "EUR"}))
	ev := w.receive(1, time.Minute)
	require.Empty(t, f.invoke(ev).BatchItemFailures)
	testenv.Eventually(t, 10*time.Second, func() bool { return strings.Contains(f.out.String(), `"_aws"`) }, "no EMF line:\n%s", f.out)
	docs := emfLines(t, f.out.String())
	require.Equal(t, []float64{1}, metricsOf(docs, "ddbworker_messages_total",
		map[string]string{"message_type": invoices.TypeInvoiceRequested, "outcome": worker.OutcomeApplied}))
	for _, d := range docs {
		require.Equal(t, lambda.DefaultMetricsNamespace, d.Namespace)
		require.Equal(t, "invoices", d.Values[lambda.DimensionFunctionName], "AWS_LAMBDA_FUNCTION_NAME")
		require.Equal(t, queueName(w.env.Queues.URL), d.Values[lambda.DimensionQueueName])
	}
}
