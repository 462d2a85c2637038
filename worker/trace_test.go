package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/logevent"
	"github.com/ddbworker/ddbworker/internal/spanrec"
	semspans "github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/producer"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/tracing"
	"github.com/ddbworker/ddbworker/worker"
)

// spans records every ended span in memory (spanrec: the trace API's
// recorder, not the SDK's, which the core module does not require) and
// wakes wait.
type spans struct {
	t   *testing.T
	rec *spanrec.Provider
	tp  *spanrec.Provider
	sig chan struct{}
}

func newSpans(t *testing.T) *spans {
	s := &spans{t: t, sig: make(chan struct{}, 1)}
	s.rec = spanrec.New(func(*spanrec.Span) {
		select {
		case s.sig <- struct{}{}:
		default:
		}
	})
	s.tp = s.rec
	return s
}

// wait blocks until n ended spans match, and returns them.
func (s *spans) wait(n int, match func(*spanrec.Span) bool) []*spanrec.Span {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var got []*spanrec.Span
		for _, sp := range s.rec.Ended() {
			if match(sp) {
				got = append(got, sp)
			}
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-s.sig:
		case <-deadline:
			s.t.Fatalf("waited 30s for %d spans, have %d of %d ended", n, len(got), len(s.rec.Ended()))
		}
	}
}

// children are the ended spans whose parent is sp.
func (s *spans) children(sp *spanrec.Span) map[string]*spanrec.Span {
	out := map[string]*spanrec.Span{}
	for _, c := range s.rec.Ended() {
		if c.Parent().SpanID() == sp.SpanContext().SpanID() && c.Parent().TraceID() == sp.SpanContext().TraceID() {
			out[c.Name()] = c
		}
	}
	return out
}

func attrs(sp *spanrec.Span) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range sp.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func consumerOf(queue string) func(*spanrec.Span) bool {
	return func(sp *spanrec.Span) bool {
		return sp.Name() == semspans.SpanProcess(worker.QueueName(queue)) && sp.SpanKind() == trace.SpanKindConsumer
	}
}

// requireConsumer checks a consumer span's conventional attributes and its
// one link, to the producer's span context.
func requireConsumer(t *testing.T, sp *spanrec.Span, queueURL string, producer trace.SpanContext) {
	t.Helper()
	a := attrs(sp)
	require.Equal(t, "aws_sqs", a["messaging.system"].AsString())
	require.Equal(t, worker.QueueName(queueURL), a["messaging.destination.name"].AsString())
	require.Equal(t, "process", a["messaging.operation.type"].AsString())
	require.Equal(t, "process", a["messaging.operation.name"].AsString())
	require.Equal(t, queueURL, a["aws.sqs.queue.url"].AsString())
	require.NotEmpty(t, a["messaging.message.id"].AsString())
	require.Positive(t, a["ddbworker.sqs.receive_count"].AsInt64())
	require.Equal(t, "process "+worker.QueueName(queueURL), sp.Name())
	require.Len(t, sp.Links(), 1, "linked to its creation context")
	link := sp.Links()[0]
	require.Equal(t, producer.TraceID(), link.SpanContext.TraceID())
	require.Equal(t, producer.SpanID(), link.SpanContext.SpanID())
	require.True(t, link.SpanContext.IsRemote())
	require.NotEqual(t, producer.TraceID(), sp.SpanContext().TraceID(), "a link, not a parent")
}

func (h *harness) producer() *producer.Producer {
	p, err := producer.New(h.env.SQS, producer.Config{QueueURL: h.env.Queues.URL, Producer: "cases"})
	require.NoError(h.t, err)
	return p
}

// A trace started by a producer's span, sent by package producer: the
// worker's consumer span is linked to it, has a span per stage under it,
// and its log line carries its trace and span ids.
func TestTraceProducerToWorker(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	sp := newSpans(t)
	logs := &testenv.Buffer{}
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), TracerProvider: sp.tp,
		Logger: slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, nil)))})

	ctx, span := sp.tp.Tracer("producer-app").Start(context.Background(), "checkout", trace.WithSpanKind(trace.SpanKindProducer))
	e := mustEnv(t)(caseflow.NewDeadlineRequest("k-trace-1", "c1", "intake", effective))
	_, err := h.producer().SendEnvelopes(ctx, e)
	require.NoError(t, err)
	span.End()

	c := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
	requireConsumer(t, c, h.env.Queues.URL, span.SpanContext())
	a := attrs(c)
	require.Equal(t, worker.OutcomeApplied, a["ddbworker.outcome"].AsString())
	require.Equal(t, caseflow.TypeDeadline, a["ddbworker.message_type"].AsString())
	require.Equal(t, tracing.KeyHash("k-trace-1"), a["ddbworker.idempotency_key.hash"].AsString())
	require.Equal(t, int64(1), a["ddbworker.attempt"].AsInt64())
	require.NotContains(t, a, attribute.Key("error.type"))
	require.Equal(t, codes.Unset, c.Status().Code)
	require.Equal(t, trace.SpanKindConsumer, c.SpanKind())
	require.False(t, c.Parent().IsValid(), "the daemon's consumer span is a root")

	kids := sp.children(c)
	for _, name := range []string{semspans.SpanClaim, semspans.SpanHandler, semspans.SpanCommit, semspans.SpanRecord, semspans.SpanSettle} {
		require.Contains(t, kids, name, "a span per stage")
	}
	commit := kids[semspans.SpanCommit]
	require.Equal(t, trace.SpanKindClient, commit.SpanKind())
	require.Equal(t, "aws.dynamodb", attrs(commit)["db.system.name"].AsString())
	require.Equal(t, "TransactWriteItems", attrs(commit)["db.operation.name"].AsString())

	var line map[string]any
	for _, l := range logs.Lines() {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == logevent.Completed {
			line = m
		}
	}
	require.NotNil(t, line, "the delivery's line")
	require.Equal(t, c.SpanContext().TraceID().String(), line[tracing.LogTraceID], "written inside the consumer span")
	require.Equal(t, c.SpanContext().SpanID().String(), line[tracing.LogSpanID])
}

// 10 messages from 10 producers' traces, waiting in the queue for a
// worker that receives 10 at a time: 10 consumer spans, each linked to its
// own producer. (The Lambda adapter's test, lambda's TestTracingUnderRIE,
// checks one batch of 10 in one invocation.)
func TestTraceTenProducers(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	sp := newSpans(t)
	p := h.producer()
	producers := map[string]trace.SpanContext{} // by SQS message id
	var ids []string
	for i := range 10 {
		id := "c" + strconv.Itoa(i)
		ids = append(ids, id)
		ctx, span := sp.tp.Tracer("producer-app").Start(context.Background(), "order "+id, trace.WithNewRoot())
		res, err := p.SendEnvelopes(ctx, mustEnv(t)(caseflow.NewDeadlineRequest("k-batch-"+id, id, "intake", effective)))
		require.NoError(t, err)
		span.End()
		producers[res[0].SQSMessageID] = span.SpanContext()
	}
	h.seedCases(ids...)
	cfg := h.testConfig()
	cfg.Concurrency, cfg.BatchSize = 10, 10
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers(), TracerProvider: sp.tp})

	got := sp.wait(10, consumerOf(h.env.Queues.URL))
	require.Len(t, got, 10)
	traces := map[trace.TraceID]bool{}
	for _, c := range got {
		id := attrs(c)["messaging.message.id"].AsString()
		requireConsumer(t, c, h.env.Queues.URL, producers[id])
		traces[c.Links()[0].SpanContext.TraceID()] = true
	}
	require.Len(t, traces, 10, "ten producers' traces")
}

// xrayReceives adds the AWSTraceHeader system attribute to the received
// messages, as SQS does for a send that carried X-Ray's header: the SQS
// emulator drops MessageSystemAttributes on send (the SDK-side stand-in the
// design's testing matrix allows for what an emulator cannot do).
type xrayReceives struct {
	worker.SQSAPI
	header string
}

func (x xrayReceives) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := x.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if out != nil {
		for i := range out.Messages {
			if out.Messages[i].Attributes == nil {
				out.Messages[i].Attributes = map[string]string{}
			}
			out.Messages[i].Attributes[tracing.SystemAttrAWSTraceHeader] = x.header
		}
	}
	return out, err
}

// A message whose producer only set AWSTraceHeader (X-Ray's format, as the
// X-Ray SDK and Powertools send it) is linked to that context converted to
// W3C; its DLQ copy would carry it as traceparent.
func TestTraceAWSTraceHeader(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	sp := newSpans(t)
	header := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	h.start(h.testConfig(), worker.Deps{SQS: xrayReceives{SQSAPI: h.sqs, header: header}, Handlers: h.caseHandlers(), TracerProvider: sp.tp})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-xray", "c1", "intake", effective)))
	want, ok := tracing.FromXRay(header)
	require.True(t, ok)
	c := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
	requireConsumer(t, c, h.env.Queues.URL, want)
	require.Equal(t, "5759e988bd862e3fe1be46a994272793", c.Links()[0].SpanContext.TraceID().String())
}

// One message followed through every hop ddbworker makes, with an
// in-memory recorder: a producer's span writes an outbox record in the
// producer's own transaction (the record keeps the span's context); the
// relay sends it (send <queue>, linked to the producer); the worker's
// consumer span links to the producer — not to the relay — and fails
// terminal (CASE_NOT_FOUND); the DLQ copy keeps the producer's context;
// dlq redrive (the package API `ddbworker dlq redrive` calls) copies it
// back with it; the worker consumes the redriven copy, whose consumer span
// links back to the original producer, and its second DLQ copy still
// carries it. Every span is a root of its own trace, linked, never
// parented across the queue.
func TestTraceEndToEnd(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	sp := newSpans(t)
	rec := &receiveRecorder{}
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), TracerProvider: sp.tp, SQS: sqs.NewFromConfig(h.env.AWS, h.inj.SQS, rec.install)})
	queue := worker.QueueName(h.env.Queues.URL)
	requireProducerContext := func(attrs map[string]types.MessageAttributeValue, producer trace.SpanContext, msgAndArgs ...any) {
		t.Helper()
		got := tracing.Extract(attrs, nil)
		require.Equal(t, producer.TraceID(), got.TraceID(), msgAndArgs...)
		require.Equal(t, producer.SpanID(), got.SpanID(), msgAndArgs...)
	}

	// 1. The producer's transaction: its own write and the outbox record,
	// inside its span.
	ob, err := outbox.New(outbox.Config{Table: h.env.Table})
	require.NoError(t, err)
	ctx, span := sp.tp.Tracer("producer-app").Start(context.Background(), "request deadline", trace.WithSpanKind(trace.SpanKindProducer))
	producer := span.SpanContext()
	e := mustEnv(t)(caseflow.NewDeadlineRequest("k-e2e", "c-missing", "intake", effective))
	put, err := ob.Put(ctx, outbox.Event{Envelope: e})
	require.NoError(t, err)
	own := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(h.env.Table), Item: map[string]ddbtypes.AttributeValue{
		"PK": &ddbtypes.AttributeValueMemberS{Value: "REQUEST#k-e2e"}, "SK": &ddbtypes.AttributeValueMemberS{Value: "REQUEST"}}}}
	_, err = h.env.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{own, put}})
	require.NoError(t, err)
	span.End()
	out, err := h.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(h.env.Table), Key: map[string]ddbtypes.AttributeValue{
		"PK": put.Put.Item["PK"], "SK": put.Put.Item["SK"]}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	record, err := outbox.Decode(out.Item, tables.DefaultLayout())
	require.NoError(t, err)
	require.Equal(t, aws.ToString(tracing.Carry(producer)[tracing.AttrTraceparent].StringValue), record.Traceparent,
		"the record keeps the producer's context")

	// 2. The relay sends it: its send span links to the producer.
	r, err := relay.New(relay.Deps{DynamoDB: h.env.DynamoDB, SQS: h.env.SQS, TracerProvider: sp.tp},
		relay.Config{Table: h.env.Table, QueueURL: h.env.Queues.URL})
	require.NoError(t, err)
	for _, err := range r.Publish(context.Background(), []outbox.Record{record}) {
		require.NoError(t, err)
	}
	send := sp.wait(1, func(s *spanrec.Span) bool { return s.Name() == semspans.SpanSend(queue) })[0]
	sa := attrs(send)
	require.Equal(t, "aws_sqs", sa["messaging.system"].AsString())
	require.Equal(t, queue, sa["messaging.destination.name"].AsString())
	require.Equal(t, "send", sa["messaging.operation.type"].AsString())
	require.Equal(t, "send", sa["messaging.operation.name"].AsString())
	require.Equal(t, h.env.Queues.URL, sa["aws.sqs.queue.url"].AsString())
	require.Equal(t, trace.SpanKindClient, send.SpanKind(), "a send of a message created by another span")
	require.False(t, send.Parent().IsValid())
	require.Len(t, send.Links(), 1)
	require.Equal(t, producer.TraceID(), send.Links()[0].SpanContext.TraceID(), "the relay's send links to the producer")
	require.Equal(t, producer.SpanID(), send.Links()[0].SpanContext.SpanID())

	// 3. The worker: a consumer span linked to the producer (not to the
	// relay's send), failed terminal, a span per stage.
	first := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
	requireConsumer(t, first, h.env.Queues.URL, producer)
	require.NotEqual(t, send.SpanContext().SpanID(), first.Links()[0].SpanContext.SpanID(), "linked to the creation context, not the relay")
	a := attrs(first)
	require.Equal(t, worker.OutcomeTerminal, a["ddbworker.outcome"].AsString())
	require.Equal(t, caseflow.CodeCaseNotFound, a["error.type"].AsString())
	require.Equal(t, caseflow.CodeCaseNotFound, a["ddbworker.failure.code"].AsString())
	require.Equal(t, "terminal", a["ddbworker.failure.kind"].AsString())
	require.Equal(t, caseflow.TypeDeadline, a["ddbworker.message_type"].AsString())
	require.Equal(t, tracing.KeyHash("k-e2e"), a["ddbworker.idempotency_key.hash"].AsString())
	require.Equal(t, codes.Error, first.Status().Code)
	kids := sp.children(first)
	for _, name := range []string{semspans.SpanClaim, semspans.SpanHandler, semspans.SpanCommit, semspans.SpanRecord, semspans.SpanSettle} {
		require.Contains(t, kids, name, "a span per stage")
	}
	// The case's MustExist condition fails the commit, not the handler.
	require.Equal(t, codes.Error, kids[semspans.SpanCommit].Status().Code, "the commit failed")
	require.Equal(t, codes.Unset, kids[semspans.SpanHandler].Status().Code)
	require.Equal(t, codes.Unset, kids[semspans.SpanSettle].Status().Code, "the DLQ copy went")
	h.waitEvents(1, 30*time.Second, final)

	// 4. The DLQ copy keeps the producer's context.
	q, err := dlq.New(h.env.SQS, dlq.Config{DLQURL: h.env.Queues.DLQURL, QueueURL: h.env.Queues.URL})
	require.NoError(t, err)
	peek, err := q.Peek(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, peek, 1)
	require.Equal(t, caseflow.CodeCaseNotFound, peek[0].FailureCode)
	requireProducerContext(peek[0].Attributes, producer, "the DLQ copy carries the producer's context")

	// 5. dlq redrive copies it back with the context, and marks it.
	rep, err := q.Redrive(context.Background(), dlq.RedriveOptions{Max: 1, Rate: 10})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	require.Empty(t, rep.Moved[0].DroppedAttributes)
	redrivenID := rep.Moved[0].NewID

	// 6. The worker consumes the redriven copy: linked back to the
	// original producer. (Its work is FAILED_TERMINAL: the gate ends it
	// terminal again, and the terminal policy copies it to the DLQ again.)
	var second *spanrec.Span
	for _, c := range sp.wait(2, consumerOf(h.env.Queues.URL)) {
		if attrs(c)["messaging.message.id"].AsString() == redrivenID {
			second = c
		}
	}
	require.NotNil(t, second, "the redriven delivery's span")
	requireConsumer(t, second, h.env.Queues.URL, producer)
	require.NotEqual(t, first.SpanContext().TraceID(), second.SpanContext().TraceID())
	require.Equal(t, worker.OutcomeTerminal, attrs(second)["ddbworker.outcome"].AsString())
	require.Equal(t, caseflow.CodeCaseNotFound, attrs(second)["error.type"].AsString())
	var redriven *types.Message
	for _, m := range rec.Messages() {
		if aws.ToString(m.MessageId) == redrivenID {
			redriven = &m
		}
	}
	require.NotNil(t, redriven, "the worker received the redriven copy")
	requireProducerContext(redriven.MessageAttributes, producer, "the redriven copy carries the producer's context")
	require.Equal(t, peek[0].ID, aws.ToString(redriven.MessageAttributes[dlq.AttrRedrivenFrom].StringValue), "and its mark")

	h.waitEvents(2, 30*time.Second, final)
	again, err := q.Peek(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, again, 1)
	requireProducerContext(again[0].Attributes, producer, "the second DLQ copy still carries it")
}

// A team's middleware, registered once for every route: it adds a tenant
// attribute to the span and to a log line, and times the handler — inside
// the consumer span, in the handler span, with the message.
func TestMiddlewareInsideTheConsumerSpan(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	sp := newSpans(t)
	logs := &testenv.Buffer{}
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, nil)))
	reg := h.caseHandlers()
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	reg.Use(func(next ddbworker.Handler) ddbworker.Handler {
		return ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
			note("tenant")
			tenant := "tenant-" + msg.Envelope.AggregateID
			trace.SpanFromContext(ctx).SetAttributes(attribute.String("app.tenant", tenant))
			start := time.Now()
			res, err := next.Handle(ctx, msg)
			log.InfoContext(ctx, "handled", "tenant", tenant, "messageType", msg.Type(), "handlerMs", time.Since(start).Milliseconds())
			return res, err
		})
	}, func(next ddbworker.Handler) ddbworker.Handler {
		return ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
			note("inner")
			return next.Handle(ctx, msg)
		})
	})
	h.start(h.testConfig(), worker.Deps{Handlers: reg, TracerProvider: sp.tp, Logger: log})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-mw", "c1", "intake", effective)))

	c := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
	hs := sp.children(c)[semspans.SpanHandler]
	require.NotNil(t, hs)
	require.Equal(t, "tenant-c1", attrs(hs)["app.tenant"].AsString(), "the middleware's attribute is on the handler span")
	require.Equal(t, []string{"tenant", "inner"}, order, "Use's order: the first outermost")

	var line map[string]any
	for _, l := range logs.Lines() {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "handled" {
			line = m
		}
	}
	require.NotNil(t, line)
	require.Equal(t, "tenant-c1", line["tenant"])
	require.Contains(t, line, "handlerMs")
	require.Equal(t, hs.SpanContext().TraceID().String(), line[tracing.LogTraceID])
	require.Equal(t, hs.SpanContext().SpanID().String(), line[tracing.LogSpanID], "logged in the handler span")
}

// Without a tracer provider the worker makes no span at all, even when
// the message carries a trace context.
func TestNoTracerProviderNoSpans(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	sp := newSpans(t)
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	ctx, span := sp.tp.Tracer("producer-app").Start(context.Background(), "p")
	_, err := h.producer().SendEnvelopes(ctx, mustEnv(t)(caseflow.NewDeadlineRequest("k-off", "c1", "intake", effective)))
	require.NoError(t, err)
	span.End()
	h.waitEvents(1, 30*time.Second, final)
	require.Len(t, sp.rec.Ended(), 1, "only the producer's")
}

// onInbox matches the DynamoDB calls on the inbox record of key and
// messageType: its PutItem (the gate's claim) and UpdateItem (the record's
// writes, a takeover).
func onInbox(key, messageType string) func(any) bool {
	want := (inbox.Store{}).Key(key, messageType)
	same := func(got map[string]ddbtypes.AttributeValue) bool {
		for k, v := range want {
			if s, ok := got[k].(*ddbtypes.AttributeValueMemberS); !ok || s.Value != v.(*ddbtypes.AttributeValueMemberS).Value {
				return false
			}
		}
		return true
	}
	return func(in any) bool {
		switch in := in.(type) {
		case *dynamodb.PutItemInput:
			return same(in.Item)
		case *dynamodb.UpdateItemInput:
			return same(in.Key)
		}
		return false
	}
}

// A stage whose DynamoDB or SQS call failed says so on its span —
// error.type (the failure's bounded code) and an error status — while the
// stages that went well stay unset: a claim the gate's PutItem failed
// (throttled), a record write that failed (the failure's UpdateItem, a
// 500), an SQS action that failed (the DLQ copy's SendMessage). Each call
// makes one attempt, so that one injected fault fails it.
func TestTraceStageFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caseID string // not seeded: terminal CASE_NOT_FOUND
		fault  func(key string) faults.Rule
		failed string // the failed stage's span
		code   string // its error.type
		// outcome and consumerCode are the delivery's: its consumer span's
		// ddbworker.outcome and error.type.
		outcome, consumerCode string
	}{
		{name: "the claim's PutItem", caseID: "c1", failed: semspans.SpanClaim, code: failure.CodeThrottled,
			fault: func(key string) faults.Rule {
				return faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindThrottle, Times: 1, Match: onInbox(key, caseflow.TypeDeadline)}
			}, outcome: worker.OutcomeRetry, consumerCode: failure.CodeThrottled},
		{name: "the record's UpdateItem", caseID: "c-missing", failed: semspans.SpanRecord, code: failure.CodeServiceUnavailable,
			fault: func(key string) faults.Rule {
				return faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindServerError, Times: 1, Match: onInbox(key, caseflow.TypeDeadline)}
			}, outcome: worker.OutcomeRetry, consumerCode: failure.CodeServiceUnavailable},
		{name: "the DLQ copy's SendMessage", caseID: "c-missing", failed: semspans.SpanSettle, code: failure.CodeServiceUnavailable,
			fault: func(string) faults.Rule {
				return faults.Rule{Service: "SQS", Operation: "SendMessage", Kind: faults.KindSQSError, Times: 1}
			}, outcome: worker.OutcomeTerminal, consumerCode: caseflow.CodeCaseNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			sp := newSpans(t)
			key := "k-stage-" + tc.failed
			h.inj.Add(tc.fault(key))
			cfg := h.testConfig()
			cfg.CallAttempts = 1
			once := func(o *sqs.Options) { o.RetryMaxAttempts = 1 }
			h.start(cfg, worker.Deps{Handlers: h.caseHandlers(), TracerProvider: sp.tp, SQS: sqs.NewFromConfig(h.env.AWS, h.inj.SQS, once)})
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest(key, tc.caseID, "intake", effective)))

			c := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
			require.Equal(t, tc.outcome, attrs(c)["ddbworker.outcome"].AsString())
			require.Equal(t, tc.consumerCode, attrs(c)["error.type"].AsString())
			kids := sp.children(c)
			for _, name := range []string{semspans.SpanClaim, semspans.SpanRecord, semspans.SpanSettle} {
				s, ok := kids[name]
				require.True(t, ok, "a %s span", name)
				if name != tc.failed {
					require.Equal(t, codes.Unset, s.Status().Code, "%s went well", name)
					require.NotContains(t, attrs(s), attribute.Key("error.type"), name)
					continue
				}
				require.Equal(t, codes.Error, s.Status().Code, "%s failed", name)
				require.Equal(t, tc.code, attrs(s)["error.type"].AsString())
			}
			require.Equal(t, map[faults.Kind]int{tc.fault(key).Kind: 1}, h.inj.Fired(), "the one fault fired")
			h.waitEvents(1, 30*time.Second, final) // the next delivery settles it
		})
	}
}

// A deferral served by re-sending (attemptPolicy.notBefore ahead, and a
// redrive policy of maxReceiveCount 1 that a second receive would trip):
// the copy carries the producer's context as traceparent, and both
// deliveries' consumer spans — the deferred original's and the copy's,
// which applies — link to the producer's span.
func TestTraceDeferralResend(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 1}})
	h.seedCases("c1")
	sp := newSpans(t)
	rec := &receiveRecorder{}
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), TracerProvider: sp.tp, SQS: sqs.NewFromConfig(h.env.AWS, h.inj.SQS, rec.install)})

	ctx, span := sp.tp.Tracer("producer-app").Start(context.Background(), "schedule deadline", trace.WithSpanKind(trace.SpanKindProducer))
	e := mustEnv(t)(caseflow.NewDeadlineRequest("k-trace-defer", "c1", "intake", effective))
	later := time.Now().Add(2 * time.Second)
	e.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &later}
	res, err := h.producer().SendEnvelopes(ctx, e)
	require.NoError(t, err)
	span.End()
	original := res[0].SQSMessageID

	got := sp.wait(2, consumerOf(h.env.Queues.URL))
	byOutcome := map[string]*spanrec.Span{}
	for _, c := range got {
		requireConsumer(t, c, h.env.Queues.URL, span.SpanContext())
		byOutcome[attrs(c)["ddbworker.outcome"].AsString()] = c
	}
	deferred, applied := byOutcome[worker.OutcomeDeferred], byOutcome[worker.OutcomeApplied]
	require.NotNil(t, deferred, "the original, deferred: %v", byOutcome)
	require.NotNil(t, applied, "the copy, applied: %v", byOutcome)
	require.Equal(t, original, attrs(deferred)["messaging.message.id"].AsString())
	copyID := attrs(applied)["messaging.message.id"].AsString()
	require.NotEqual(t, original, copyID, "the applied delivery is the re-sent copy")
	require.NotEqual(t, deferred.SpanContext().TraceID(), applied.SpanContext().TraceID(), "each delivery a trace of its own, linked")

	var copied *types.Message
	for _, m := range rec.Messages() {
		if aws.ToString(m.MessageId) == copyID {
			copied = &m
		}
	}
	require.NotNil(t, copied, "the copy was received")
	want := tracing.Carry(span.SpanContext())[tracing.AttrTraceparent]
	require.Equal(t, aws.ToString(want.StringValue), aws.ToString(copied.MessageAttributes[tracing.AttrTraceparent].StringValue),
		"the copy's traceparent is the producer's")
	require.NotContains(t, copied.MessageAttributes, tracing.AttrTracestate, "the producer's context had none")
}
