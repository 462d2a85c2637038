package worker_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

var effective = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// (a) A fresh message: applied once, inbox COMPLETED with its outcome, the
// message deleted, two DynamoDB calls (one fused).
func TestFreshMessage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []ddbworker.RouteOption
		calls map[string]int
	}{
		{"gated", nil, map[string]int{"DynamoDB.PutItem": 1, "DynamoDB.TransactWriteItems": 1}},
		{"fused", []ddbworker.RouteOption{ddbworker.Fused()}, map[string]int{"DynamoDB.TransactWriteItems": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.inj.ResetCalls()
			h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(tc.opts...)})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-fresh", "c1", "review", effective))
			h.send(env)

			ev := h.waitEvents(1, 20*time.Second, final)[0]
			require.Equal(t, worker.OutcomeApplied, ev.Outcome)
			require.Equal(t, 1, ev.Attempt)

			rec := h.record("k-fresh", caseflow.TypeDeadline)
			require.Equal(t, inbox.StatusCompleted, rec.Status)
			require.Equal(t, inbox.OutcomeApplied, rec.Outcome)
			require.Equal(t, env.RequestHash, rec.RequestHash)
			require.Zero(t, rec.Attempts, "attempts count failures: none")
			require.Empty(t, rec.GSI2PK, "a completed record leaves the attention index")
			require.Equal(t, inbox.AggregatePK(caseflow.AggregateType, "c1"), rec.GSI1PK)

			c := h.item(caseflow.CaseKey("c1"))
			require.EqualValues(t, 1, num(t, c, caseflow.AttrDeadlineVersion))
			require.Equal(t, "2026-12-05T09:00:00Z", str(c, caseflow.AttrDeadlineAt), "effectiveAt + 120h review SLA")
			require.NotEmpty(t, h.item(caseflow.DeadlineKey("c1", "review")))
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-fresh"))

			calls := h.inj.Calls()
			for op, n := range tc.calls {
				require.Equal(t, n, calls[op], "%s calls for one fresh message", op)
			}
			require.Equal(t, len(tc.calls), countPrefix(calls, "DynamoDB."), "no other DynamoDB operation: %v", calls)
			h.requireQueueEmpty()
		})
	}
}

func countPrefix(calls map[string]int, prefix string) int {
	n := 0
	for k := range calls {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// (b) The same work delivered twice in sequence: applied once; the second
// delivery is a no-op that costs exactly one DynamoDB call and no read, and
// still deletes its message.
func TestSequentialDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []ddbworker.RouteOption
		dupOps map[string]int
	}{
		{"gated", nil, map[string]int{"DynamoDB.PutItem": 1}},
		{"fused", []ddbworker.RouteOption{ddbworker.Fused()}, map[string]int{"DynamoDB.TransactWriteItems": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(tc.opts...)})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-dup", "c1", "intake", effective))
			h.send(env)
			require.Equal(t, worker.OutcomeApplied, h.waitEvents(1, 20*time.Second, final)[0].Outcome)
			before := h.record("k-dup", caseflow.TypeDeadline)

			h.inj.ResetCalls()
			h.send(caseflow.Resend(env)) // new messageId, occurredAt, correlationId
			evs := h.waitEvents(2, 20*time.Second, final)
			require.Equal(t, worker.OutcomeDuplicate, evs[1].Outcome)

			calls := h.inj.Calls()
			require.Equal(t, tc.dupOps, pick(calls, "DynamoDB."), "the duplicate path costs one call and no read")
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-dup"))
			require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
			require.Equal(t, before, h.record("k-dup", caseflow.TypeDeadline), "a duplicate leaves the record untouched")
			h.requireQueueEmpty()
		})
	}
}

func pick(calls map[string]int, prefix string) map[string]int {
	out := map[string]int{}
	for k, v := range calls {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			out[k] = v
		}
	}
	return out
}

// (c) Concurrent duplicates: two workers race on one key. The handler of
// whoever wins is held until the other has seen the record in flight, so
// the race really happens. Applied once; the loser backs off and then sees
// COMPLETED.
func TestConcurrentDuplicates(t *testing.T) {
	for _, fused := range []bool{false, true} {
		name := map[bool]string{false: "gated", true: "fused"}[fused]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			var opts []ddbworker.RouteOption
			if fused {
				opts = append(opts, ddbworker.Fused())
			}
			inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
			var entered atomic.Int32
			bothIn := make(chan struct{})
			var once sync.Once
			release := make(chan struct{})
			reg := ddbworker.NewRegistry()
			require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
				if fused {
					// Both run the handler; hold both until both are in, so
					// both fused commits race.
					if entered.Add(1) == 2 {
						once.Do(func() { close(bothIn) })
					}
					select {
					case <-bothIn:
					case <-time.After(10 * time.Second):
					}
				} else if entered.Add(1) == 1 {
					// The winner waits until the loser has seen PROCESSING.
					select {
					case <-release:
					case <-time.After(10 * time.Second):
					}
				}
				return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
			}), opts...))

			var sawInFlight sync.Once
			onEvent := func(ev worker.Event) {
				if ev.Outcome == worker.OutcomeInFlight {
					sawInFlight.Do(func() { close(release) })
				}
			}
			cfg := h.testConfig()
			cfg.Concurrency = 1
			h.start(cfg, worker.Deps{Handlers: reg, OnEvent: onEvent})
			h.start(cfg, worker.Deps{Handlers: reg, OnEvent: onEvent})

			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-race", "c1", "intake", effective))
			h.send(env, caseflow.Resend(env))
			evs := h.waitEvents(2, 30*time.Second, final)
			outcomes := []string{evs[0].Outcome, evs[1].Outcome}
			require.ElementsMatch(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate}, outcomes)
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-race"))
			require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
			if !fused {
				require.NotEmpty(t, h.waitEvents(1, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeInFlight }))
			}
			h.requireQueueEmpty()
		})
	}
}

// crashAt returns a failpoint that "crashes" the delivery that first reaches
// point: the goroutine ends there (runtime.Goexit), so nothing after that
// line runs — no commit, no delete — exactly as if the process died. When
// resume is non-nil, the delivery instead freezes until resume closes and
// then carries on (a paused process that wakes up).
func crashAt(point string, resume <-chan struct{}) (func(string), <-chan struct{}) {
	var once sync.Once
	hit := make(chan struct{})
	return func(name string) {
		if name != point {
			return
		}
		first := false
		once.Do(func() { first = true; close(hit) })
		if !first {
			return
		}
		if resume == nil {
			runtime.Goexit()
		}
		<-resume
	}, hit
}

// (d) Crash after the commit, before the delete: the redelivery is a
// duplicate; applied once.
func TestCrashAfterCommitBeforeDelete(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	fp, hit := crashAt(hooks.AfterCommit, nil)
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()}, hooks.Hooks{Failpoint: fp})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-crash-commit", "c1", "intake", effective)))
	<-hit
	require.Equal(t, inbox.StatusCompleted, h.record("k-crash-commit", caseflow.TypeDeadline).Status)

	// The message was not deleted: it comes back after its visibility.
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeDuplicate, ev.Outcome)
	require.Len(t, h.allEvents(), 1, "the crashed delivery reported nothing")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-crash-commit"))
	h.requireQueueEmpty()
}

// (e) Crash after the gate, before the commit: after the lease expires the
// redelivery takes over with a new token and applies once; the first
// worker, when it resumes, cannot commit (fencing).
func TestCrashAfterGateTakeoverAndFencing(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	resume := make(chan struct{})
	fp, hit := crashAt(hooks.AfterGate, resume)
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()}, hooks.Hooks{Failpoint: fp})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-crash-gate", "c1", "intake", effective)))
	<-hit
	first := h.record("k-crash-gate", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, first.Status)

	// The frozen delivery's lease expires; the redelivery takes over.
	applied := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })[0]
	require.Equal(t, 1, applied.Attempt, "a crash is no business attempt")
	taken := h.record("k-crash-gate", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, taken.Status)
	require.NotEqual(t, first.LeaseToken, taken.LeaseToken, "a takeover mints a new fencing token")
	require.Zero(t, taken.Attempts)
	require.Equal(t, 1, taken.Takeovers, "the abandoned lease is counted apart, bounded by MaxTakeovers")

	// The first worker wakes up and tries to commit with its old token.
	close(resume)
	evs := h.waitEvents(2, 20*time.Second, final)
	require.Equal(t, worker.OutcomeDuplicate, evs[1].Outcome, "the fenced-out commit must not apply")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-crash-gate"))
	require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
	require.Equal(t, taken, h.record("k-crash-gate", caseflow.TypeDeadline))
	h.requireQueueEmpty()
}

// (f) Same key, different payload: terminal IDEMPOTENCY_HASH_MISMATCH, the
// existing record untouched, the message in the DLQ with its reason, and a
// rejection record in the inbox.
func TestHashMismatch(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-hash", "c1", "intake", effective)))
	h.waitEvents(1, 20*time.Second, final)
	before := h.record("k-hash", caseflow.TypeDeadline)
	caseBefore := h.item(caseflow.CaseKey("c1"))

	other := mustEnv(t)(caseflow.NewDeadlineRequest("k-hash", "c1", "appeal", effective)) // same key, other work
	h.send(other)
	ev := h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, failure.CodeHashMismatch, ev.Code)
	require.Equal(t, worker.PolicyDLQ, ev.Policy)

	require.Equal(t, before, h.record("k-hash", caseflow.TypeDeadline), "the existing record is not touched")
	require.Equal(t, caseBefore, h.item(caseflow.CaseKey("c1")), "no domain write")
	rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
	require.NoError(t, err)
	require.True(t, rej.Rejection)
	require.Equal(t, failure.CodeHashMismatch, rej.FailureCode)
	require.Equal(t, other.RequestHash, rej.RequestHash)
	require.Equal(t, inbox.AggregatePK(other.AggregateType, other.AggregateID), rej.GSI1PK, "the rejection is in the aggregate's history")
	require.Equal(t, other.CorrelationID, rej.CorrelationID)

	copies := h.dlq(1)
	require.Equal(t, failure.CodeHashMismatch, aws.ToString(copies[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
	require.Equal(t, ev.SQSMessageID, aws.ToString(copies[0].MessageAttributes[dlq.AttrSourceMessageID].StringValue))
	body, err := envelope.Encode(other)
	require.NoError(t, err)
	require.JSONEq(t, string(body), aws.ToString(copies[0].Body), "the DLQ copy carries the original body")
	h.requireQueueEmpty()
}

// (g) Versions 5 then 4 of one aggregate: state stays at 5, the late 4 is
// SUPERSEDED and applies nothing.
func TestOutOfOrderVersions(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewStageChange("k-v5", "c1", "decision", 5)))
	require.Equal(t, worker.OutcomeApplied, h.waitEvents(1, 20*time.Second, final)[0].Outcome)
	h.send(mustEnv(t)(caseflow.NewStageChange("k-v4", "c1", "review", 4)))
	ev := h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeSuperseded, ev.Outcome)

	c := h.item(caseflow.CaseKey("c1"))
	require.EqualValues(t, 5, num(t, c, caseflow.AttrStageVersion))
	require.Equal(t, "decision", str(c, caseflow.AttrStage))
	rec := h.record("k-v4", caseflow.TypeStageChanged)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, inbox.OutcomeSuperseded, rec.Outcome)
	require.EqualValues(t, 0, h.applications("c1", caseflow.TypeStageChanged, "k-v4"))
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeStageChanged, "k-v5"))
	h.requireQueueEmpty()
}

// flaky wraps the deadline handler: it fails retryably `fails` times for
// keys accepted by which, then delegates.
func flaky(h *harness, fails int, which func(key string) bool, opts ...ddbworker.RouteOption) *ddbworker.Registry {
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	var mu sync.Mutex
	seen := map[string]int{}
	reg := ddbworker.NewRegistry()
	require.NoError(h.t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		key := m.Envelope.IdempotencyKey
		if which(key) {
			mu.Lock()
			seen[key]++
			n := seen[key]
			mu.Unlock()
			if fails < 0 || n <= fails {
				return ddbworker.Result{}, failure.NewRetryable("DOWNSTREAM_DOWN", "the pricing service is unavailable")
			}
		}
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	}), opts...))
	return reg
}

// (h) A handler failing retryably twice then succeeding: backoff by
// visibility grows, attempts are counted in the inbox; one that always
// fails ends as MAX_ATTEMPTS_EXCEEDED, in the DLQ.
func TestRetryBackoffAndAttempts(t *testing.T) {
	t.Run("succeeds on the third attempt", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, 2, func(string) bool { return true })})
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-flaky", "c1", "intake", effective)))
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 3, ev.Attempt)

		retries := h.waitEvents(2, time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
		require.Len(t, retries, 2)
		for i, r := range retries {
			require.Equal(t, i+1, r.Attempt)
			require.Equal(t, "DOWNSTREAM_DOWN", r.Code)
		}
		require.Greater(t, retries[1].Visibility, retries[0].Visibility, "backoff grows: %s then %s", retries[0].Visibility, retries[1].Visibility)
		require.GreaterOrEqual(t, retries[0].Visibility, time.Second)

		rec := h.record("k-flaky", caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, 2, rec.Attempts, "business attempts are counted in the inbox, by their recorded failures")
		require.Equal(t, "DOWNSTREAM_DOWN", rec.FailureCode, "the last failure stays on the record for operators")
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-flaky"))
		h.requireQueueEmpty()
	})
	t.Run("always fails: MAX_ATTEMPTS_EXCEEDED", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, -1, func(string) bool { return true })})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-doomed", "c1", "intake", effective))
		env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 3}
		h.send(env)
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
		require.Equal(t, failure.CodeMaxAttempts, ev.Code)
		require.Equal(t, 3, ev.Attempt)
		rec := h.record("k-doomed", caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
		require.Equal(t, failure.CodeMaxAttempts, rec.FailureCode)
		require.Contains(t, rec.FailureMessage, "DOWNSTREAM_DOWN")
		require.Equal(t, 3, rec.Attempts)
		require.NotEmpty(t, rec.GSI2PK, "failed records are in the attention index")
		require.Equal(t, failure.CodeMaxAttempts, aws.ToString(h.dlq(1)[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
		require.EqualValues(t, 0, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
		h.requireQueueEmpty()
	})
	t.Run("terminalAfterCodes", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, -1, func(string) bool { return true })})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-codes", "c1", "intake", effective))
		env.AttemptPolicy = &envelope.AttemptPolicy{TerminalAfterCodes: []string{"DOWNSTREAM_DOWN"}}
		h.send(env)
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
		require.Equal(t, "DOWNSTREAM_DOWN", ev.Code)
		require.Equal(t, 1, ev.Attempt, "no retry for a code listed in terminalAfterCodes")
	})
	t.Run("retryableUntil passed", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(h.testConfig(), worker.Deps{Handlers: flaky(h, -1, func(string) bool { return true })})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-window", "c1", "intake", effective))
		past := time.Now().Add(-time.Minute)
		env.AttemptPolicy = &envelope.AttemptPolicy{RetryableUntil: &past}
		h.send(env)
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, failure.CodeRetryWindowExpired, ev.Code)
		require.Equal(t, inbox.StatusFailedTerminal, h.record("k-window", caseflow.TypeDeadline).Status)
	})
}

// (i) Invalid envelopes: terminal with their code, accounted for in the
// inbox and the DLQ, nothing written to domain items.
func TestInvalidEnvelopes(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	caseBefore := h.item(caseflow.CaseKey("c1"))
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})

	valid := func() map[string]any {
		return map[string]any{"messageId": "m-1", "schemaVersion": 1, "messageType": caseflow.TypeDeadline, "producer": "p",
			"occurredAt": "2026-11-30T09:00:00Z", "idempotencyKey": "k-inv", "aggregateType": "Case", "aggregateId": "c1",
			"payload": map[string]any{"caseId": "c1", "stage": "intake", "effectiveAt": "2026-11-30T09:00:00Z"}}
	}
	missing := valid()
	delete(missing, "idempotencyKey")
	v2 := valid()
	v2["schemaVersion"] = 99
	long := valid()
	long["idempotencyKey"] = string(make([]byte, 600))
	for i := range 600 {
		long["idempotencyKey"] = long["idempotencyKey"].(string)[:i] + "k" + long["idempotencyKey"].(string)[i+1:]
	}
	unknownType := valid()
	unknownType["messageType"] = "NoSuchThing"
	cases := map[string]string{
		"{not json":              string(envelope.CodeInvalidJSON),
		jsonBody(t, missing):     string(envelope.CodeMissingField),
		jsonBody(t, v2):          string(envelope.CodeUnknownSchemaVersion),
		jsonBody(t, long):        string(envelope.CodeKeyTooLong),
		jsonBody(t, unknownType): failure.CodeUnknownMessageType,
	}
	var bodies []string
	for b := range cases {
		bodies = append(bodies, b)
	}
	h.sendRaw(bodies...)
	evs := h.waitEvents(len(cases), 20*time.Second, final)
	gotCodes := map[string]int{}
	for _, ev := range evs {
		require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
		gotCodes[ev.Code]++
		rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
		require.NoError(t, err, "every refused message has a rejection record")
		require.Equal(t, ev.Code, rej.FailureCode)
		require.Equal(t, inbox.StatusFailedTerminal, rej.Status)
	}
	want := map[string]int{}
	for _, c := range cases {
		want[c]++
	}
	require.Equal(t, want, gotCodes)
	dlqCodes := map[string]int{}
	for _, m := range h.dlq(len(cases)) {
		dlqCodes[aws.ToString(m.MessageAttributes[dlq.AttrFailureCode].StringValue)]++
	}
	require.Equal(t, want, dlqCodes)
	require.Equal(t, caseBefore, h.item(caseflow.CaseKey("c1")), "no domain write")
	require.Nil(t, h.record("k-inv", caseflow.TypeDeadline), "an invalid envelope never claims a key")
	h.requireQueueEmpty()
}

// (j) An ambiguous commit: the transaction applies but its response is lost.
// With SDK retries, the retry carries the same ClientRequestToken and is not
// applied twice; without them, the worker finds its own COMPLETED record.
func TestAmbiguousCommit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
	}{{"sdk retry with the same ClientRequestToken", 3}, {"no sdk retry: own commit recognised", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindLostResponse, Times: 1})
			ddb := dynamodbWithAttempts(h, tc.attempts)
			h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), DynamoDB: ddb})
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-ambiguous", "c1", "intake", effective)))
			ev := h.waitEvents(1, 20*time.Second, final)[0]
			require.Equal(t, worker.OutcomeApplied, ev.Outcome)
			require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse], "the fault fired")
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-ambiguous"))
			require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrDeadlineVersion))
			require.Equal(t, inbox.StatusCompleted, h.record("k-ambiguous", caseflow.TypeDeadline).Status)
			h.requireQueueEmpty()
		})
	}
}

// (k) A batch of 10 where one fails: the other 9 are deleted, the one is
// retried alone and then applied.
func TestBatchWithOneFailure(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	ids := make([]string, 10)
	var envs []*envelope.Envelope
	for i := range ids {
		ids[i] = "c" + string(rune('a'+i))
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-batch-"+ids[i], ids[i], "intake", effective)))
	}
	h.seedCases(ids...)
	cfg := h.testConfig()
	cfg.Concurrency = 10
	h.start(cfg, worker.Deps{Handlers: flaky(h, 1, func(k string) bool { return k == "k-batch-cd" })})
	h.send(envs...)

	// Nine applied and deleted while the tenth is hidden for its backoff.
	firstNine := h.waitEvents(9, 20*time.Second, final)
	for _, ev := range firstNine {
		require.NotEqual(t, "k-batch-cd", ev.IdempotencyKey)
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	}
	retry := h.waitEvents(1, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
	require.Equal(t, "k-batch-cd", retry[0].IdempotencyKey)
	testenv.Eventually(t, 5*time.Second, func() bool { return testenv.InspectQueue(t, h.env.Queues.URL).Total() == 1 },
		"only the failed message is left")

	all := h.waitEvents(10, 20*time.Second, final)
	require.Equal(t, "k-batch-cd", all[9].IdempotencyKey)
	require.Equal(t, 2, all[9].Attempt)
	for _, id := range ids {
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-batch-"+id))
	}
	h.requireQueueEmpty()
}
