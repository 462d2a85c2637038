package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	semspans "github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/tracing"
)

// With tracing off, the tracing hooks of the pipeline allocate nothing and
// start nothing: the consumer span, the stages, the handler middleware (not
// installed) and the batch span are nil checks.
func TestTracingOffAllocatesNothing(t *testing.T) {
	w := &Worker{labels: newLabels(nil)}
	d := newDelivery(types.Message{MessageId: aws.String("m-1"), MessageAttributes: tracing.Carry(trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))}, time.Now())
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := w.consume(ctx, d)
		c2, s := w.stage(c, semspans.SpanCommit)
		s.end(w, nil)
		c3, b := w.batch(c2, []*delivery{d})
		endSpan(b)
		w.consumed(span, report{})
		if c3 != ctx {
			t.Fatal("a context was derived")
		}
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %v times per delivery", allocs)
	}
}
