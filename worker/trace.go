package worker

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/tracing"
)

// Tracing, per the OpenTelemetry messaging conventions (package tracing
// names everything): one consumer span per delivery, process <queue>,
// started by the observer (handle, skip) and linked — a link, not a parent —
// to the message's creation context (traceparent; else, in an SNS
// notification's body, its MessageAttributes' traceparent; else
// AWSTraceHeader);
// under it a span per stage (stage: claim, handler, commit, record,
// settle); under Lambda the batch's process <queue> span parents the
// records' (HandleSQSEvent). Without Deps.TracerProvider w.tracer is nil
// and none of this runs: no span, no attribute, no allocation.

// tracer is the worker's tracing, nil when off.
type tracer struct {
	t trace.Tracer
	// start are the attributes every consumer span starts with (the
	// sampling-relevant ones, as the conventions ask, at creation).
	start []attribute.KeyValue
}

func newTracer(tp trace.TracerProvider, queueURL string) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{
		t: tp.Tracer(spans.InstrumentationName, trace.WithSchemaURL(spans.SchemaURL)),
		start: []attribute.KeyValue{semconv.MessagingSystemAWSSQS, semconv.MessagingDestinationName(QueueName(queueURL)),
			semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"), semconv.AWSSQSQueueURL(queueURL)},
	}
}

// consume starts d's consumer span, a child of ctx's span (none in the
// daemon; the batch's under Lambda), linked to d's creation context.
func (w *Worker) consume(ctx context.Context, d *delivery) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, nil
	}
	attrs := make([]attribute.KeyValue, 0, len(w.tracer.start)+2)
	attrs = append(attrs, w.tracer.start...)
	attrs = append(attrs, semconv.MessagingMessageID(d.id), spans.KeyReceiveCount.Int(d.receives))
	return w.tracer.t.Start(ctx, spans.SpanProcess(w.queueName), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(tracing.Link(d.creation(), d.id)...), trace.WithAttributes(attrs...))
}

// consumed ends a consumer span with what became of the delivery: its
// outcome, its message type and failure code (bounded: the metric label
// values), the idempotency key hashed (tracing.KeyHash), the attempt, and
// on a failure error.type and an error status.
func (w *Worker) consumed(span trace.Span, r report) {
	if span == nil {
		return
	}
	o := r.outcome
	attrs := []attribute.KeyValue{spans.KeyOutcome.String(o.result), spans.KeyAttempt.Int(o.attempt)}
	if wk := r.work; wk != nil {
		attrs = append(attrs, spans.KeyMessageType.String(w.labels.messageType(wk.env.MessageType)),
			spans.KeyIdempotencyKeyHash.String(tracing.KeyHash(wk.env.IdempotencyKey)))
		if wk.env.CorrelationID != "" {
			// The conventions' conversation id (a producer's correlation id).
			attrs = append(attrs, semconv.MessagingMessageConversationID(wk.env.CorrelationID))
		}
	}
	if f := o.failure; f != nil {
		code := w.labels.code(f.Code)
		attrs = append(attrs, semconv.ErrorTypeKey.String(code), spans.KeyFailureCode.String(code),
			spans.KeyFailureKind.String(f.Kind.String()), spans.KeyInfrastructure.Bool(o.infra))
		span.SetStatus(codes.Error, code)
	}
	span.SetAttributes(attrs...)
	span.End()
}

// stageSpan is one stage's child span; its zero value (tracing off) does
// nothing.
type stageSpan struct{ s trace.Span }

// stageKey holds the span of the stage a context is in (stage), for
// stageFailed.
type stageKey struct{}

// stage starts the span of one pipeline stage under the consumer span in
// ctx: the one helper every stage's span goes through (the handler's goes
// through the handler middleware, traceHandler). The stage's context
// holds the span for stageFailed.
func (w *Worker) stage(ctx context.Context, name string) (context.Context, stageSpan) {
	if w.tracer == nil {
		return ctx, stageSpan{}
	}
	ctx2, s := w.tracer.t.Start(ctx, name)
	return context.WithValue(ctx2, stageKey{}, s), stageSpan{s}
}

// commitStage starts the commit stage's span: a client span of the one
// DynamoDB call the commit makes, op (TransactWriteItems; a single-write
// commit's UpdateItem or PutItem), or — op "", nothing is written — a
// plain stage span with no db attributes.
func (w *Worker) commitStage(ctx context.Context, op string) (context.Context, stageSpan) {
	if w.tracer == nil || op == "" {
		return w.stage(ctx, spans.SpanCommit)
	}
	ctx2, s := w.tracer.t.Start(ctx, spans.SpanCommit, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNameAWSDynamoDB, semconv.DBOperationName(op)))
	return context.WithValue(ctx2, stageKey{}, s), stageSpan{s}
}

// end ends the span, marking it failed with err's code (bounded) when err
// is not nil.
func (s stageSpan) end(w *Worker, err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		w.failSpan(s.s, failure.Classify(err, failure.CodeHandlerError).Code)
	}
	s.s.End()
}

// stageFailed marks the span of the stage ctx is in failed by err, what a
// DynamoDB or SQS call of that stage returned: a claim's gate call, a
// write of the record stage (a failure, a supersede, a release, an end, a
// rejection), an SQS action of the settle stage (hide, re-send, DLQ copy).
// The stage goes on — its verdict or outcome says what became of the
// delivery, the consumer span carries that — and its span keeps the
// failed call's code. Outside a stage, or with tracing off, it does
// nothing.
func (w *Worker) stageFailed(ctx context.Context, err error) {
	if w.tracer == nil || err == nil {
		return
	}
	if s, ok := ctx.Value(stageKey{}).(trace.Span); ok {
		w.failSpan(s, failure.Classify(err, failure.CodeServiceUnavailable).Code)
	}
}

// failSpan sets a stage span's error.type to code (bounded: the metric
// label's value) and its status to error.
func (w *Worker) failSpan(s trace.Span, code string) {
	code = w.labels.code(code)
	s.SetAttributes(semconv.ErrorTypeKey.String(code))
	s.SetStatus(codes.Error, code)
}

// traceHandler is the worker's own handler middleware, outside the
// registry's: the handler span, one per run, in which the team's
// middleware and the handler run.
func (w *Worker) traceHandler(next ddbworker.Handler) ddbworker.Handler {
	return ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
		ctx, s := w.stage(ctx, spans.SpanHandler)
		s.s.SetAttributes(spans.KeyRun.Int(msg.Run), spans.KeyAttempt.Int(msg.Attempt))
		res, err := next.Handle(ctx, msg)
		s.end(w, err)
		return res, err
	})
}

// creation is the creation context d's message carries (invalid: none):
// in its attributes, or in the SNS notification its body is
// (tracing.ExtractDelivery).
func (d *delivery) creation() trace.SpanContext {
	return tracing.ExtractDelivery(d.m.MessageAttributes, d.m.Attributes, aws.ToString(d.m.Body))
}

// batch starts the span of a Lambda invocation's batch of records from one
// queue — process <queue>, kind consumer, linked to every record's
// creation context — which parents the records' consumer spans, as the
// conventions for AWS Lambda ask.
func (w *Worker) batch(ctx context.Context, ds []*delivery) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, nil
	}
	links := make([]trace.Link, 0, len(ds))
	for _, d := range ds {
		links = append(links, tracing.Link(d.creation(), d.id)...)
	}
	attrs := append([]attribute.KeyValue{semconv.MessagingBatchMessageCount(len(ds)), semconv.FaaSTriggerPubSub}, w.tracer.start...)
	return w.tracer.t.Start(ctx, spans.SpanProcess(w.queueName), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// endSpan ends a span that may be nil (tracing off).
func endSpan(s trace.Span) {
	if s != nil {
		s.End()
	}
}

// traceAttributes are the attributes that carry d's creation context on a
// copy of its message (a DLQ copy, a deferral's re-send): the original's
// traceparent and tracestate, or its AWSTraceHeader as traceparent — so
// the copy's consumer links to the original producer, whether this worker
// traces or not.
func traceAttributes(d *delivery) map[string]types.MessageAttributeValue {
	return tracing.Carry(d.creation())
}
