package lambda_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/logevent"
	"github.com/ddbworker/ddbworker/producer"
	"github.com/ddbworker/ddbworker/tracing"
	"github.com/ddbworker/ddbworker/worker"
)

// otlpReceiver is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes
// each protobuf ExportTraceServiceRequest the function's exporter posts.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	// resource holds the last request's resource attributes.
	resource map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{resource: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				r.resource[kv.Key] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) received() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func otlpAttrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// Tracing for real under the Runtime Interface Emulator: ten producers,
// each in a trace of its own, send ten invoice requests; one invocation
// handles the batch of ten; the function exports over OTLP/HTTP to a
// receiver on 127.0.0.1 before it answers. The invocation's span (server,
// named after the function) parents the batch's process span (linked to
// all ten producers), which parents ten consumer spans, each linked to its
// own producer, with the conventional attributes.
func TestTracingUnderRIE(t *testing.T) {
	w := newWorld(t)
	recv := newOTLPReceiver(t)
	env := w.functionEnv(true)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = recv.srv.URL
	env["OTEL_SERVICE_NAME"] = "invoices-fn"
	f := startFunction(t, examplePkg, env)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, err := producer.New(w.env.SQS, producer.Config{QueueURL: w.env.Queues.URL, Producer: "orders"})
	require.NoError(t, err)
	producers := map[string]trace.SpanContext{} // by SQS message id
	for i := range 10 {
		id := "o-trace-" + string(rune('a'+i))
		w.seedOrder(id)
		ctx, span := tp.Tracer("orders").Start(context.Background(), "place order", trace.WithNewRoot())
		res, err := p.SendEnvelopes(ctx, request(t, "k-"+id, invoices.InvoiceRequested{OrderID: id, AmountCents: 100, Currency: "EUR"}))
		require.NoError(t, err)
		span.End()
		producers[res[0].SQSMessageID] = span.SpanContext()
	}

	ev := w.receive(10, functionTimeout)
	resp := f.invoke(ev)
	require.Empty(t, resp.BatchItemFailures)
	w.settle(ev, resp)

	// The function flushed before it answered: everything is here.
	spans := recv.received()
	require.Equal(t, "invoices-fn", recv.resource["service.name"], "OTEL_SERVICE_NAME")
	require.Equal(t, "aws", recv.resource["cloud.provider"])
	process := "process " + worker.QueueName(w.env.Queues.URL)
	var invocation, batch *tracepb.Span
	var records []*tracepb.Span
	for _, s := range spans {
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			invocation = s
		case s.Name == process && otlpAttrs(s.Attributes)["messaging.batch.message_count"] != nil:
			batch = s
		case s.Name == process:
			records = append(records, s)
		}
	}
	require.NotNil(t, invocation, "the invocation's span")
	require.Equal(t, "invoices", invocation.Name, "named after the function")
	ia := otlpAttrs(invocation.Attributes)
	require.Equal(t, "pubsub", ia["faas.trigger"].GetStringValue())
	require.NotEmpty(t, ia["faas.invocation_id"].GetStringValue())
	require.Empty(t, invocation.ParentSpanId)

	require.NotNil(t, batch, "the batch's span")
	require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, batch.Kind)
	require.Equal(t, invocation.SpanId, batch.ParentSpanId, "the invocation parents the batch")
	require.Equal(t, int64(10), otlpAttrs(batch.Attributes)["messaging.batch.message_count"].GetIntValue())
	require.Len(t, batch.Links, 10, "linked to every record's producer")

	require.Len(t, records, 10, "one consumer span per record")
	seen := map[string]bool{}
	for _, s := range records {
		require.Equal(t, batch.SpanId, s.ParentSpanId, "the batch parents each record's span")
		require.Equal(t, invocation.TraceId, s.TraceId)
		require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, s.Kind)
		a := otlpAttrs(s.Attributes)
		require.Equal(t, "aws_sqs", a["messaging.system"].GetStringValue())
		require.Equal(t, worker.QueueName(w.env.Queues.URL), a["messaging.destination.name"].GetStringValue())
		require.Equal(t, "process", a["messaging.operation.type"].GetStringValue())
		require.Equal(t, worker.OutcomeApplied, a["ddbworker.outcome"].GetStringValue())
		require.Equal(t, invoices.TypeInvoiceRequested, a["ddbworker.message_type"].GetStringValue())
		id := a["messaging.message.id"].GetStringValue()
		want, ok := producers[id]
		require.True(t, ok, "a record of this test: %s", id)
		require.Len(t, s.Links, 1, "linked to its own producer")
		require.Equal(t, want.TraceID().String(), hex.EncodeToString(s.Links[0].TraceId))
		require.Equal(t, want.SpanID().String(), hex.EncodeToString(s.Links[0].SpanId))
		seen[id] = true
	}
	require.Len(t, seen, 10)

	// The delivery lines are written inside the records' spans.
	lines := f.logs(map[string]string{"msg": logevent.Completed})
	require.Len(t, lines, 10)
	for _, l := range lines {
		require.Equal(t, hex.EncodeToString(invocation.TraceId), l[tracing.LogTraceID])
	}
}
