//go:build unix

package worker

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tracing"
)

// The cost of tracing in the worker's own CPU: one delivery through the
// whole pipeline — decode, gate, handler, commit, record, settle, the log
// line and the metrics — against answering fakes of DynamoDB and SQS (no
// network), so what differs between the cases is the tracing alone. The
// message carries a producer's traceparent, so the traced cases extract and
// link it. docs/benchmarks.md has the figures:
//
//	go test -run '^$' -bench BenchmarkDeliveryTracing -benchmem -cpu 1 ./worker
func BenchmarkDeliveryTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		tp   func() (trace.TracerProvider, func())
	}{
		{"off", func() (trace.TracerProvider, func()) { return nil, func() {} }},
		{"noop-provider", func() (trace.TracerProvider, func()) { return noop.NewTracerProvider(), func() {} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tp, stop := bc.tp()
			defer stop()
			w := benchWorker(b, tp)
			body := benchBody(b)
			attrs := tracing.Carry(trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true}))
			h := benchHost{}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for b.Loop() {
				m := types.Message{MessageId: aws.String("m-1"), ReceiptHandle: aws.String("r-1"), Body: aws.String(body),
					Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764806400000"}, MessageAttributes: attrs}
				if s := w.handle(ctx, newDelivery(m, time.Now()), h); s != settledFinal {
					b.Fatalf("settled %d, want final", s)
				}
			}
			// The process's CPU (user + system: the GC and the SDK's export
			// goroutine included) per delivery, which a loaded machine
			// distorts far less than ns/op, the wall clock's.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/msg")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchWorker(b *testing.B, tp trace.TracerProvider) *Worker {
	b.Helper()
	reg := ddbworker.NewRegistry()
	table := "bench"
	if err := reg.Register("Noted", ddbworker.HandlerFunc(func(_ context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Apply(ddbworker.Put(table, ddbworker.Key{"PK": "NOTE#" + msg.Key(), "SK": "NOTE"}, ddbworker.Item{"n": 1})), nil
	})); err != nil {
		b.Fatal(err)
	}
	deps := Deps{DynamoDB: fakeDynamoDB{}, SQS: fakeSQS{}, Handlers: reg}
	if tp != nil {
		deps.TracerProvider = tp
	}
	w, err := New(deps, Config{Store: inbox.Store{Table: table}, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/bench",
		TerminalPolicy: PolicyQuarantine})
	if err != nil {
		b.Fatal(err)
	}
	w.queueOnce.Do(func() {}) // the queue's attributes: SQS's defaults
	return w
}

func benchBody(b *testing.B) string {
	b.Helper()
	body, err := envelope.Encode(&envelope.Envelope{MessageID: "m-1", SchemaVersion: envelope.SchemaV1, MessageType: "Noted", Producer: "bench",
		OccurredAt: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), IdempotencyKey: "k-1", AggregateType: "Note", AggregateID: "n-1",
		CorrelationID: "c-1", Payload: []byte(`{"text":"a note of a few words"}`)})
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// benchHost acks nothing (the deleter is not part of the pipeline).
type benchHost struct{}

func (benchHost) ack(*delivery)                                 {}
func (benchHost) park(context.Context, *delivery) time.Duration { return 0 }

// fakeDynamoDB answers every call with success: the gate's claim, the
// commit.
type fakeDynamoDB struct{}

func (fakeDynamoDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (fakeDynamoDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

func (fakeDynamoDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (fakeDynamoDB) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{}, nil
}

type fakeSQS struct{ SQSAPI }

func (fakeSQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}
