package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// The testing matrix's "database unhealthy" row, once per kind of trouble,
// on the wire: the worker reaches DynamoDB Local through a proxy that
// answers every request with throttling, with 5xx, or holds it unanswered.
// The queue's redrive policy dead-letters on the third receive, so a worker
// that kept receiving through the outage (as it did before the health
// gate) walks healthy messages to the DLQ within seconds.
//
// Each case asserts: receiving paused (ReceiveMessage calls during the
// window bounded by the pollers' one in-flight long poll), DynamoDB requests
// during the window bounded (the calls in flight when the gate tripped, each
// at most CallAttempts requests, plus one probe per ProbeInterval at most),
// the worker not ready and its gauge at 0, nothing dead-lettered, no business
// attempt counted, and every work item applied exactly once after recovery.
func TestDatabaseUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode ddbproxy.Mode
	}{
		{"throttling", ddbproxy.Throttle},
		{"5xx", ddbproxy.ServerError},
		{"requests hang", ddbproxy.Hang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 3, VisibilityTimeout: 2 * time.Second}})
			proxy, ddb := h.proxied()

			const before, during, arriving = 5, 10, 10
			ids := make([]string, before+during+arriving)
			for i := range ids {
				ids[i] = fmt.Sprintf("c%02d", i)
			}
			h.seedCases(ids...)
			send := func(from, to int) {
				for _, id := range ids[from:to] {
					h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
				}
			}

			metrics := metricstest.New()
			cfg := h.testConfig()
			cfg.CallTimeout = time.Second
			cfg.Health = worker.HealthConfig{ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 10 * time.Second}
			run := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers(), Metrics: metrics})

			send(0, before)
			h.waitEvents(before, 20*time.Second, final)
			require.True(t, run.w.Ready())

			// The outage begins while work keeps arriving.
			proxy.SetMode(tc.mode)
			send(before, before+during)
			testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "the health gate trips")
			require.False(t, run.w.Ready(), "not ready while the database is unhealthy")
			require.Zero(t, metrics.Value("ddbworker_database_healthy"))
			require.Less(t, metrics.Value("ddbworker_concurrency_limit"), float64(cfg.Concurrency), "the adaptive limit shrank")
			tripped := proxy.Stats().Total
			receives := h.inj.Calls()["SQS.ReceiveMessage"]

			send(before+during, len(ids)) // arrive during the outage
			const window = 6 * time.Second
			<-time.After(window) // the outage's length, not a wait for async work
			requests := proxy.Stats().Total - tripped
			received := h.inj.Calls()["SQS.ReceiveMessage"] - receives
			require.False(t, run.w.DatabaseHealthy(), "still paused at the window's end")

			// At most the in-flight calls' remaining attempts plus one probe
			// per ProbeInterval (the probes back off from there).
			bound := cfg.Concurrency*3 + int(window/cfg.Health.ProbeInterval) + 2
			require.LessOrEqual(t, requests, bound, "DynamoDB requests during a %s window: a gentle probe, not a storm", window)
			require.Positive(t, requests, "the worker probes")
			require.LessOrEqual(t, received, 2, "receiving paused (one long poll may have been in flight)")
			t.Logf("%s: %d DynamoDB requests and %d receives in %s while paused", tc.name, requests, received, window)

			proxy.SetMode(ddbproxy.Pass)
			h.waitEvents(len(ids), 90*time.Second, final)
			testenv.Eventually(t, 10*time.Second, run.w.DatabaseHealthy, "healthy again")
			require.Equal(t, 1.0, metrics.Value("ddbworker_database_healthy"))
			require.Equal(t, 1.0, metrics.Value("ddbworker_database_health_transitions_total", "unhealthy"), "one transition each way")
			require.Equal(t, 1.0, metrics.Value("ddbworker_database_health_transitions_total", "healthy"))

			for _, ev := range h.allEvents() {
				if ev.Final {
					require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", ev)
					require.Equal(t, 1, ev.Attempt, "no business attempt burned by the outage: %+v", ev)
				}
			}
			for _, id := range ids {
				rec := h.record("k-"+id, caseflow.TypeDeadline)
				require.Equal(t, inbox.StatusCompleted, rec.Status)
				require.Zero(t, rec.Attempts, "%s: infrastructure failures are not attempts", id)
				require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id), "%s applied exactly once", id)
			}
			require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered")
			h.requireQueueEmpty()
		})
	}
}

// Infrastructure trouble after the lease was taken — a commit throttled,
// cancelled by conflicts, timed out — gives the lease back and charges no
// attempt: work whose message allows one business attempt still applies.
// Before, each such commit failure was recorded as a business attempt, so
// this ended MAX_ATTEMPTS_EXCEEDED.
func TestInfrastructureIsNotAnAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind faults.Kind
		// attempts is how many SDK attempts one failing commit makes: the
		// SDK retries throttling and timeouts within the call, not a
		// cancelled transaction or this 500.
		attempts int
	}{
		{"commit throttled", faults.KindThrottle, 3},
		{"commit conflicts", faults.KindConflict, 1},
		{"commit times out", faults.KindTimeout, 3},
		{"commit 5xx", faults.KindServerError, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			// Two deliveries' commits fail.
			h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: tc.kind, Times: 2 * tc.attempts})
			cfg := h.testConfig()
			// Room for all three SDK attempts of a call within its timeout.
			cfg.VisibilityTimeout, cfg.CallTimeout = 10*time.Second, 5*time.Second
			h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-infra", "c1", "intake", effective))
			env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
			h.send(env)

			ev := h.waitEvents(1, 40*time.Second, final)[0]
			require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", h.allEvents())
			require.Equal(t, 1, ev.Attempt)
			retries := h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
			require.Len(t, retries, 2, "two deliveries ended by infrastructure trouble")
			for _, r := range retries {
				require.True(t, r.Infrastructure, "%+v", r)
				require.Zero(t, r.Attempt, "no business attempt: %+v", r)
			}
			rec := h.record("k-infra", caseflow.TypeDeadline)
			require.Equal(t, inbox.StatusCompleted, rec.Status)
			require.Zero(t, rec.Attempts, "no failure was recorded, so no attempt counted")
			require.Zero(t, rec.Takeovers, "each troubled lease was given back, none abandoned")
			require.Equal(t, 3, rec.Deliveries)
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-infra"))
		})
	}
}

// A lease that cannot even be given back when infrastructure trouble ends
// the attempt (the database throttles the Release too) costs nothing: no
// attempt was charged, so there is nothing to refund and no second write is
// needed; the message stays hidden until the lease ends and the next
// delivery takes it over, still at attempt 1.
func TestUnreleasedLeaseCostsNoAttempt(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindThrottle, Times: 3})
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindThrottle, Times: 3}) // the Release
	cfg := h.testConfig()
	cfg.VisibilityTimeout, cfg.CallTimeout = 10*time.Second, 5*time.Second
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers()})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-refund", "c1", "intake", effective))
	env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
	h.send(env)
	ev := h.waitEvents(1, 60*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", h.allEvents())
	require.Equal(t, 1, ev.Attempt)
	rec := h.record("k-refund", caseflow.TypeDeadline)
	require.Zero(t, rec.Attempts)
	require.Equal(t, 1, rec.Takeovers, "the lease ran out: one takeover, bounded apart from attempts")
	require.Equal(t, 2, rec.Deliveries)
}

// A deploy never moves work closer to terminal: when the drain timeout
// cancels a handler, the lease is given back (nothing was charged) and the
// message made visible at once; the next worker applies it as attempt 1.
func TestShutdownIsNotAnAttempt(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	started := make(chan struct{})
	blocking := ddbworker.NewRegistry()
	require.NoError(t, blocking.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		close(started)
		<-ctx.Done() // runs until shutdown cancels it
		return ddbworker.Result{}, ctx.Err()
	})))
	cfg := h.testConfig()
	cfg.DrainTimeout = 300 * time.Millisecond
	run := h.start(cfg, worker.Deps{Handlers: blocking})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-deploy", "c1", "intake", effective))
	env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
	h.send(env)
	<-started
	run.Stop()

	ev := h.waitEvents(1, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })[0]
	require.Equal(t, "SHUTDOWN", ev.Code)
	require.True(t, ev.Infrastructure)
	require.Zero(t, ev.Visibility, "visible at once for the next worker")
	rec := h.record("k-deploy", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, rec.Status, "released, not failed")
	require.Zero(t, rec.Attempts, "a shutdown is no business attempt")
	require.True(t, rec.Released(), "no lease: the next delivery takes over at once")
	require.Empty(t, rec.LeaseToken)
	require.Equal(t, "SHUTDOWN", rec.FailureCode)

	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	applied := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, applied.Outcome)
	require.Equal(t, 1, applied.Attempt)
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-deploy"))
}

// The write budget paces DynamoDB writes: at MaxWCU units per second, 20
// fresh messages (each at least 2 units for the gate's PutItem and its
// index entry and 4 for a two-item commit) cannot finish faster than their
// units allow beyond the budget's one-second burst.
func TestWriteBudgetPaces(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	const n, maxWCU, perMessage = 20, 40.0, 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%02d", i)
	}
	h.seedCases(ids...)
	metrics := metricstest.New()
	cfg := h.testConfig()
	cfg.MaxWCU = maxWCU
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers(), Metrics: metrics})
	start := time.Now()
	for _, id := range ids {
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
	}
	h.waitEvents(n, 60*time.Second, final)
	least := time.Duration(float64(n*perMessage-maxWCU) / maxWCU * float64(time.Second))
	require.GreaterOrEqual(t, time.Since(start), least, "paced to %v WCU/s", maxWCU)
	require.Positive(t, metrics.Value("ddbworker_write_budget_wait_seconds_total"), "writes waited for the budget")
}

// Calls that hang are few — each waits for CallTimeout, and the adaptive
// limit shrinks to one slot — too few to fill the detector's window: three
// failures in a row trip the gate anyway. Before, a worker at one slot
// never paused in a hang, kept receiving, and walked healthy messages to
// the DLQ a receive at a time (found by the chaos run's outage phases).
func TestHangingCallsTripTheGateAtOneSlot(t *testing.T) {
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 3, VisibilityTimeout: 8 * time.Second}})
	proxy, ddb := h.proxied()
	ids := []string{"c0", "c1", "c2", "c3"}
	h.seedCases(ids...)
	cfg := h.testConfig()
	// A 3 s call timeout: at most 3 failures fit the 10 s window, never 5.
	cfg.Concurrency, cfg.VisibilityTimeout, cfg.CallTimeout = 1, 8*time.Second, 3*time.Second
	cfg.Health = worker.HealthConfig{ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second, ParkVisibility: 10 * time.Second}
	run := h.start(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers()})

	proxy.SetMode(ddbproxy.Hang)
	for _, id := range ids {
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return !run.w.DatabaseHealthy() }, "three timeouts in a row trip the gate")
	proxy.SetMode(ddbproxy.Pass)
	h.waitEvents(len(ids), 60*time.Second, final)
	for _, id := range ids {
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id))
		require.Zero(t, h.record("k-"+id, caseflow.TypeDeadline).Attempts, "hanging calls are no business attempts")
	}
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered")
}

// A FAILED_TERMINAL work item reopened by an operator after fixing its data
// runs again on its next delivery (a redrive), with a fresh attempts budget.
func TestReopenedWorkRunsAgain(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-reopen", "c-late", "intake", effective))
	h.send(env)
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, "CASE_NOT_FOUND", ev.Code)

	h.seedCases("c-late") // the data is fixed
	store := inbox.Store{Table: h.env.Table}
	rec := h.record("k-reopen", caseflow.TypeDeadline)
	in, err := store.Reopen(rec, time.Now(), "ops", "case created").UpdateItem(store.Table, store.Key(rec.Key, rec.MessageType))
	require.NoError(t, err)
	_, err = h.env.DynamoDB.UpdateItem(context.Background(), in)
	require.NoError(t, err)

	h.send(env) // the redrive
	applied := h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeApplied, applied.Outcome)
	require.Equal(t, 1, applied.Attempt, "a fresh budget")
	got := h.record("k-reopen", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, got.Status)
	require.Equal(t, "case created", got.ReopenReason)
	require.EqualValues(t, 1, h.applications("c-late", caseflow.TypeDeadline, "k-reopen"))
}
