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

	"github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/internal/telemetry"
	"github.com/ddbworker/ddbworker/tracing"
)

// Tracing under Lambda: the OTEL_* variables configure OTLP/HTTP export
// (internal/telemetry; off unless an endpoint is set), each invocation is
// one span — kind server, named after the function, with faas.invocation_id
// and faas.trigger (pubsub for SQS, datasource for the relay's DynamoDB
// stream), as the conventions for AWS Lambda ask — that parents the
// worker's span of the batch and, under it, the records' consumer spans
// (the relay's send spans); the spans are flushed before the invocation
// answers, since Lambda may freeze the environment right after.
//
// Lambda's own X-Ray context (Tracing: Active: the invocation's segment,
// in the X-Amzn-Trace-Id the runtime hands each invocation, which
// aws-lambda-go puts in its context) is a link of the invocation's span
// when X-Ray sampled it: a trace in Tempo points at Lambda's segment in
// X-Ray without depending on it. With OTEL_PROPAGATORS naming xray-lambda
// — the conventions' propagator for spans reported to X-Ray — it is the
// span's parent instead, so X-Ray shows ddbworker's spans under the
// function's segment; spans reported elsewhere would then have a parent
// their backend never receives, which is why the conventions say to use it
// only with X-Ray.

// invocations traces a function's invocations; its zero value does
// nothing.
type invocations struct {
	traces   telemetry.Tracing
	tracer   trace.Tracer
	function string
	// xrayParent: OTEL_PROPAGATORS names xray-lambda: Lambda's X-Ray
	// context parents the invocation's span rather than being linked.
	xrayParent bool
}

// propagatorXRayLambda is the OTEL_PROPAGATORS entry that makes Lambda's
// X-Ray context the invocation span's parent (the conventions' xray-lambda
// propagator).
const propagatorXRayLambda = "xray-lambda"

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
	xrayParent := false
	for p := range strings.SplitSeq(lookupOr(lookupEnv, "OTEL_PROPAGATORS"), ",") {
		xrayParent = xrayParent || strings.TrimSpace(p) == propagatorXRayLambda
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	lambdaXRay := "linked when sampled"
	if xrayParent {
		lambdaXRay = "the parent (OTEL_PROPAGATORS " + propagatorXRayLambda + ")"
	}
	log.Info("tracing on: spans exported over OTLP/HTTP at the end of each invocation", "endpoint", t.Endpoint,
		"lambdaXRayContext", lambdaXRay)
	return invocations{traces: t, tracer: t.Provider.Tracer(spans.InstrumentationName, trace.WithSchemaURL(spans.SchemaURL)),
		function: fn, xrayParent: xrayParent}, log, nil
}

// lambdaTraceKey is the key under which aws-lambda-go puts the
// invocation's X-Ray trace header (Lambda-Runtime-Trace-Id) in the
// handler's context. (It also sets _X_AMZN_TRACE_ID, but only while the
// environment runs one invocation at a time: the context is the one
// source that is always the invocation's own.)
const lambdaTraceKey = "x-amzn-trace-id"

// lambdaXRay is the X-Ray context Lambda gave the invocation of ctx
// (invalid: none).
func lambdaXRay(ctx context.Context) trace.SpanContext {
	h, _ := ctx.Value(lambdaTraceKey).(string)
	sc, _ := tracing.FromXRay(h)
	return sc
}

// start starts an invocation's span (none when tracing is off), with its
// trigger (faas.trigger), linked to — or, with xray-lambda, a child of —
// Lambda's X-Ray context.
func (iv invocations) start(ctx context.Context, trigger attribute.KeyValue) (context.Context, trace.Span) {
	if iv.tracer == nil {
		return ctx, nil
	}
	name := iv.function
	attrs := []attribute.KeyValue{trigger}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.AWSLambdaInvokedARN(lc.InvokedFunctionArn))
		if parts := strings.Split(lc.InvokedFunctionArn, ":"); len(parts) > 4 {
			attrs = append(attrs, semconv.CloudAccountID(parts[4]))
		}
	}
	if name == "" {
		name = "lambda"
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	switch xray := lambdaXRay(ctx); {
	case !xray.IsValid():
	case iv.xrayParent && !trace.SpanContextFromContext(ctx).IsValid():
		ctx = trace.ContextWithRemoteSpanContext(ctx, xray)
	case xray.IsSampled():
		// Not sampled, X-Ray recorded nothing to link to (Lambda hands
		// every invocation a header, Tracing: PassThrough too).
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: xray}))
	}
	return iv.tracer.Start(ctx, name, opts...)
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
