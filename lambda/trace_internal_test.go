package lambda

import (
	"context"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The invocation's span and the X-Ray context Lambda hands the invocation
// (aws-lambda-go puts it in the handler's context): linked when X-Ray
// sampled it (Tracing: Active), ignored when not (PassThrough hands an
// unsampled header too), the parent with OTEL_PROPAGATORS naming
// xray-lambda, as the conventions' xray-lambda propagator does.
func TestInvocationSpanAndLambdasXRayContext(t *testing.T) {
	const (
		sampled   = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1"
		unsampled = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"
		traceID   = "5759e988bd862e3fe1be46a994272793"
		spanID    = "53995c3f42cd8ad8"
	)
	for _, tt := range []struct {
		name       string
		header     string // "": none in the context
		xrayParent bool
		link       bool // linked to the X-Ray context
		parent     bool // its child
	}{
		{name: "no header"},
		{name: "sampled: linked", header: sampled, link: true},
		{name: "not sampled: ignored", header: unsampled},
		{name: "malformed: ignored", header: "Root=1-nonsense;Parent=x", xrayParent: true},
		{name: "xray-lambda: the parent", header: sampled, xrayParent: true, parent: true},
		{name: "xray-lambda, not sampled: the parent still", header: unsampled, xrayParent: true, parent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			// AlwaysSample: an unsampled parent's child is recorded too, so
			// that the test sees it (the default sampler follows the parent).
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			iv := invocations{tracer: tp.Tracer("test"), function: "invoices", xrayParent: tt.xrayParent}
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "r-1",
				InvokedFunctionArn: "arn:aws:lambda:eu-west-1:123456789012:function:invoices"})
			if tt.header != "" {
				//lint:ignore SA1029 aws-lambda-go's own key, a string
				ctx = context.WithValue(ctx, lambdaTraceKey, tt.header)
			}
			_, span := iv.start(ctx, semconv.FaaSTriggerPubSub)
			span.End()

			got := rec.Ended()
			require.Len(t, got, 1)
			s := got[0]
			require.Equal(t, "invoices", s.Name())
			require.Equal(t, trace.SpanKindServer, s.SpanKind())
			a := map[string]string{}
			for _, kv := range s.Attributes() {
				a[string(kv.Key)] = kv.Value.String()
			}
			require.Equal(t, "r-1", a["faas.invocation_id"])
			require.Equal(t, "pubsub", a["faas.trigger"])
			require.Equal(t, "123456789012", a["cloud.account.id"])
			if tt.link {
				require.Len(t, s.Links(), 1)
				require.Equal(t, traceID, s.Links()[0].SpanContext.TraceID().String())
				require.Equal(t, spanID, s.Links()[0].SpanContext.SpanID().String())
			} else {
				require.Empty(t, s.Links())
			}
			if tt.parent {
				require.Equal(t, traceID, s.SpanContext().TraceID().String(), "in X-Ray's trace")
				require.Equal(t, spanID, s.Parent().SpanID().String(), "under Lambda's segment")
				require.True(t, s.Parent().IsRemote())
			} else {
				require.False(t, s.Parent().IsValid(), "a root")
			}
		})
	}
}

// OTEL_PROPAGATORS names xray-lambda, among others: the invocation's span
// is parented by Lambda's X-Ray context.
func TestStartTracingReadsXRayLambda(t *testing.T) {
	for _, tt := range []struct {
		propagators string
		parent      bool
	}{
		{"", false},
		{"tracecontext,baggage,xray", false},
		{"tracecontext, baggage, xray-lambda", true},
	} {
		t.Run(tt.propagators, func(t *testing.T) {
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_PROPAGATORS": tt.propagators}
			iv, _, err := startTracing(context.Background(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			t.Cleanup(func() { _ = iv.traces.Shutdown(0) })
			require.True(t, iv.traces.On())
			require.Equal(t, tt.parent, iv.xrayParent)
		})
	}
}
