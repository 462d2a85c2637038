package lambda

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker/internal/telemetry"
	"github.com/ddbworker/ddbworker/tracing"
)

// Tracing under Lambda: the OTEL_* variables configure OTLP/HTTP export
// (internal/telemetry; off unless an endpoint is set), each invocation is
// one span — kind server, named after the function, with faas.invocation_id
// and faas.trigger pubsub, as the conventions for AWS Lambda ask — that
// parents the worker's span of the batch and, under it, the records'
// consumer spans; the spans are flushed before the invocation answers,
// since Lambda may freeze the environment right after.

// invocations traces a function's invocations; its zero value does
// nothing.
type invocations struct {
	traces   telemetry.Tracing
	tracer   trace.Tracer
	function string
}

// startTracing configures the export from lookupEnv's OTEL_* variables
// and, when it is on, wraps log so that the lines written inside a span
// carry its trace and span ids.
func startTracing(ctx context.Context, lookupEnv func(string) (string, bool), log *slog.Logger) (invocations, *slog.Logger, error) {
	fn := lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_NAME")
	extra := []attribute.KeyValue{semconv.CloudProviderAWS, semconv.CloudPlatformAWSLambda}
	if fn != "" {
		extra = append(extra, semconv.FaaSName(fn))
	}
	if v := lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_VERSION"); v != "" {
		extra = append(extra, semconv.FaaSVersion(v))
	}
	if r := lookupOr(lookupEnv, "AWS_REGION"); r != "" {
		extra = append(extra, semconv.CloudRegion(r))
	}
	t, err := telemetry.FromEnv(ctx, lookupEnv, fn, "", extra...)
	if err != nil || !t.On() {
		return invocations{traces: t}, log, err
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing on: spans exported over OTLP/HTTP at the end of each invocation", "endpoint", t.Endpoint)
	return invocations{traces: t, tracer: t.Provider.Tracer(tracing.InstrumentationName, trace.WithSchemaURL(tracing.SchemaURL)),
		function: fn}, log, nil
}

// start starts an invocation's span (none when tracing is off).
func (iv invocations) start(ctx context.Context) (context.Context, trace.Span) {
	if iv.tracer == nil {
		return ctx, nil
	}
	name := iv.function
	attrs := []attribute.KeyValue{semconv.FaaSTriggerPubSub}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.AWSLambdaInvokedARN(lc.InvokedFunctionArn))
		if parts := strings.Split(lc.InvokedFunctionArn, ":"); len(parts) > 4 {
			attrs = append(attrs, semconv.CloudAccountID(parts[4]))
		}
	}
	if name == "" {
		name = "lambda"
	}
	return iv.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// end ends the invocation's span (failed when records came back) and
// flushes the spans.
func (iv invocations) end(ctx context.Context, span trace.Span, failed int, log *slog.Logger) {
	if span == nil {
		return
	}
	if failed > 0 {
		span.SetStatus(codes.Error, "batch item failures")
	}
	span.SetAttributes(attribute.Int("ddbworker.batch_item_failures", failed))
	span.End()
	iv.flush(ctx, log)
}

// flush exports the invocation's spans, leaving it time to answer.
func (iv invocations) flush(ctx context.Context, log *slog.Logger) {
	if !iv.traces.On() {
		return
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		var c2 context.CancelFunc
		flushCtx, c2 = context.WithDeadline(flushCtx, d.Add(-flushReserve))
		defer c2()
	}
	if err := iv.traces.Flush(flushCtx); err != nil {
		log.WarnContext(ctx, "tracing: spans not exported at the end of the invocation", "error", err.Error())
	}
}

// flushTimeout bounds the flush at the end of an invocation; flushReserve
// is kept from its deadline to answer.
const (
	flushTimeout = 2 * time.Second
	flushReserve = 200 * time.Millisecond
)
