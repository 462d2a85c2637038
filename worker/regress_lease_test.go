package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// visibilityLatency delays every ChangeMessageVisibility call by d while
// on, as AWS's latency would (fauxqs answers at once, which hides races
// with it).
type visibilityLatency struct {
	d  time.Duration
	on atomic.Bool
}

func (l *visibilityLatency) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("regress.visibilityLatency", func(ctx context.Context, in middleware.InitializeInput,
			next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if _, ok := in.Parameters.(*sqs.ChangeMessageVisibilityInput); ok && l.on.Load() {
				if err := sleepCtx(ctx, l.d); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// Issue 21, defect 3: a delivery parked while it holds a lease (the
// database turned unhealthy under its handler) got that lease back after
// the recovery as it was — expired, the outage having outlasted it — and
// its handler started under it: the heartbeat renews an expired lease at
// once, but only after its visibility call to SQS, so the handler's
// effects.Do reached its claim first, was refused (EFFECT_LEASE_LOST: the
// work's lease is not live), and the refusal was recorded as a business
// attempt. Racy on AWS (every run with 150 ms of SQS latency); here the
// SQS latency of the heartbeat's visibility call after the recovery is
// 2 s, so the old code charged the attempt every run (applied at attempt
// 2, attempts 1 on the record). The held lease is renewed by the claim
// now, before the handler starts: applied once, at attempt 1, no attempt
// and no takeover counted.
func TestHeldLeaseRenewedBeforeTheHandler(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 5, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.seedCases("c1")
	log, err := effects.New(ddb, effects.Config{Inbox: inbox.Store{Table: h.env.Table}})
	require.NoError(t, err)

	started, outage := make(chan struct{}), make(chan struct{})
	var runs, calls atomic.Int32
	var refusals atomic.Value
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if runs.Add(1) == 1 {
			// The database goes down under the first run: it ends by
			// infrastructure trouble once the gate has tripped, holding
			// its lease, which nothing can give back now.
			close(started)
			select {
			case <-outage:
			case <-ctx.Done():
				return ddbworker.Result{}, ctx.Err()
			}
			return ddbworker.Result{}, failure.NewRetryable(failure.CodeThrottled, "the database is down")
		}
		eff, err := log.Do(ctx, m, effects.Call{Name: "notify", Provider: "mail", Operation: "send", Request: map[string]string{"case": "c1"}, Idempotent: true},
			func(ctx context.Context, key string) (effects.Outcome, error) {
				calls.Add(1)
				return effects.Outcome{Ref: key}, nil
			})
		if err != nil {
			refusals.Store(err.Error())
			return ddbworker.Result{}, err
		}
		return ddbworker.Apply(eff.Write()), nil
	})))

	cfg := h.testConfig()
	// Room for a slow emulator before the outage (a claim that timed out
	// would park the message before its handler ran).
	cfg.CallTimeout = 1500 * time.Millisecond
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 10 * time.Second}
	latency := &visibilityLatency{d: 2 * time.Second}
	run := h.start(cfg, worker.Deps{DynamoDB: ddb, SQS: sqs.NewFromConfig(h.env.AWS, h.inj.SQS, latency.install), Handlers: reg})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-held", "c1", "intake", effective)))

	<-started
	proxy.SetMode(ddbproxy.Throttle) // the heartbeat's renewal fails: the gate trips
	testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "the health gate trips")
	close(outage)
	parked := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })[0]
	require.False(t, parked.Final)
	held := h.record("k-held", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, held.Status)
	require.NotEmpty(t, held.LeaseToken, "the parked delivery holds its lease: nothing could give it back")
	// The outage outlasts the lease and its skew margin.
	<-time.After(time.Until(held.LeaseExpiry.Add(cfg.ClockSkew + time.Second))) // the lease's end, not a wait for async work
	// The recovery: from now on the heartbeat's first visibility call
	// (before its first renewal) takes 2 s.
	latency.on.Store(true)
	proxy.SetMode(ddbproxy.Pass)

	ev := h.waitEvents(1, 60*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v (the handler was refused: %v)", h.allEvents(), refusals.Load())
	require.Equal(t, 1, ev.Attempt, "no business attempt charged for the outage: %+v (refused: %v)", h.allEvents(), refusals.Load())
	require.Nil(t, refusals.Load(), "the handler never started under an expired lease")
	for _, e := range h.allEvents() {
		require.NotEqual(t, effects.CodeLeaseLost, e.Code, "%+v", e)
	}
	rec := h.record("k-held", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts, "no failure recorded")
	require.Zero(t, rec.Takeovers, "the parked delivery's own lease, renewed: no takeover")
	require.EqualValues(t, 1, calls.Load(), "the effect was made once")
	h.requireQueueEmpty()
}

// interruptedOnce is a handler whose first run holds its lease until the
// database is down (started closes as it begins; it ends when outage is
// closed, by infrastructure trouble, so its delivery is parked holding the
// lease), and whose later runs apply a write, counted in runs.
func interruptedOnce(t *testing.T, table string) (reg *ddbworker.Registry, started, outage chan struct{}, runs *atomic.Int32) {
	started, outage, runs = make(chan struct{}), make(chan struct{}), new(atomic.Int32)
	reg = ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if runs.Add(1) == 1 {
			close(started)
			select {
			case <-outage:
			case <-ctx.Done():
				return ddbworker.Result{}, ctx.Err()
			}
			return ddbworker.Result{}, failure.NewRetryable(failure.CodeThrottled, "the database is down")
		}
		return ddbworker.Apply(ddbworker.Put(table, ddbworker.Key{"PK": "APPLIED#" + m.Key(), "SK": "X"}, ddbworker.Item{"run": m.Run})), nil
	})))
	return reg, started, outage, runs
}

// By trace (issue 21): a delivery parked on the last receive the redrive
// policy allows is re-sent, and the original deleted (parkByResend); a
// lease it held went nowhere — nothing can give it back while the
// database is down — so the copy's claim took it over once it expired,
// counting a takeover (five outages ended healthy work
// MAX_TAKEOVERS_EXCEEDED). The copy carries the lease now
// (ddbworker.heldLease) and gets it back: no takeover.
func TestParkByResendHandsOverItsLease(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 2, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-resent", "c1", "intake", effective)))
	// A first receive elsewhere: the worker's receive is the last one.
	h.makeVisible(h.sqsEvent(1, 30*time.Second))

	reg, started, outage, runs := interruptedOnce(t, h.env.Table)
	cfg := h.testConfig()
	// Room for a slow emulator before the outage (a claim that timed out
	// would park the message before its handler ran).
	cfg.CallTimeout = 1500 * time.Millisecond
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second,
		ParkVisibility: 2 * time.Second, ParkMaxVisibility: 2 * time.Second}
	run := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: reg})

	<-started
	proxy.SetMode(ddbproxy.Throttle) // the heartbeat's renewal fails: the gate trips
	testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "the health gate trips")
	close(outage)
	parked := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })[0]
	require.True(t, parked.Final, "re-sent on its last receive: the original is deleted")
	held := h.record("k-resent", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, held.Status)
	require.NotEmpty(t, held.LeaseToken, "the lease is still on the record: nothing could give it back")
	<-time.After(time.Until(held.LeaseExpiry.Add(cfg.ClockSkew + time.Second))) // the lease's end, not a wait for async work
	proxy.SetMode(ddbproxy.Pass)

	applied := h.waitEvents(1, 60*time.Second, func(ev worker.Event) bool { return ev.Final && ev.Outcome != worker.OutcomeParked })[0]
	require.Equal(t, worker.OutcomeApplied, applied.Outcome, "%+v", h.allEvents())
	require.NotEqual(t, parked.SQSMessageID, applied.SQSMessageID, "the copy")
	require.Equal(t, 1, applied.Attempt)
	rec := h.record("k-resent", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, held.LeaseToken, rec.LeaseToken, "the copy committed under the lease the original held")
	require.Zero(t, rec.Takeovers, "the copy got the lease back: no takeover (%+v)", h.allEvents())
	require.Zero(t, rec.Attempts)
	require.EqualValues(t, 2, runs.Load(), "interrupted once, applied once")
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered")
	h.requireQueueEmpty()
}

// failedVisibilityBatch answers every ChangeMessageVisibilityBatch entry
// as failed (ReceiptHandleIsInvalid: the message is back in the queue)
// while on, as SQS does for a handle whose visibility already ran out.
type failedVisibilityBatch struct{ on atomic.Bool }

func (f *failedVisibilityBatch) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("regress.failedVisibilityBatch", func(ctx context.Context, in middleware.InitializeInput,
			next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			batch, ok := in.Parameters.(*sqs.ChangeMessageVisibilityBatchInput)
			if !ok || !f.on.Load() {
				return next.HandleInitialize(ctx, in)
			}
			out := &sqs.ChangeMessageVisibilityBatchOutput{}
			for _, e := range batch.Entries {
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			}
			return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, nil
		}), middleware.Before)
	})
}

// By trace (issue 21): a parked message the worker lets go while the
// database is unhealthy (its visibility could not be renewed) went with
// the lease it held, which nothing could give back: its next delivery
// took the lease over once it expired, counting a takeover for the
// outage. The worker keeps such leases and gives them back when the
// database recovers, before receiving resumes: the next delivery takes
// the work over at once and counts nothing.
func TestParkedLetGoLeaseGivenBackOnRecovery(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 5, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-letgo", "c1", "intake", effective)))

	reg, started, outage, runs := interruptedOnce(t, h.env.Table)
	metrics := metricstest.New()
	cfg := h.testConfig()
	cfg.CallTimeout = 1500 * time.Millisecond
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 3 * time.Second}
	invalid := &failedVisibilityBatch{}
	run := h.start(cfg, worker.Deps{DynamoDB: ddb, SQS: sqs.NewFromConfig(h.env.AWS, h.inj.SQS, invalid.install), Handlers: reg, Metrics: metrics})

	<-started
	proxy.SetMode(ddbproxy.Throttle) // the heartbeat's renewal fails: the gate trips
	testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "the health gate trips")
	close(outage)
	parked := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })[0]
	require.False(t, parked.Final)
	testenv.Eventually(t, 10*time.Second, func() bool { return metrics.Value("ddbworker_parked_messages") == 1 }, "parked in the worker")
	invalid.on.Store(true)
	testenv.Eventually(t, 30*time.Second, func() bool { return metrics.Value("ddbworker_parked_messages") == 0 }, "the parked message is let go")
	invalid.on.Store(false)
	held := h.record("k-letgo", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, held.Status)
	require.NotEmpty(t, held.LeaseToken, "the lease is still on the record: nothing could give it back")
	<-time.After(time.Until(held.LeaseExpiry.Add(cfg.ClockSkew + time.Second))) // the lease's end, not a wait for async work
	proxy.SetMode(ddbproxy.Pass)

	applied := h.waitEvents(1, 60*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, applied.Outcome, "%+v", h.allEvents())
	require.Equal(t, 1, applied.Attempt)
	rec := h.record("k-letgo", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Takeovers, "the lease was given back at the recovery: no takeover (%+v)", h.allEvents())
	require.Zero(t, rec.Attempts)
	require.EqualValues(t, 2, runs.Load(), "interrupted once, applied once")
	h.requireQueueEmpty()
}
