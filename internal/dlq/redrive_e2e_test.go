package dlq_test

import (
	"context"
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

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/worker"
)

// events collects a worker's events.
type events struct {
	mu  sync.Mutex
	evs []worker.Event
}

func (e *events) add(ev worker.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

// final returns the final events of key.
func (e *events) final(key string) []worker.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []worker.Event
	for _, ev := range e.evs {
		if ev.Final && ev.IdempotencyKey == key {
			out = append(out, ev)
		}
	}
	return out
}

// The semantics, with a real worker: a redriven COMPLETED work item
// is a duplicate (applied once), a redriven terminal one fails the same way
// again and lands in the DLQ again with the same code.
func TestRedriveEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{VisibilityTimeout: 2 * time.Second}})
	ctx := context.Background()
	require.NoError(t, caseflow.SeedCases(ctx, env.DynamoDB, env.Table, []string{"c1"}))

	reg := ddbworker.NewRegistry()
	require.NoError(t, (&caseflow.Handlers{Table: env.Table, TrackApplications: true}).Register(reg))
	var evs events
	w, err := worker.New(worker.Deps{DynamoDB: env.DynamoDB, SQS: env.SQS, Handlers: reg, OnEvent: evs.add}, worker.Config{
		Store: inbox.Store{Table: env.Table}, QueueURL: env.Queues.URL, DLQURL: env.Queues.DLQURL,
		Concurrency: 4, WaitTime: time.Second, VisibilityTimeout: 2 * time.Second, ClockSkew: 100 * time.Millisecond,
		Backoff: worker.Backoff{Base: time.Second, Max: 4 * time.Second}, DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})

	effective := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	applied, err := caseflow.NewDeadlineRequest("k-done", "c1", "review", effective)
	require.NoError(t, err)
	missing, err := caseflow.NewDeadlineRequest("k-missing", "c-missing", "review", effective)
	require.NoError(t, err)
	appliedBody, err := envelope.Encode(applied)
	require.NoError(t, err)
	missingBody, err := envelope.Encode(missing)
	require.NoError(t, err)
	for _, b := range [][]byte{appliedBody, missingBody} {
		_, err := env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL), MessageBody: aws.String(string(b)),
			MessageAttributes: map[string]types.MessageAttributeValue{"tenant": str("acme")}})
		require.NoError(t, err)
	}
	// On a loaded machine k-done's commit may time out after it applied
	// (TIMEOUT, no attempt): the next delivery finds it COMPLETED and ends
	// duplicate, and no event says applied. Applied once is the point: the
	// application counter below.
	testenv.Eventually(t, 20*time.Second, func() bool { return len(evs.final("k-done")) >= 1 && len(evs.final("k-missing")) == 1 }, "first deliveries")
	for _, ev := range evs.final("k-done") {
		require.Contains(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate}, ev.Outcome, "%+v", evs.final("k-done"))
	}
	first := evs.final("k-missing")[0]
	require.Equal(t, worker.OutcomeTerminal, first.Outcome)
	require.Equal(t, caseflow.CodeCaseNotFound, first.Code)
	require.Equal(t, worker.PolicyDLQ, first.Policy)

	doneBefore := len(evs.final("k-done"))

	// The completed item's message reaches the DLQ too — as after a crash
	// between commit and delete, with the redrive policy moving it.
	_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.DLQURL), MessageBody: aws.String(string(appliedBody))})
	require.NoError(t, err)

	q, err := dlq.New(env.SQS, dlq.Config{DLQURL: env.Queues.DLQURL, QueueURL: env.Queues.URL})
	require.NoError(t, err)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{caseflow.CodeCaseNotFound: 1, dlq.CodeNone: 1}, st.ByCode)
	require.Equal(t, map[string]int{caseflow.TypeDeadline: 2}, st.ByType)

	rep, err := q.Redrive(ctx, dlq.RedriveOptions{Rate: 100})
	require.NoError(t, err)
	require.Empty(t, rep.Failed)
	require.Len(t, rep.Moved, 2)
	newIDs := map[string]string{}
	for _, m := range rep.Moved {
		newIDs[m.Key] = m.NewID
	}

	testenv.Eventually(t, 20*time.Second, func() bool { return len(evs.final("k-done")) > doneBefore && len(evs.final("k-missing")) == 2 }, "redriven deliveries")
	dup := evs.final("k-done")[doneBefore]
	require.Equal(t, worker.OutcomeDuplicate, dup.Outcome, "a redriven COMPLETED item is a duplicate")
	require.Equal(t, newIDs["k-done"], dup.SQSMessageID)
	again := evs.final("k-missing")[1]
	require.Equal(t, worker.OutcomeTerminal, again.Outcome)
	require.Equal(t, caseflow.CodeCaseNotFound, again.Code, "a redriven terminal item fails the same way")
	require.Equal(t, newIDs["k-missing"], again.SQSMessageID)

	// Applied once: the application counter and the case's deadline version.
	get := func(key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
		out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), Key: key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		return out.Item
	}
	num := func(item map[string]ddbtypes.AttributeValue, attr string) int {
		v, _ := item[attr].(*ddbtypes.AttributeValueMemberN)
		require.NotNil(t, v, attr)
		n, err := strconv.Atoi(v.Value)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 1, num(get(caseflow.ApplicationKey("c1", caseflow.TypeDeadline, "k-done")), caseflow.AttrApplications))
	require.Equal(t, 1, num(get(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
	rec, err := (inbox.Store{}).Decode(get((inbox.Store{}).Key("k-missing", caseflow.TypeDeadline)))
	require.NoError(t, err)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, caseflow.CodeCaseNotFound, rec.FailureCode)

	// Back in the DLQ: only the terminal one, with its code, as a copy of
	// the redriven message.
	testenv.Eventually(t, 10*time.Second, func() bool { return testenv.InspectQueue(t, env.Queues.DLQURL).Total() == 1 }, "the terminal one back in the DLQ")
	msgs, err := q.Peek(ctx, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, caseflow.CodeCaseNotFound, m.FailureCode)
	require.Equal(t, "k-missing", m.IdempotencyKey)
	require.Equal(t, newIDs["k-missing"], m.SourceMessageID)
	require.Equal(t, string(missingBody), m.Body)
	require.Equal(t, map[string]types.MessageAttributeValue{"tenant": str("acme")}, stringAttrs(m.ProducerAttributes()),
		"the producer's attribute survived both trips; redrivenFrom did not come back")
	testenv.Eventually(t, 10*time.Second, func() bool { return testenv.InspectQueue(t, env.Queues.URL).Total() == 0 }, "work queue drained")
}

// A worker died holding a lease and its message went to the DLQ through the
// redrive policy (no delivery came back): the sweeper marks the record
// LEASE_ABANDONED, and a redrive of the same work takes it over and applies
// it, once.
func TestRedriveAbandonedLease(t *testing.T) {
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{VisibilityTimeout: 2 * time.Second}})
	ctx := context.Background()
	require.NoError(t, caseflow.SeedCases(ctx, env.DynamoDB, env.Table, []string{"c1"}))
	policy := stale.Policy{Lease: 2 * time.Second, Skew: 100 * time.Millisecond}

	work, err := caseflow.NewDeadlineRequest("k-abandoned", "c1", "review", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	body, err := envelope.Encode(work)
	require.NoError(t, err)
	// The dead worker: it passed the gate, then vanished.
	dead, err := gate.New(env.DynamoDB, gate.Config{Store: inbox.Store{Table: env.Table}, Owner: "dead/1", Policy: policy})
	require.NoError(t, err)
	d, err := dead.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: work.IdempotencyKey, MessageType: work.MessageType, RequestHash: work.RequestHash,
		AggregateType: work.AggregateType, AggregateID: work.AggregateID}})
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action)
	// Its message, moved by the redrive policy: no ddbworker attributes.
	_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.DLQURL), MessageBody: aws.String(string(body))})
	require.NoError(t, err)

	sw, err := stale.NewSweeper(env.DynamoDB, stale.SweepConfig{Store: inbox.Store{Table: env.Table}, Policy: policy, Grace: time.Second})
	require.NoError(t, err)
	testenv.Eventually(t, 15*time.Second, func() bool {
		rep, err := sw.Sweep(ctx, stale.SweepOptions{})
		require.NoError(t, err)
		return rep.Marked == 1
	}, "the sweeper never marked the abandoned lease")
	get := func() *inbox.Record {
		out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), Key: (inbox.Store{}).Key("k-abandoned", caseflow.TypeDeadline), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		rec, err := (inbox.Store{}).Decode(out.Item)
		require.NoError(t, err)
		return rec
	}
	rec := get()
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, failure.CodeLeaseAbandoned, rec.FailureCode)

	reg := ddbworker.NewRegistry()
	require.NoError(t, (&caseflow.Handlers{Table: env.Table, TrackApplications: true}).Register(reg))
	var evs events
	w, err := worker.New(worker.Deps{DynamoDB: env.DynamoDB, SQS: env.SQS, Handlers: reg, OnEvent: evs.add}, worker.Config{
		Store: inbox.Store{Table: env.Table}, QueueURL: env.Queues.URL, DLQURL: env.Queues.DLQURL, Concurrency: 2, WaitTime: time.Second,
		VisibilityTimeout: 2 * time.Second, ClockSkew: 100 * time.Millisecond, DeleteFlushInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	q, err := dlq.New(env.SQS, dlq.Config{DLQURL: env.Queues.DLQURL, QueueURL: env.Queues.URL})
	require.NoError(t, err)
	rep, err := q.Redrive(ctx, dlq.RedriveOptions{Filter: dlq.Filter{Code: dlq.CodeNone}})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(evs.final("k-abandoned")) == 1 }, "the redriven work never settled")
	ev := evs.final("k-abandoned")[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 1, ev.Attempt, "the dead worker's lease is no business attempt")
	rec = get()
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts)
	require.Equal(t, 1, rec.Takeovers, "the abandoned lease counts one takeover")
	out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), Key: caseflow.ApplicationKey("c1", caseflow.TypeDeadline, "k-abandoned"), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, "1", out.Item[caseflow.AttrApplications].(*ddbtypes.AttributeValueMemberN).Value, "applied once")
}
