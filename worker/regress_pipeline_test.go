package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// Regression tests of the defects found at commit 4fbf456, all in the
// machinery that charged a business attempt when a lease was taken and
// then tried to refund it, or in the Lambda path around it. Each fails on
// that commit.

// Under Lambda, a deferral by re-send deletes the original: it is a
// success, not a batch item failure. Before, the copy was sent and the
// original reported too, so the event source mapping never deleted it; it
// came back, was copied again, and ended in the DLQ by the redrive policy.
func TestRegressLambdaResendIsNotReported(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	w := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-later", "c1", "intake", effective))
	later := time.Now().Add(48 * time.Hour) // further than one hiding covers
	env.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &later}
	h.send(env)

	// The first receive hides it as long as SQS allows; the second re-sends.
	first := h.sqsEvent(1, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), first)
	require.NoError(t, err)
	require.Len(t, resp, 1, "hidden by visibility: reported, back later")
	h.makeVisible(first)
	second := h.sqsEvent(1, 30*time.Second)
	require.Equal(t, "2", second[0].Attributes["ApproximateReceiveCount"])
	resp, err = w.HandleSQSEvent(context.Background(), second)
	require.NoError(t, err)
	require.Empty(t, resp, "re-sent: the original is a success the mapping deletes")
	resent := h.waitEvents(1, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeDeferred && ev.Final })
	require.Equal(t, 15*time.Minute, resent[0].Visibility, "the copy waits SQS's longest delay")
	q := testenv.InspectQueue(t, h.env.Queues.URL)
	require.Equal(t, 2, q.Total(), "the original (until the mapping deletes it) and its delayed copy")
}

// A gate PutItem that applied while every SDK attempt lost its response
// costs nothing: the worker gives back the lease it may hold (fenced on
// its token), and the next delivery takes the work over at once, as
// business attempt 1. Before, the orphaned lease made the next delivery
// wait and take over at attempt 2: with maxBusinessAttempts 1 the work
// ended MAX_ATTEMPTS_EXCEEDED and the handler never ran.
func TestRegressUnansweredGateWriteCostsNothing(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	// The first attempt applies and loses its response; the SDK's retries
	// of that same call (the same input: as many as the call's time
	// allows) fail before they reach the table, so no answer says it
	// applied. Later calls are untouched.
	var unanswered atomic.Pointer[dynamodb.PutItemInput]
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindLostResponse, Times: 1,
		Match: func(in any) bool {
			p, ok := in.(*dynamodb.PutItemInput)
			return ok && unanswered.CompareAndSwap(nil, p)
		}})
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindServerError, Rate: 1,
		Match: func(in any) bool { p, ok := in.(*dynamodb.PutItemInput); return ok && p == unanswered.Load() }})
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-unanswered", "c1", "intake", effective))
	env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
	h.send(env)

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse])
	require.Positive(t, h.inj.Fired()[faults.KindServerError], "the SDK retried the gate's call; no attempt got an answer")
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", h.allEvents())
	require.Equal(t, 1, ev.Attempt)
	rec := h.record("k-unanswered", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts)
	require.Zero(t, rec.Takeovers, "the unanswered lease was given back, not abandoned")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-unanswered"))
}

// Under Lambda every record's work ends LambdaSettleMargin before the
// invocation's deadline, wherever it started: a record that waited for a
// slot gets what is left, and one with too little left is not started.
// Before, each record got the invocation's time from its own start: with
// one slot and three records the invocation answered after its deadline
// (Lambda had ended it: the whole batch came back) and the last record's
// failure was never written. The second case catches the per-record
// timeout alone (the slot wait and the too-little-left check in place): a
// record that started late ran past the invocation's deadline less the
// margin, which the first case cannot see, its later records never
// starting.
func TestRegressLambdaWorkEndsAtInvocationDeadline(t *testing.T) {
	// workEnds records the deadline of each run's context, by key.
	type workEnds struct {
		sync.Mutex
		by map[string]time.Time
	}
	note := func(e *workEnds, ctx context.Context, key string) {
		dl, _ := ctx.Deadline()
		e.Lock()
		e.by[key] = dl
		e.Unlock()
	}
	requireWithin := func(t *testing.T, e *workEnds, until time.Time) {
		t.Helper()
		e.Lock()
		defer e.Unlock()
		past := map[string]string{}
		for k, dl := range e.by {
			require.False(t, dl.IsZero(), "%s: its work has no deadline", k)
			if dl.After(until) {
				past[k] = dl.Sub(until).String()
			}
		}
		require.Empty(t, past, "work allowed to run past the invocation's deadline less LambdaSettleMargin, by key")
	}

	t.Run("records behind the first have no time left", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		var runs atomic.Int32
		ends := &workEnds{by: map[string]time.Time{}}
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
			runs.Add(1)
			note(ends, ctx, m.Key())
			<-ctx.Done() // runs as long as the worker lets it
			return ddbworker.Result{}, ctx.Err()
		})))
		cfg := h.testConfig()
		cfg.Concurrency = 1
		w := h.lambdaWorker(cfg, worker.Deps{Handlers: reg})
		for _, k := range []string{"k-1", "k-2", "k-3"} {
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest(k, "c1", "intake", effective)))
		}
		ev := h.sqsEvent(3, 30*time.Second)

		// 3 s of work: the first record starts within it even on a loaded
		// machine (its claim is a DynamoDB call).
		deadline := time.Now().Add(worker.LambdaSettleMargin + 3*time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		resp, err := w.HandleSQSEvent(ctx, ev)
		answered := time.Now()
		require.NoError(t, err)
		require.True(t, answered.Before(deadline), "answered %s after the deadline", answered.Sub(deadline))
		require.Len(t, resp, 3)
		require.EqualValues(t, 1, runs.Load(), "the records behind the first had no time left: not started")
		requireWithin(t, ends, deadline.Add(-worker.LambdaSettleMargin))
		var recorded int
		for _, k := range []string{"k-1", "k-2", "k-3"} {
			if rec := h.record(k, caseflow.TypeDeadline); rec != nil {
				recorded++
				require.Equal(t, inbox.StatusFailedRetryable, rec.Status, k)
				require.Equal(t, failure.CodeMessageTimeout, rec.FailureCode, "%s: the run that overran is recorded", k)
			}
		}
		require.Equal(t, 1, recorded)
	})

	t.Run("a record that waited for a slot gets what is left", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		var runs atomic.Int32
		ends := &workEnds{by: map[string]time.Time{}}
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
			note(ends, ctx, m.Key())
			if runs.Add(1) == 1 {
				time.Sleep(time.Second) // the slot's first holder, done well within the invocation
				return ddbworker.Result{}, nil
			}
			<-ctx.Done() // runs as long as the worker lets it
			return ddbworker.Result{}, ctx.Err()
		})))
		cfg := h.testConfig()
		cfg.Concurrency = 1
		w := h.lambdaWorker(cfg, worker.Deps{Handlers: reg})
		for _, k := range []string{"k-1", "k-2"} {
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest(k, "c1", "intake", effective)))
		}
		ev := h.sqsEvent(2, 30*time.Second)

		// The second record gets the slot 1 s in or later, with up to 4 s
		// of work left: it starts, and must stop at the invocation's
		// deadline less the margin, not 5 s after its own start.
		deadline := time.Now().Add(worker.LambdaSettleMargin + 5*time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		resp, err := w.HandleSQSEvent(ctx, ev)
		answered := time.Now()
		require.NoError(t, err)
		require.True(t, answered.Before(deadline), "answered %s after the deadline", answered.Sub(deadline))
		require.EqualValues(t, 2, runs.Load(), "the record behind the first had time left: started")
		requireWithin(t, ends, deadline.Add(-worker.LambdaSettleMargin))
		require.Len(t, resp, 1)
		var completed, timedOut int
		for _, k := range []string{"k-1", "k-2"} {
			rec := h.record(k, caseflow.TypeDeadline)
			require.NotNil(t, rec, k)
			switch rec.Status {
			case inbox.StatusCompleted:
				completed++
			case inbox.StatusFailedRetryable:
				timedOut++
				require.Equal(t, failure.CodeMessageTimeout, rec.FailureCode, "%s: the run that reached the deadline is recorded", k)
			}
		}
		require.Equal(t, []int{1, 1}, []int{completed, timedOut})
	})
}

// The DLQ copy is sized to the DLQ's own MaximumMessageSize, and a copy the
// DLQ refuses as too large is left to the redrive policy. Before, the
// worker assumed every DLQ takes 1 MiB: a 256 KiB DLQ refused a message
// near 256 KiB plus the failure attributes with an error that was not the
// too-large case, and the message came back every backoff step, never
// reaching the DLQ. The third case catches the refusal's fallback alone
// (the size read at start in place): a DLQ that shrank after the worker
// read its size refuses the copy, which must go to the redrive policy.
func TestRegressDLQSmallerThan1MiB(t *testing.T) {
	const dlqMax = 256 << 10
	for _, tc := range []struct {
		name string
		body int
		// the copy fits once the producer's attribute is shed; or no copy
		// fits, and the redrive policy takes the message as it is
		fits bool
		// the DLQ takes 1 MiB when the worker reads its size and dlqMax
		// when the message fails: only SQS's refusal says it is too large
		shrinks bool
	}{
		{"the copy fits without the producer's attribute", dlqMax - 200, true, false},
		{"no copy fits", dlqMax, false, false},
		// The size read at start is stale (or could not be read: 1 MiB is
		// assumed); the copy the DLQ refuses as too long goes to the
		// redrive policy as well.
		{"the DLQ shrank after the worker read its size", dlqMax - 200, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			setDLQMax := func(n int) {
				_, err := h.env.SQS.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(h.env.Queues.DLQURL),
					Attributes: map[string]string{string(types.QueueAttributeNameMaximumMessageSize): fmt.Sprint(n)}})
				require.NoError(t, err)
			}
			cfg := h.testConfig()
			cfg.Backoff.Max = 20 * time.Second
			if tc.shrinks {
				setDLQMax(1 << 20)
				run := h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
				require.Equal(t, 1<<20, run.w.Prepare(context.Background()).DLQMaxMessageSize, "read when Run starts")
			}
			setDLQMax(dlqMax)
			body := strings.Repeat("x", tc.body) // not JSON: terminal INVALID_ENVELOPE
			_, err := h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL), MessageBody: aws.String(body),
				MessageAttributes: map[string]types.MessageAttributeValue{"trace": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("t", 300))}}})
			require.NoError(t, err)
			if !tc.shrinks {
				h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
			}

			ev := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeTerminal })[0]
			if tc.fits {
				require.True(t, ev.Final)
				require.Equal(t, worker.PolicyDLQ, ev.Policy)
				m := h.dlq(1)[0]
				require.Equal(t, string(envelope.CodeInvalidJSON), aws.ToString(m.MessageAttributes[dlq.AttrFailureCode].StringValue))
				require.NotContains(t, m.MessageAttributes, "trace", "shed to fit the DLQ's size")
				return
			}
			require.False(t, ev.Final)
			require.Equal(t, worker.PolicyRedrive, ev.Policy, "left to the redrive policy, not retried against the DLQ every backoff")
			require.Equal(t, cfg.Backoff.Max, ev.Visibility)
			require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total())
		})
	}
}

// Under Lambda a standard queue's record parked while the database is
// unhealthy is hidden as long as the outage has lasted so far, as the
// gate knows it (from the trip to the last failed probe), at least
// ParkVisibility and at most ParkMaxVisibility; on the last receive the
// redrive policy allows it is re-sent as a new message (its receive count
// starts afresh), delayed likewise, and not reported, so the mapping
// deletes the original. So no hide outlasts the outage by more than its
// own length, and the backlog drains within about one outage length of
// the recovery. Before, a record was hidden four times longer on each
// receive (1s, 4s, 16s… here) and its copy delayed by ParkMaxVisibility:
// after a 6-minute outage records stayed hidden 16 and 64 minutes more
// (measured under the RIE: 28 of 48 messages still hidden 12 minutes
// after the recovery). On b9058c9 this test fails at the second receive:
// a 4s hide about a second into the outage.
func TestRegressLambdaOutageHidesByItsAge(t *testing.T) {
	const maxReceives = 5
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: maxReceives, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.seedCases("c1")
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	// The first failed call trips the gate; a probe is due at every
	// invocation (they come at least ParkVisibility apart), so the gate
	// knows the outage's age to the invocation.
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 200 * time.Millisecond, ProbeMaxInterval: 500 * time.Millisecond,
		ParkVisibility: time.Second, ParkMaxVisibility: 4 * time.Second}
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-outage", "c1", "intake", effective)))

	proxy.SetMode(ddbproxy.Throttle)
	// The gate trips in the first invocation, just before it parks the
	// record: the outage is no older than since that invocation returned,
	// give or take the park itself, and the events' visibility is in whole
	// seconds, rounded up. bound is the longest hide that allows, at most
	// ParkMaxVisibility, checked once an invocation has returned.
	var began time.Time
	bound := func() time.Duration {
		if began.IsZero() {
			return time.Second
		}
		return min(max(time.Second, time.Since(began)), 4*time.Second) + 1500*time.Millisecond
	}
	var hides []time.Duration
	for receive := 1; receive <= maxReceives; receive++ {
		ev := h.sqsEvent(1, 30*time.Second) // when its hide ends: the outage goes on
		require.Equal(t, fmt.Sprint(receive), ev[0].Attributes["ApproximateReceiveCount"])
		resp, err := w.HandleSQSEvent(context.Background(), ev)
		require.NoError(t, err)
		hideBound := bound()
		if began.IsZero() {
			began = time.Now()
		}
		parked := h.waitEvents(receive, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })
		require.Zero(t, parked[receive-1].Attempt)
		require.LessOrEqual(t, parked[receive-1].Visibility, hideBound, "receive %d: hidden no longer than the outage so far", receive)
		if receive < maxReceives {
			require.Len(t, resp, 1, "receive %d: parked and reported", receive)
			require.False(t, parked[receive-1].Final)
			hides = append(hides, parked[receive-1].Visibility)
			continue
		}
		// The last receive: a copy goes back to the queue, delayed by the
		// same schedule; the original is a success the mapping deletes.
		require.Empty(t, resp, "the last receive is re-sent, not reported")
		require.True(t, parked[receive-1].Final)
		h.deleteRecords(ev)
		copied := h.sqsEvent(1, 30*time.Second)
		require.NotEqual(t, aws.ToString(ev[0].MessageId), aws.ToString(copied[0].MessageId))
		require.Equal(t, aws.ToString(ev[0].Body), aws.ToString(copied[0].Body))
		require.Equal(t, "1", copied[0].Attributes["ApproximateReceiveCount"], "the copy's receive count starts afresh")
		require.Contains(t, copied[0].MessageAttributes, dlq.AttrFirstSentAt, "the copy keeps the work's origin")
	}
	t.Logf("hides %v; the copy received %s into the outage", hides, time.Since(began).Round(time.Millisecond))
	require.Equal(t, time.Second, hides[0], "just tripped: ParkVisibility")
	require.GreaterOrEqual(t, hides[3], 2*time.Second, "the hides grow with the outage (%v)", hides)
	require.False(t, w.DatabaseHealthy())
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total())
}

// The longest outage a Lambda function survives for a given
// maxReceiveCount is stated by HealthConfig.OutageCover, from the hides
// the adapter really gives: any outage on a standard queue (a record is
// re-sent on the last receive the redrive policy allows); on a FIFO queue,
// the hides of the receives before the last, whose receive must find the
// database healthy (hidden, its next receive would move it to the DLQ).
//
// The arithmetic, with the defaults (ParkVisibility 1m, growing fourfold
// per receive, ParkMaxVisibility 12h): SQS hides a message at most 12h
// after its receipt; the adapter keeps a minute's margin and takes a
// record's receipt to be the event source mapping's longest batching
// window (5m) before its invocation, so no hide is longer than
// 12h - 1m - 5m = 11h54m.
//
//	FIFO, maxReceiveCount 5:  1m + 4m + 16m + 64m                    = 85m
//	FIFO, maxReceiveCount 3:  1m + 4m                                =  5m
//	FIFO, maxReceiveCount 1:  (the only receive must find it healthy) =  0
//	FIFO, maxReceiveCount 10: 1m + 4m + 16m + 64m + 256m + 4 × 11h54m
//	                          (receives 6 to 9: 1024m and more, capped) = 341m + 47h36m = 53h17m
//
// (It said 13h25m for maxReceiveCount 5 before: it counted a 12h hide of
// the last receive, which only delays the DLQ.) Short parkings are never
// capped: 1s, 4s, 16s, then 30s add up to 51s.
func TestOutageCover(t *testing.T) {
	def, err := worker.HealthConfig{}.WithDefaults()
	require.NoError(t, err)
	const capped = 12*time.Hour - time.Minute - 5*time.Minute
	short, err := worker.HealthConfig{ParkVisibility: time.Second, ParkMaxVisibility: 30 * time.Second}.WithDefaults()
	require.NoError(t, err)
	for _, tc := range []struct {
		name            string
		cfg             worker.HealthConfig
		maxReceiveCount int
		want            time.Duration
	}{
		{"defaults, maxReceiveCount 5", def, 5, (1 + 4 + 16 + 64) * time.Minute},
		{"defaults, maxReceiveCount 3", def, 3, (1 + 4) * time.Minute},
		{"defaults, maxReceiveCount 1", def, 1, 0},
		{"defaults, maxReceiveCount 10", def, 10, (1+4+16+64+256)*time.Minute + 4*capped},
		{"short parkings, never capped", short, 5, (1 + 4 + 16 + 30) * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.cfg.OutageCover(tc.maxReceiveCount, true))
		})
	}
	require.Equal(t, 53*time.Hour+17*time.Minute, def.OutageCover(10, true))
	for _, n := range []int{0, 1, 5, 10} {
		require.Greater(t, def.OutageCover(n, false), 100*24*time.Hour, "standard queue, maxReceiveCount %d: any outage", n)
	}
	require.Greater(t, def.OutageCover(0, true), 100*24*time.Hour, "no redrive policy: any outage")
}

// OutageCover adds up the hides the adapter really gives: under Lambda,
// in an outage, a FIFO record's receives before the last are hidden for
// what OutageCover counts, a hide of 12h capped below SQS's limit (11h54m),
// less only the time the invocation took to reach the record. Before,
// OutageCover counted 12 hours for a hide the adapter capped at 11h54m.
func TestLambdaOutageCoverIsTheHidesGiven(t *testing.T) {
	const maxReceives = 4
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{FIFO: true, MaxReceiveCount: maxReceives, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.seedCases("c1")
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	// 1h, 4h, then 16h: capped (ParkMaxVisibility keeps its default, 12h).
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: time.Hour, ProbeMaxInterval: time.Hour, ParkVisibility: time.Hour}
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	h.sendFIFO(mustEnv(t)(caseflow.NewDeadlineRequest("k-cover", "c1", "intake", effective)))

	proxy.SetMode(ddbproxy.Throttle)
	var total time.Duration
	for receive := 1; receive < maxReceives; receive++ {
		ev := h.sqsEvent(1, 30*time.Second)
		require.Equal(t, fmt.Sprint(receive), ev[0].Attributes["ApproximateReceiveCount"])
		_, err := w.HandleSQSEvent(context.Background(), ev)
		require.NoError(t, err)
		parked := h.waitEvents(receive, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })
		total += parked[receive-1].Visibility
		h.makeVisible(ev)
	}
	health, err := worker.HealthConfig{ParkVisibility: time.Hour}.WithDefaults()
	require.NoError(t, err)
	cover := health.OutageCover(maxReceives, true)
	require.Equal(t, 5*time.Hour+12*time.Hour-6*time.Minute, cover, "1h + 4h, then 16h capped: 12h - 1m margin - 5m batching window")
	require.LessOrEqual(t, total, cover, "OutageCover never counts more than the adapter hides")
	require.InDelta(t, cover, total, float64(5*time.Second), "only the invocation's own time apart")
}

// A deploy (SIGTERM, then a new worker) in the middle of an outage charges
// no business attempt: nothing a parked message holds needs writing, and
// the new worker takes the work over as attempt 1 once the database is
// healthy. Before, the refunds carried by parked messages were dropped at
// shutdown: the next takeover counted the attempt, and with
// maxBusinessAttempts 1 the work ended MAX_ATTEMPTS_EXCEEDED.
func TestRegressDeployDuringOutageChargesNothing(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 5, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied(h.inj.DynamoDB)
	ids := []string{"c0", "c1", "c2", "c3", "c4", "c5"}
	h.seedCases(ids...)
	// The commits fail first: messages hold leases when the outage starts.
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindThrottle, Rate: 1})
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	cfg.Health = worker.HealthConfig{ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 5 * time.Second}
	first := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	for _, id := range ids {
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective))
		env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
		h.send(env)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return !first.w.DatabaseHealthy() }, "the health gate trips")
	proxy.SetMode(ddbproxy.Throttle) // the whole database is down now

	first.Stop() // the deploy: SIGTERM
	second := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	testenv.Eventually(t, 30*time.Second, func() bool { return !second.w.DatabaseHealthy() }, "the new worker finds the database down")
	h.inj.Clear()
	proxy.SetMode(ddbproxy.Pass)

	h.waitEvents(len(ids), 90*time.Second, final)
	for _, ev := range h.allEvents() {
		if ev.Final {
			require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", ev)
			require.Equal(t, 1, ev.Attempt, "%+v", ev)
		}
	}
	for _, id := range ids {
		rec := h.record("k-"+id, caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status, id)
		require.Zero(t, rec.Attempts, "%s: the outage and the deploy cost no business attempt", id)
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id), "%s applied once", id)
	}
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered")
}

// A fused route's handler failing on a redelivery found the record its
// first failure wrote: the failure was not recorded and the message came
// back as lease_lost every second, its attempts never counted, forever.
// Now the failure is recorded under a lease taken from that record.
func TestRegressFusedRepeatedFailureIsCounted(t *testing.T) {
	t.Run("fails twice, then succeeds", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, 2, func(string) bool { return true }, ddbworker.Fused())})
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-fused-flaky", "c1", "intake", effective)))
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 3, ev.Attempt)
		retries := h.waitEvents(2, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
		require.Len(t, retries, 2)
		for i, r := range retries {
			require.Equal(t, i+1, r.Attempt)
		}
		rec := h.record("k-fused-flaky", caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, 2, rec.Attempts)
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-fused-flaky"))
		h.requireQueueEmpty()
	})
	t.Run("always fails: MAX_ATTEMPTS_EXCEEDED", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, -1, func(string) bool { return true }, ddbworker.Fused())})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-fused-doomed", "c1", "intake", effective))
		env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 2}
		h.send(env)
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
		require.Equal(t, failure.CodeMaxAttempts, ev.Code)
		require.Equal(t, 2, ev.Attempt)
		rec := h.record("k-fused-doomed", caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
		require.Equal(t, 2, rec.Attempts)
		require.Len(t, h.dlq(1), 1)
		h.requireQueueEmpty()
	})
}

// The daemon re-sends a message it parks on the last receive the redrive
// policy allows, as the Lambda adapter does: however long it kept the
// message hidden, a deploy or a crash during the outage would release it,
// and its next receive would move it to the DLQ. The copy's receive count
// starts afresh; the work applies once after the recovery.
func TestDaemonParksLastReceiveByResend(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 2, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.seedCases("c1")
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-last", "c1", "intake", effective)))
	// A first receive elsewhere (a worker that died with it): the worker's
	// receive is the last the redrive policy allows.
	h.makeVisible(h.sqsEvent(1, 30*time.Second))

	proxy.SetMode(ddbproxy.Throttle)
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second,
		ParkVisibility: 2 * time.Second, ParkMaxVisibility: 2 * time.Second}
	h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})

	parked := h.waitEvents(1, 20*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })[0]
	require.True(t, parked.Final, "re-sent: the original is deleted")
	require.Equal(t, 2*time.Second, parked.Visibility, "the copy's delay (ParkMaxVisibility)")
	require.Zero(t, parked.Attempt)
	require.True(t, parked.Infrastructure, "parked for the outage (%s), not for the work", parked.Code)

	// The worker receives nothing while the database is unhealthy: the
	// copy waits in the queue, and is the message applied after the
	// recovery, as its first receive.
	proxy.SetMode(ddbproxy.Pass)
	applied := h.waitEvents(1, 60*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })[0]
	require.NotEqual(t, parked.SQSMessageID, applied.SQSMessageID, "the copy, not the original")
	require.Equal(t, 1, applied.Attempt)
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-last"))
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered")
	h.requireQueueEmpty()
}

// A delivery parked while it holds a lease it cannot give back (the
// database is unhealthy: nothing can be written) reclaims that lease when
// it runs again after the recovery: its claim presents the token the
// record still holds, and counts no takeover however long the outage
// outlasted the lease. Before, the lease expired and the resumed delivery
// took it over as abandoned — a takeover counted for every outage that
// caught the work in flight, so five outages (or a flapping database)
// ended healthy work MAX_TAKEOVERS_EXCEEDED.
func TestParkedDeliveryReclaimsItsLease(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 5, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied(h.inj.DynamoDB)
	ids := []string{"c0", "c1", "c2"}
	h.seedCases(ids...)
	// The commits fail first: the deliveries hold leases when the gate
	// trips, and park.
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindThrottle, Rate: 1})
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 5 * time.Second}
	run := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})
	for _, id := range ids {
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "the health gate trips")
	proxy.SetMode(ddbproxy.Throttle) // the whole database is down now
	h.waitEvents(len(ids), 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })
	held := h.record("k-c0", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, held.Status, "the parked delivery's lease is still on the record")
	// The outage outlasts the leases.
	<-time.After(time.Until(held.LeaseExpiry.Add(time.Second))) // the lease's end, not a wait for async work
	h.inj.Clear()
	proxy.SetMode(ddbproxy.Pass)

	applied := h.waitEvents(len(ids), 60*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })
	for _, ev := range applied {
		require.Equal(t, 1, ev.Attempt, "%+v", ev)
	}
	for _, id := range ids {
		rec := h.record("k-"+id, caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status, id)
		require.Zero(t, rec.Takeovers, "%s: the outage counted no takeover: the parked delivery reclaimed its own lease", id)
		require.Zero(t, rec.Attempts, id)
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id), "%s applied once", id)
	}
	h.requireQueueEmpty()
}
