package worker_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// sendFIFO enqueues envelopes on a FIFO queue, grouped by aggregateId.
func (h *harness) sendFIFO(envs ...*envelope.Envelope) {
	h.t.Helper()
	for _, e := range envs {
		b, err := envelope.Encode(e)
		require.NoError(h.t, err)
		_, err = h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: aws.String(h.env.Queues.URL), MessageBody: aws.String(string(b)),
			MessageGroupId: aws.String(e.AggregateID), MessageDeduplicationId: aws.String(e.MessageID)})
		require.NoError(h.t, err)
	}
}

// FIFO: a failure holds back the rest of its group (in order, after the
// retry); other groups go on.
func TestFIFOGroupOrder(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{FIFO: true}})
	h.seedCases("ca", "cb")
	reg := flaky(h, 1, func(k string) bool { return k == "a1" })
	h.start(h.testConfig(), worker.Deps{Handlers: reg})
	var envs []*envelope.Envelope
	for _, k := range []string{"a1", "a2", "a3"} {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest(k, "ca", "intake", effective)))
	}
	for _, k := range []string{"b1", "b2"} {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest(k, "cb", "intake", effective)))
	}
	h.sendFIFO(envs...)

	evs := h.waitEvents(5, 30*time.Second, final)
	var groupA, groupB []string
	bDoneBeforeA1 := false
	for _, ev := range evs {
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		switch ev.IdempotencyKey[0] {
		case 'a':
			groupA = append(groupA, ev.IdempotencyKey)
		case 'b':
			groupB = append(groupB, ev.IdempotencyKey)
			if len(groupA) == 0 && len(groupB) == 2 {
				bDoneBeforeA1 = true
			}
		}
	}
	require.Equal(t, []string{"a1", "a2", "a3"}, groupA, "group order holds across the retry")
	require.Equal(t, []string{"b1", "b2"}, groupB)
	require.True(t, bDoneBeforeA1, "the other group is not held back by a1's backoff")
	h.requireQueueEmpty()
}

// Graceful shutdown mid-batch: receiving stops, in-flight work finishes and
// is deleted, nothing is lost; a new worker takes the rest, each applied once.
func TestGracefulShutdownMidBatch(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	ids := make([]string, 20)
	var envs []*envelope.Envelope
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-"+ids[i], ids[i], "intake", effective)))
	}
	h.seedCases(ids...)
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	var started atomic.Int32
	gate := make(chan struct{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		started.Add(1)
		<-gate
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))
	cfg := h.testConfig()
	cfg.Concurrency, cfg.BatchSize = 4, 4
	w := h.start(cfg, worker.Deps{Handlers: reg})
	h.send(envs...)
	testenv.Eventually(t, 10*time.Second, func() bool { return started.Load() == 4 }, "four handlers in flight")

	w.Cancel() // SIGTERM: stop receiving while four handlers are blocked
	close(gate)
	w.Stop()
	first := h.allEvents()
	require.Len(t, first, 4, "exactly the in-flight messages finished: %+v", first)
	for _, ev := range first {
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	}
	q := testenv.InspectQueue(t, h.env.Queues.URL)
	require.Equal(t, 16, q.Total(), "the in-flight four were deleted, the rest untouched: %+v", q)

	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	h.waitEvents(20, 30*time.Second, final)
	for _, id := range ids {
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id))
	}
	h.requireQueueEmpty()
}

// notBefore defers processing by visibility, without an attempt or a write.
func TestNotBeforeDefers(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-later", "c1", "intake", effective))
	later := time.Now().Add(2 * time.Second)
	env.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &later}
	h.inj.ResetCalls()
	h.send(env)
	deferred := h.waitEvents(1, 10*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeDeferred })[0]
	require.Positive(t, deferred.Visibility)
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 1, ev.Attempt, "deferral is not a business attempt")
	require.False(t, time.Now().Before(later))
}

// A terminal guard (the case does not exist) ends the work FAILED_TERMINAL
// with the handler's code, writes nothing, and the quarantine policy deletes
// without the DLQ.
func TestTerminalGuardQuarantine(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	cfg := h.testConfig()
	cfg.TerminalPolicy = worker.PolicyQuarantine
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-nocase", "nope", "intake", effective)))
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, caseflow.CodeCaseNotFound, ev.Code)
	require.Equal(t, worker.PolicyQuarantine, ev.Policy)
	require.Empty(t, h.item(caseflow.CaseKey("nope")), "no case was created")
	require.Equal(t, 0, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "quarantine does not use the DLQ")
	h.requireQueueEmpty()
}

// A handler panic is a retryable failure (never a crash) and ends with a code.
func TestHandlerPanicIsRetryable(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		var notes []string
		return ddbworker.Result{Outcome: notes[len(notes)]}, nil // index out of range: a real runtime panic
	})))
	h.start(h.testConfig(), worker.Deps{Handlers: reg})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-panic", "c1", "intake", effective))
	env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 2}
	h.send(env)
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, failure.CodeMaxAttempts, ev.Code)
	retry := h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, failure.CodeHandlerPanic, retry.Code)
}

// The DLQ copy keeps the producer's own message attributes.
func TestDLQKeepsProducerAttributes(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	_, err := h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
		MessageBody:       aws.String("not json"),
		MessageAttributes: map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}}})
	require.NoError(t, err)
	h.waitEvents(1, 20*time.Second, final)
	m := h.dlq(1)[0]
	require.Equal(t, "acme", aws.ToString(m.MessageAttributes["tenant"].StringValue))
	require.Equal(t, string(envelope.CodeInvalidJSON), aws.ToString(m.MessageAttributes[dlq.AttrFailureCode].StringValue))
}

// A failed DeleteMessageBatch of a full batch is retried without ever
// sending more than 10 entries (SQS refuses the whole request then), and
// every message ends deleted.
func TestDeleteBatchFailureRetried(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	ids := make([]string, 40)
	var envs []*envelope.Envelope
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-del-"+ids[i], ids[i], "intake", effective)))
	}
	h.seedCases(ids...)
	h.inj.Add(faults.Rule{Service: "SQS", Operation: "DeleteMessageBatch", Kind: faults.KindSQSError, Times: 2})
	var tooMany atomic.Int32
	h.inj.Add(faults.Rule{Service: "SQS", Operation: "DeleteMessageBatch", Kind: faults.KindDelay, Rate: 1, Match: func(in any) bool {
		if b, ok := in.(*sqs.DeleteMessageBatchInput); ok && len(b.Entries) > 10 {
			tooMany.Add(1)
		}
		return false
	}})
	cfg := h.testConfig()
	cfg.Concurrency = 10
	cfg.DeleteFlushInterval = 200 * time.Millisecond
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
	h.send(envs...)
	evs := h.waitEvents(40, 30*time.Second, final)
	for _, ev := range evs[:40] {
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	}
	h.requireQueueEmpty()
	require.Equal(t, 2, h.inj.Fired()[faults.KindSQSError])
	require.Zero(t, tooMany.Load(), "a DeleteMessageBatch carried more than 10 entries")
	require.Empty(t, h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeDuplicate }), "no redelivery")
}

// A lost response on the fenced failure update: the SDK's retry finds the
// record already failed under our own token. That is recorded, not a lost
// lease: the message backs off and the retry applies.
func TestLostResponseOnFailureUpdate(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1})
	h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, 1, func(string) bool { return true })})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-lostfail", "c1", "intake", effective)))
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse])
	retry := h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, "DOWNSTREAM_DOWN", retry.Code)
	require.Empty(t, h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeLeaseLost }))
}
