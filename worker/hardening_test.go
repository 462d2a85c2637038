package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// A handler that overruns MessageTimeout: the failure is recorded at once
// (FAILED_RETRYABLE MESSAGE_TIMEOUT, lease released) on a context the
// expired deadline does not end, so the record does not sit in PROCESSING
// until its lease runs out; the retry then applies.
func TestHandlerOverrunsMessageTimeout(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	var runs atomic.Int32
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if runs.Add(1) == 1 {
			<-ctx.Done() // the first run hangs until the per-message deadline
			return ddbworker.Result{}, ctx.Err()
		}
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))
	var atRetry *inbox.Record
	var mu sync.Mutex
	cfg := h.testConfig()
	cfg.MessageTimeout = 1200 * time.Millisecond // the second run's claim and commit must fit, on a loaded machine too
	h.start(cfg, worker.Deps{Handlers: reg, OnEvent: func(ev worker.Event) {
		if ev.Outcome == worker.OutcomeRetry {
			rec := h.record("k-overrun", caseflow.TypeDeadline)
			mu.Lock()
			atRetry = rec
			mu.Unlock()
		}
	}})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-overrun", "c1", "intake", effective)))

	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 2, ev.Attempt)
	retry := h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, failure.CodeMessageTimeout, retry.Code)

	mu.Lock()
	defer mu.Unlock()
	require.NotNil(t, atRetry)
	require.Equal(t, inbox.StatusFailedRetryable, atRetry.Status, "the overrun must be recorded, not left PROCESSING")
	require.Equal(t, failure.CodeMessageTimeout, atRetry.FailureCode)
	require.Zero(t, atRetry.LeaseExpiresAt, "the lease is released")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-overrun"))
}

// A commit the per-message deadline ends, after a handler that returned at
// once, is the database's slowness, not the handler's: a retry coded
// TIMEOUT (infrastructure), no business attempt counted, and the retry
// applies as attempt 1. Old behaviour: MESSAGE_TIMEOUT, an attempt charged
// (the explorer's seed 28: a Lambda invocation's deadline passed in the
// commit on a loaded machine), so a slow database used up healthy work's
// attempts.
func TestCommitOverrunIsInfrastructure(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.JSON(inner.Deadline)))
	cfg := h.testConfig()
	cfg.MessageTimeout = 1200 * time.Millisecond
	// The first commit waits past the deadline, and is never sent.
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindDelay, Delay: 5 * time.Second, Times: 1})
	var atRetry *inbox.Record
	var mu sync.Mutex
	h.start(cfg, worker.Deps{Handlers: reg, OnEvent: func(ev worker.Event) {
		if ev.Outcome == worker.OutcomeRetry {
			rec := h.record("k-slowcommit", caseflow.TypeDeadline)
			mu.Lock()
			atRetry = rec
			mu.Unlock()
		}
	}})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-slowcommit", "c1", "intake", effective)))

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 1, ev.Attempt, "no business attempt was charged for the database's slowness")
	retry := h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, failure.CodeTimeout, retry.Code)
	mu.Lock()
	defer mu.Unlock()
	if atRetry != nil {
		require.Zero(t, atRetry.Attempts, "no attempt recorded")
		require.NotEqual(t, failure.CodeMessageTimeout, atRetry.FailureCode)
	}
	rec := h.record("k-slowcommit", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts)
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-slowcommit"))
}

// A handler's effect whose own DynamoDB read hangs past the work's deadline
// (an outage that hangs calls) is the database's slowness, not the
// handler's: TIMEOUT, no business attempt, applied once on the next
// delivery. The explorer's seed 8 (outages "hang for 13s" and "hang for
// 6s" under gated XEff work) charged it as MESSAGE_TIMEOUT: attempts 1 on
// work that never fails by business.
func TestEffectCallOverrunIsInfrastructure(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	slow := faults.New(2)
	// The effect log's first read waits past the deadline, and is never sent.
	slow.Add(faults.Rule{Service: "DynamoDB", Operation: "GetItem", Kind: faults.KindDelay, Delay: 5 * time.Second, Times: 1})
	log, err := effects.New(dynamodb.NewFromConfig(h.env.AWS, slow.DynamoDB), effects.Config{Inbox: inbox.Store{Table: h.env.Table}})
	require.NoError(t, err)
	var calls atomic.Int32
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		eff, err := log.Do(ctx, m, effects.Call{Name: "notify", Provider: "mail", Operation: "send", Request: map[string]string{"case": "c1"}, Idempotent: true},
			func(ctx context.Context, key string) (effects.Outcome, error) {
				calls.Add(1)
				return effects.Outcome{Ref: key}, nil
			})
		if err != nil {
			return ddbworker.Result{}, err
		}
		return ddbworker.Apply(eff.Write()), nil
	})))
	cfg := h.testConfig()
	cfg.MessageTimeout = 1200 * time.Millisecond
	h.start(cfg, worker.Deps{Handlers: reg})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-slowread", "c1", "intake", effective)))

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", h.allEvents())
	require.Equal(t, 1, ev.Attempt, "no business attempt was charged for the database's slowness: %+v", h.allEvents())
	retry := h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, failure.CodeTimeout, retry.Code)
	rec := h.record("k-slowread", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts)
	require.EqualValues(t, 1, calls.Load(), "the provider was called once")
	require.EqualValues(t, 1, slow.Fired()[faults.KindDelay])
}

// Receive errors that waiting cannot heal stop the worker: Run returns a
// *worker.ReceiveError and the worker is not ready. Transient ones make it
// unready after three in a row and ready again when receiving works.
func TestPermanentReceiveErrors(t *testing.T) {
	cases := []struct {
		name   string
		inject error // nil: a real error from the emulator
		code   string
		queue  func(h *harness) string
	}{
		{name: "queue does not exist", queue: func(h *harness) string { return h.env.Queues.URL + "-missing" }},
		{name: "access denied", code: "AccessDenied",
			inject: &smithy.GenericAPIError{Code: "AccessDenied", Message: "injected: not authorized to perform sqs:ReceiveMessage"},
			queue:  func(h *harness) string { return h.env.Queues.URL }},
		{name: "KMS key disabled", code: "KmsDisabled",
			inject: &smithy.GenericAPIError{Code: "KmsDisabled", Message: "injected: the KMS key is disabled"},
			queue:  func(h *harness) string { return h.env.Queues.URL }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			if tc.inject != nil {
				h.inj.Add(faults.Rule{Service: "SQS", Operation: "ReceiveMessage", Rate: 1, Err: tc.inject})
			}
			cfg := h.testConfig()
			cfg.QueueURL = tc.queue(h)
			w, err := worker.New(worker.Deps{DynamoDB: h.ddb, SQS: h.sqs, Handlers: h.caseHandlers()}, cfg)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background()) }()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run kept retrying a permanent receive error")
			}
			require.ErrorIs(t, err, worker.ErrQueueUnusable)
			var re *worker.ReceiveError
			require.ErrorAs(t, err, &re)
			require.Equal(t, cfg.QueueURL, re.QueueURL)
			if tc.code != "" {
				require.Equal(t, tc.code, re.Code)
			} else {
				require.NotEmpty(t, re.Code)
			}
			require.False(t, w.Ready())
		})
	}

	t.Run("transient errors only make it unready", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		release := make(chan struct{})
		h.inj.Add(faults.Rule{Service: "SQS", Operation: "ReceiveMessage", Rate: 1, Err: &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "injected"},
			Match: func(any) bool {
				select {
				case <-release:
					return false
				default:
					return true
				}
			}})
		cfg := h.testConfig()
		cfg.Backoff = worker.Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.1}
		w, err := worker.New(worker.Deps{DynamoDB: h.ddb, SQS: h.sqs, Handlers: h.caseHandlers(), OnEvent: h.note}, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		testenv.Eventually(t, 20*time.Second, func() bool {
			return h.inj.Calls()["SQS.ReceiveMessage"] >= 3 && !w.Ready()
		}, "three failed receives in a row make the worker unready")
		close(release)
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-transient", "c1", "intake", effective)))
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.True(t, w.Ready())
		cancel()
		require.NoError(t, <-done)
		require.False(t, w.Ready(), "a stopped worker is not ready")
	})
}

// The heartbeat keeps a long handler's lease: a handler running 1.5 leases
// finishes on its first attempt, with lease extensions. The same work,
// re-sent while it runs, reaches a second worker, which must find the lease
// renewed (in flight) and never take it over; it ends as a duplicate.
func TestHeartbeatKeepsLongHandler(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	cfg := h.testConfig()
	// A 4 s lease renewed every 2 s: a renewal delayed by a loaded machine
	// still lands in time.
	lease, skew := 4*time.Second, 500*time.Millisecond
	cfg.VisibilityTimeout, cfg.ClockSkew = lease, skew
	work := lease * 3 / 2
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	var runs atomic.Int32
	started := make(chan time.Time, 1)
	slow := func() *ddbworker.Registry {
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
			if runs.Add(1) == 1 {
				started <- time.Now()
			}
			select {
			case <-time.After(work): // the handler's own slow work
			case <-ctx.Done():
				return ddbworker.Result{}, ctx.Err()
			}
			return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
		})))
		return reg
	}
	m1 := metricstest.New()
	m2 := metricstest.New()
	h.start(cfg, worker.Deps{Handlers: slow(), Metrics: m1})
	h.start(cfg, worker.Deps{Handlers: slow(), Metrics: m2})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-long", "c1", "intake", effective))
	h.send(env)
	var start time.Time
	select {
	case start = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never started")
	}
	// The same work as a new message, sent once the first lease would have
	// expired had nobody renewed it, while the handler still runs: the
	// second worker must find it in flight, not take it over.
	<-time.After(time.Until(start.Add(lease + skew + 200*time.Millisecond)))
	h.send(caseflow.Resend(env))

	evs := h.waitEvents(2, 30*time.Second, final)
	outcomes := []string{evs[0].Outcome, evs[1].Outcome}
	require.ElementsMatch(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate}, outcomes)
	for _, ev := range evs {
		if ev.Outcome == worker.OutcomeApplied {
			require.Equal(t, 1, ev.Attempt)
		}
	}
	rec := h.record("k-long", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Takeovers, "no takeover")
	require.Zero(t, rec.Attempts)
	require.Equal(t, 1, rec.Deliveries)
	require.EqualValues(t, 1, runs.Load(), "the handler ran once")
	require.Positive(t, m1.Value("ddbworker_visibility_extensions_total")+m2.Value("ddbworker_visibility_extensions_total"), "the lease was extended")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-long"))
	require.NotEmpty(t, h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeInFlight }),
		"the re-sent work was seen in flight")
	require.Empty(t, h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeLeaseLost }))
}
