package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// sqsEvent receives up to n messages from the queue, as the event source
// mapping would, and returns them as the Lambda event's records (package
// lambda hands the worker the runtime's records as SQS messages): receipt
// handles and visibility are real.
func (h *harness) sqsEvent(n int, visibility time.Duration) []types.Message {
	h.t.Helper()
	var ev []types.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(ev) < n && time.Now().Before(deadline) {
		out, err := h.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.env.Queues.URL), MaxNumberOfMessages: int32(min(10, n-len(ev))), WaitTimeSeconds: 1,
			VisibilityTimeout:           int32(visibility / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"}})
		require.NoError(h.t, err)
		ev = append(ev, out.Messages...)
	}
	require.Len(h.t, ev, n)
	return ev
}

// makeVisible makes an event's records visible again, as when their
// visibility ends.
func (h *harness) makeVisible(ev []types.Message) {
	h.t.Helper()
	for _, r := range ev {
		_, err := h.env.SQS.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(h.env.Queues.URL),
			ReceiptHandle: r.ReceiptHandle, VisibilityTimeout: 0})
		require.NoError(h.t, err)
	}
}

// deleteRecords deletes an event's records, as the event source mapping
// does with those an invocation does not report.
func (h *harness) deleteRecords(ev []types.Message) {
	h.t.Helper()
	for _, r := range ev {
		_, err := h.env.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
			ReceiptHandle: r.ReceiptHandle})
		require.NoError(h.t, err)
	}
}

func (h *harness) lambdaWorker(cfg worker.Config, deps worker.Deps) *worker.Worker {
	h.t.Helper()
	if deps.DynamoDB == nil {
		deps.DynamoDB = h.ddb
	}
	if deps.SQS == nil {
		deps.SQS = h.sqs
	}
	next := deps.OnEvent
	deps.OnEvent = func(ev worker.Event) {
		h.note(ev)
		if next != nil {
			next(ev)
		}
	}
	w, err := worker.New(deps, cfg)
	require.NoError(h.t, err)
	return w
}

// failedIDs are the reported records' message ids, sorted.
func failedIDs(failed []string) []string {
	return slices.Sorted(slices.Values(failed))
}

func TestLambdaBatch(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1", "c2", "c3")
	w := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k1", "c1", "intake", effective)),
		mustEnv(t)(caseflow.NewDeadlineRequest("k2", "c2", "intake", effective)),
		mustEnv(t)(caseflow.NewDeadlineRequest("k1", "c1", "intake", effective)), // a duplicate in the same batch
		mustEnv(t)(caseflow.NewDeadlineRequest("k3", "c-missing", "intake", effective)))
	h.sendRaw(`{not json`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev := h.sqsEvent(5, 30*time.Second)
	resp, err := w.HandleSQSEvent(ctx, ev)
	require.NoError(t, err)
	// Applied and terminal-to-DLQ records succeed; the duplicate, run at
	// the same time as its original, either finds it COMPLETED (success)
	// or in flight (reported, hidden until the lease ends).
	inFlight := h.waitEventsNow(func(e worker.Event) bool { return e.Outcome == worker.OutcomeInFlight })
	require.LessOrEqual(t, len(inFlight), 1)
	var want []string
	for _, e := range inFlight {
		want = append(want, e.SQSMessageID)
	}
	require.Equal(t, want, failedIDs(resp), "%+v", h.allEvents())
	if len(inFlight) == 1 {
		var again []types.Message
		for _, r := range ev {
			if aws.ToString(r.MessageId) == inFlight[0].SQSMessageID {
				again = append(again, r)
			}
		}
		h.makeVisible(again)
		resp, err = w.HandleSQSEvent(ctx, h.sqsEvent(1, 30*time.Second))
		require.NoError(t, err)
		require.Empty(t, resp)
		require.Equal(t, worker.OutcomeDuplicate, h.waitEvents(1, time.Second, func(e worker.Event) bool { return e.Outcome == worker.OutcomeDuplicate })[0].Outcome)
	}
	for _, k := range []struct{ id, key string }{{"c1", "k1"}, {"c2", "k2"}} {
		require.EqualValues(t, 1, h.applications(k.id, caseflow.TypeDeadline, k.key))
		require.Equal(t, inbox.StatusCompleted, h.record(k.key, caseflow.TypeDeadline).Status)
	}
	require.Len(t, h.dlq(2), 2, "CASE_NOT_FOUND and the invalid envelope were copied to the DLQ")
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.URL).Ready, "nothing visible again")
}

// A retryable failure is hidden for its backoff on the record's own receipt
// handle and reported; the next invocation applies it as attempt 2.
func TestLambdaRetryBacksOff(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	w := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: flaky(h, 1, func(string) bool { return true })})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-flaky", "c1", "intake", effective)))

	ev := h.sqsEvent(1, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{aws.ToString(ev[0].MessageId)}, failedIDs(resp))
	retry := h.waitEvents(1, time.Second, func(e worker.Event) bool { return e.Outcome == worker.OutcomeRetry })[0]
	require.Positive(t, retry.Visibility)
	require.Less(t, retry.Visibility, 30*time.Second, "hidden for the backoff, not the mapping's visibility timeout")
	require.Equal(t, inbox.StatusFailedRetryable, h.record("k-flaky", caseflow.TypeDeadline).Status)

	resp, err = w.HandleSQSEvent(context.Background(), h.sqsEvent(1, 30*time.Second)) // back after the backoff
	require.NoError(t, err)
	require.Empty(t, resp)
	applied := h.waitEvents(1, time.Second, final)[0]
	require.Equal(t, 2, applied.Attempt)
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-flaky"))
}

// The lease of a record ends with the invocation's deadline.
func TestLambdaLeaseFollowsDeadline(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	var lease time.Time
	reg := ddbworker.NewRegistry()
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		lease = h.record("k-lease", caseflow.TypeDeadline).LeaseExpiry
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))
	w := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: reg})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-lease", "c1", "intake", effective)))
	ev := h.sqsEvent(1, 60*time.Second)
	deadline := time.Now().Add(45 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	resp, err := w.HandleSQSEvent(ctx, ev)
	require.NoError(t, err)
	require.Empty(t, resp)
	require.WithinDuration(t, deadline, lease, time.Second, "the lease runs to the deadline, not the 2s lease of the config")
}

// FIFO: a group's records run in order; the first that fails reports itself
// and the rest of its group, unprocessed; other groups go on.
func TestLambdaFIFOGroupStops(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{FIFO: true}})
	h.seedCases("c1", "c2")
	cfg := h.testConfig()
	w := h.lambdaWorker(cfg, worker.Deps{Handlers: flaky(h, -1, func(key string) bool { return key == "k-g1-first" })})
	h.sendFIFO(mustEnv(t)(caseflow.NewDeadlineRequest("k-g1-first", "c1", "intake", effective)),
		mustEnv(t)(caseflow.NewDeadlineRequest("k-g1-second", "c1", "review", effective)),
		mustEnv(t)(caseflow.NewDeadlineRequest("k-g2", "c2", "intake", effective)))
	// fauxqs returns one message per group per receive; the mapping's batch
	// is built from two receives' worth here, as AWS may return it at once.
	ev := h.sqsEvent(2, 30*time.Second)
	groups := map[string]int{}
	for _, r := range ev {
		groups[r.Attributes["MessageGroupId"]]++
	}
	require.Len(t, groups, 2, "one record of each group")
	resp, err := w.HandleSQSEvent(context.Background(), ev)
	require.NoError(t, err)
	require.Len(t, resp, 1, "the failed group's record")
	require.EqualValues(t, 1, h.applications("c2", caseflow.TypeDeadline, "k-g2"), "the other group went on")
	require.EqualValues(t, 0, h.applications("c1", caseflow.TypeDeadline, "k-g1-second"))
}

// While the database is unhealthy an invocation touches no table: every
// record is hidden and reported; once probes succeed the next invocation
// applies the batch.
func TestLambdaUnhealthyReportsBatch(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	target, _ := testenv.Endpoints(t)
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: target})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	ddb := dynamodb.NewFromConfig(h.env.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
	ids := []string{"c0", "c1", "c2", "c3", "c4", "c5"}
	h.seedCases(ids...)
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	cfg.Health = worker.HealthConfig{ProbeInterval: 200 * time.Millisecond, ProbeMaxInterval: 400 * time.Millisecond, ParkVisibility: 10 * time.Second}
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	for _, id := range ids {
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
	}

	proxy.SetMode(ddbproxy.Throttle)
	first := h.sqsEvent(6, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), first)
	require.NoError(t, err)
	require.Len(t, resp, 6, "throttled: every record comes back")
	require.False(t, w.DatabaseHealthy(), "the health gate tripped")
	for _, ev := range h.allEvents() {
		require.True(t, ev.Infrastructure, "%+v", ev)
		require.Zero(t, ev.Attempt, "no business attempt: %+v", ev)
	}

	// The records come back (the test makes them visible, as after their
	// parking visibility); the database is still sick.
	h.makeVisible(first)
	released := h.sqsEvent(6, 30*time.Second)
	proxy.Reset()
	resp, err = w.HandleSQSEvent(context.Background(), released)
	require.NoError(t, err)
	require.Len(t, resp, 6)
	require.LessOrEqual(t, proxy.Stats().Total, worker.DefaultCallAttempts, "at most one probe (its SDK attempts): the invocation does not touch the table")
	require.GreaterOrEqual(t, testenv.InspectQueue(t, h.env.Queues.URL).InFlight, 6, "hidden, not handed straight back")

	proxy.SetMode(ddbproxy.Pass)
	testenv.Eventually(t, 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = w.HandleSQSEvent(ctx, nil) // an empty invocation still probes
		return w.DatabaseHealthy()
	}, "healthy again after two probes")
	h.makeVisible(released)
	resp, err = w.HandleSQSEvent(context.Background(), h.sqsEvent(6, 30*time.Second))
	require.NoError(t, err)
	require.Empty(t, resp)
	for _, id := range ids {
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id))
		require.Zero(t, h.record("k-"+id, caseflow.TypeDeadline).Attempts, "throttling cost no attempt")
	}
}

func TestQueueURLFromARN(t *testing.T) {
	require.Equal(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", worker.QueueURLFromARN("arn:aws:sqs:eu-west-1:123456789012:orders"))
	require.Equal(t, "https://sqs.cn-north-1.amazonaws.com.cn/1/q.fifo", worker.QueueURLFromARN("arn:aws-cn:sqs:cn-north-1:1:q.fifo"))
	require.Empty(t, worker.QueueURLFromARN("arn:aws:sns:us-east-1:1:t"))
	require.Empty(t, worker.QueueURLFromARN("nonsense"))
}
