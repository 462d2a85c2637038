package relay_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/worker"
)

// firstSentAts records, by event id, the ddbworker.firstSentAt attribute of
// every SendMessageBatch entry a client sends ("" for none).
type firstSentAts struct {
	mu  sync.Mutex
	got map[string][]string
}

func (f *firstSentAts) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("test.firstSentAts", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
				f.mu.Lock()
				for _, e := range p.Entries {
					id := eventID(aws.ToString(e.MessageBody))
					f.got[id] = append(f.got[id], aws.ToString(e.MessageAttributes[dlq.AttrFirstSentAt].StringValue))
					if a, ok := e.MessageAttributes[dlq.AttrFirstSentAt]; ok && aws.ToString(a.DataType) != "Number" {
						f.got[id] = append(f.got[id], "wrong data type "+aws.ToString(a.DataType))
					}
				}
				f.mu.Unlock()
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// failMarks makes every UpdateItem fail: a relay that sends and then
// cannot mark, as one that crashed between the two.
func failMarks(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("test.failMarks", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if _, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
				return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("injected: mark failed")
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// Regression: relay messages carried no origin time, so the worker judged a
// relay copy's age by its own SentTimestamp, and its replay-window check
// (it refuses work first sent longer ago than the inbox keeps COMPLETED
// records, 35 days by default) could not protect a re-send: a record sent,
// not marked (a crash), and sent again after its COMPLETED record expired
// was applied a second time. Every relay message now carries
// ddbworker.firstSentAt, the outbox record's createdAt in epoch ms (Number),
// the same on every copy; here a record created 40 days ago is refused
// REPLAY_WINDOW_EXPIRED on both copies and its handler never runs, while a
// fresh one applies once (its re-send a duplicate).
func TestRelayMessagesCarryTheOutboxOrigin(t *testing.T) {
	w := newWorld(t, false)
	ctx := context.Background()
	created := time.Now().Add(-40 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
	old, err := outbox.New(outbox.Config{Table: w.env.Table, Now: func() time.Time { return created }})
	require.NoError(t, err)
	fresh := w.outbox
	for _, ev := range []struct {
		wr  *outbox.Writer
		agg string
	}{{old, "old"}, {fresh, "new"}} {
		w.outbox = ev.wr
		w.write(ev.agg, 1, 1)
	}
	recs := w.pendingRecords()
	require.Len(t, recs, 2)
	want := map[string][]string{}
	for _, rec := range recs {
		ms := strconv.FormatInt(rec.CreatedAt.UnixMilli(), 10)
		want[rec.EventID] = []string{ms, ms}
	}
	require.Equal(t, strconv.FormatInt(created.UnixMilli(), 10), want["old-e001"][0])

	attrs := &firstSentAts{got: map[string][]string{}}
	q := sqs.NewFromConfig(w.env.AWS, attrs.install)
	crashing, err := relay.New(relay.Deps{DynamoDB: dynamodb.NewFromConfig(w.env.AWS, failMarks), SQS: q}, relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL})
	require.NoError(t, err)
	for _, err := range crashing.Publish(ctx, recs) {
		var pe *relay.PublishError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "mark", pe.Step, "sent, not marked")
	}
	r, err := relay.New(relay.Deps{DynamoDB: w.env.DynamoDB, SQS: q}, relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL})
	require.NoError(t, err)
	for _, err := range r.Publish(ctx, w.pendingRecords()) {
		require.NoError(t, err)
	}
	attrs.mu.Lock()
	require.Equal(t, want, attrs.got, "every copy carries the record's createdAt")
	attrs.mu.Unlock()

	// The worker judges both copies by the record's age.
	var mu sync.Mutex
	calls := map[string]int{}
	var final []worker.Event
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("Counted", ddbworker.HandlerFunc(func(_ context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[m.Key()]++
		return ddbworker.Result{}, nil
	})))
	wk, err := worker.New(worker.Deps{DynamoDB: w.env.DynamoDB, SQS: w.env.SQS, Handlers: reg, OnEvent: func(ev worker.Event) {
		if ev.Final {
			mu.Lock()
			final = append(final, ev)
			mu.Unlock()
		}
	}}, worker.Config{Store: inbox.Store{Table: w.env.Table}, QueueURL: w.env.Queues.URL, DLQURL: w.env.Queues.DLQURL,
		Concurrency: 1, WaitTime: time.Second, VisibilityTimeout: 5 * time.Second, DeleteFlushInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()
	testenv.Eventually(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(final) == 4 }, "four copies settled")

	mu.Lock()
	defer mu.Unlock()
	outcomes := map[string][]string{}
	for _, ev := range final {
		o := ev.Outcome
		if ev.Code != "" {
			o += " " + ev.Code
		}
		outcomes[ev.IdempotencyKey] = append(outcomes[ev.IdempotencyKey], o)
	}
	terminal := worker.OutcomeTerminal + " " + failure.CodeReplayWindowExpired
	require.Equal(t, []string{terminal, terminal}, outcomes["k-old-e001"], "both copies of the 40-day-old record refused")
	require.ElementsMatch(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate}, outcomes["k-new-e001"])
	require.Equal(t, map[string]int{"k-new-e001": 1}, calls, "the old record's handler never ran")
}
