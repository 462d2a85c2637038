package effects_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/payments"
	"github.com/ddbworker/ddbworker/internal/testenv"
	ddbwrites "github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	msgType = "OrderPaymentRequested"
	hashA   = "3f1c0a9b7e2d4c5a8b6f0e1d2c3b4a5968778695a4b3c2d1e0f1a2b3c4d5e6f7"
)

// fixture is one test's table, inbox gate and committer (the worker's
// protocol pieces, driven by hand so a test holds exactly the lease it
// wants), the effect log on a fake clock, and the provider double.
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	store  inbox.Store
	clock  *testenv.Clock
	gate   *gate.Gate
	commit *mutation.Committer
	log    *effects.Log
	admin  *effects.Admin
	inj    *faults.Injector
	prov   *payments.Provider
	reg    *metricstest.Provider
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	store, err := inbox.Store{Table: env.Table}.WithDefaults()
	require.NoError(t, err)
	clock := testenv.NewClock()
	inj := faults.New(1)
	ddb := dynamodb.NewFromConfig(env.AWS, inj.DynamoDB)
	g, err := gate.New(ddb, gate.Config{Store: store, Now: clock.Now})
	require.NoError(t, err)
	c, err := mutation.New(ddb, mutation.Config{Store: store, Now: clock.Now})
	require.NoError(t, err)
	reg := metricstest.New()
	l, err := effects.New(ddb, effects.Config{Inbox: store, Now: clock.Now, CallTimeout: 3 * time.Second, Metrics: reg})
	require.NoError(t, err)
	a, err := effects.NewAdmin(env.DynamoDB, effects.AdminConfig{Inbox: store, Now: clock.Now})
	require.NoError(t, err)
	prov := payments.New()
	t.Cleanup(prov.Close)
	return &fixture{t: t, env: env, store: store, clock: clock, gate: g, commit: c, log: l, admin: a, inj: inj, prov: prov, reg: reg}
}

// held is one lease on a work item and the message its handler sees.
type held struct {
	lease inbox.Lease
	msg   *ddbworker.Message
}

// acquire takes the work item key's lease (fresh, or by takeover after the
// clock passed the previous lease).
func (f *fixture) acquire(key string) held {
	f.t.Helper()
	dec, err := f.gate.Acquire(context.Background(), &gate.Request{Work: inbox.Work{Key: key, MessageType: msgType, RequestHash: hashA,
		SchemaVersion: 1, AggregateType: "Order", AggregateID: key}})
	require.NoError(f.t, err)
	require.Equal(f.t, gate.Acquired, dec.Action, "acquire %s", key)
	env := &envelope.Envelope{IdempotencyKey: key, MessageType: msgType, AggregateType: "Order", AggregateID: key}
	return held{lease: dec.Lease, msg: &ddbworker.Message{Envelope: env, Attempt: dec.Lease.Attempt, LeaseToken: dec.Lease.Token}}
}

// crash lets the lease run out, as after a crash: the next acquire takes
// it over under a new lease (the same business attempt: a crash is none).
func (f *fixture) crash() { f.clock.Advance(40 * time.Second) }

// commitWith commits writes with h's inbox flip.
func (f *fixture) commitWith(h held, writes ...ddbworker.Write) error {
	ms := make([]mutation.Write, len(writes))
	for i, w := range writes {
		m, err := ddbwrites.Mutation(w)
		if err != nil {
			return err
		}
		ms[i] = m
	}
	return f.commit.Commit(context.Background(), h.lease, ms, mutation.Completion{}, 0)
}

func (f *fixture) charge(path string) effects.CallFunc {
	return payments.Charge(http.DefaultClient, f.prov.URL(), path, 1250)
}

var chargeCall = effects.Call{Name: "charge", Provider: "payments", Operation: "charge",
	Request: map[string]any{"amount": 1250, "currency": "EUR"}, Idempotent: true}

var sendCall = effects.Call{Name: "charge", Provider: "legacy-pay", Operation: "charge",
	Request: map[string]any{"amount": 1250, "currency": "EUR"}, Idempotent: false}

// domainWrite is the handler's own write that records the payment.
func (f *fixture) domainWrite(order, ref string) ddbworker.Write {
	return ddbworker.Put(f.env.Table, ddbworker.Key{"PK": "ORDER#" + order, "SK": "PAYMENT"}, ddbworker.Item{"chargeId": ref})
}

func (f *fixture) payment(order string) string {
	out, err := f.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.env.Table),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "ORDER#" + order},
			"SK": &types.AttributeValueMemberS{Value: "PAYMENT"}}, ConsistentRead: aws.Bool(true)})
	require.NoError(f.t, err)
	if v, ok := out.Item["chargeId"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// crashAt is a context whose failpoint name panics, as a SIGKILL at that
// line would stop the handler (nothing after it runs); run recovers it.
func crashAt(name string) context.Context {
	return hooks.With(context.Background(), hooks.Hooks{Failpoint: func(n string) {
		if n == name {
			panic(crashed{n})
		}
	}})
}

type crashed struct{ at string }

// run calls Do and reports whether it "crashed" at a failpoint.
func run(ctx context.Context, l *effects.Log, msg *ddbworker.Message, c effects.Call, fn effects.CallFunc) (eff *effects.Effect, err error, crash bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			crash = true
		}
	}()
	eff, err = l.Do(ctx, msg, c, fn)
	return eff, err, false
}

// metric sums the samples of the metric name whose labels include want:
// a counter's value, a histogram's number of observations.
func (f *fixture) metric(name string, want map[string]string) float64 {
	return f.reg.Sum(name, want)
}

func requireFailure(t *testing.T, err error, kind failure.Kind, code string, sentinel error) {
	t.Helper()
	require.Error(t, err)
	f, ok := failure.As(err)
	require.True(t, ok, "not a failure: %v", err)
	require.Equal(t, kind, f.Kind, "%v", err)
	require.Equal(t, code, f.Code, "%v", err)
	if sentinel != nil {
		require.ErrorIs(t, err, sentinel)
	}
}

func TestDoCallsOnceAndCommitsWithTheWork(t *testing.T) {
	f := newFixture(t)
	h := f.acquire("order-1")
	eff, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	require.NoError(t, err)
	key := effects.Key(msgType, "order-1", "charge")
	require.Equal(t, key, eff.Key)
	require.Equal(t, effects.StatusCompleted, eff.Status)
	require.Equal(t, "ch_0001", eff.ProviderRef)
	require.Equal(t, "succeeded", eff.Result)
	require.Equal(t, 1, eff.Calls)
	require.False(t, eff.Pending)

	// The reference is durable before the commit.
	got, err := f.admin.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, effects.StatusCompleted, got.Status)
	require.Equal(t, "ch_0001", got.ProviderRef)
	require.Empty(t, got.CommittedAt)
	require.NotZero(t, got.TTL)

	require.NoError(t, f.commitWith(h, eff.Write(), f.domainWrite("order-1", eff.ProviderRef)))
	got, err = f.admin.Get(context.Background(), key)
	require.NoError(t, err)
	require.NotEmpty(t, got.CommittedAt, "the commit stamps the effect")
	require.Equal(t, "ch_0001", f.payment("order-1"))

	// A re-run (a redelivery after the commit would be a duplicate at the
	// gate; a handler re-run within the attempt reads the log) answers
	// from the log.
	again, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	require.NoError(t, err)
	require.Equal(t, "ch_0001", again.ProviderRef)
	calls, performed := f.prov.Count(key)
	require.Equal(t, 1, calls, "no second call for a completed effect")
	require.Equal(t, 1, performed)

	po := map[string]string{"provider": "payments", "operation": "charge"}
	require.Equal(t, 1.0, f.metric("ddbworker_effect_calls_total", map[string]string{"provider": "payments", "result": "completed"}))
	require.Equal(t, 1.0, f.metric("ddbworker_effect_log_answers_total", map[string]string{"status": "COMPLETED"}))
	require.Equal(t, 1.0, f.metric("ddbworker_effect_call_seconds", po))
	require.Zero(t, f.metric("ddbworker_effect_unknown_total", nil))
}

func TestCrashes(t *testing.T) {
	tests := []struct {
		name       string
		at         string
		idempotent bool
		// after the restart
		wantCalls     int // calls the provider received in all
		wantPerformed int
		wantCode      string // "" = completed
	}{
		{"before call, idempotent provider: called once after restart", hooks.EffectBeforeCall, true, 1, 1, ""},
		{"after call, idempotent provider: called again with the same key, charged once", hooks.EffectAfterCall, true, 2, 1, ""},
		{"after completion, before commit: never called again", hooks.EffectBeforeCommit, true, 1, 1, ""},
		{"after completion, before commit, no idempotency keys: never called again", hooks.EffectBeforeCommit, false, 1, 1, ""},
		{"before call, no idempotency keys: unknown (the log cannot tell)", hooks.EffectBeforeCall, false, 0, 0, effects.CodeOutcomeUnknown},
		{"after call, no idempotency keys: unknown, not called again", hooks.EffectAfterCall, false, 1, 1, effects.CodeOutcomeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			call, path := chargeCall, "/charges"
			if !tc.idempotent {
				call, path = sendCall, "/sends"
			}
			h := f.acquire("order-9")
			_, _, crash := run(crashAt(tc.at), f.log, h.msg, call, f.charge(path))
			require.True(t, crash)
			f.crash()
			h2 := f.acquire("order-9")
			require.Equal(t, 1, h2.msg.Attempt, "a crash is no business attempt")
			require.NotEqual(t, h.msg.LeaseToken, h2.msg.LeaseToken, "the work's lease is a new one")
			eff, err := f.log.Do(context.Background(), h2.msg, call, f.charge(path))
			key := effects.Key(msgType, "order-9", "charge")
			calls, performed := f.prov.Count(key)
			require.Equal(t, tc.wantCalls, calls, "provider calls")
			require.Equal(t, tc.wantPerformed, performed, "effects performed")
			for _, k := range f.prov.Keys() {
				require.Equal(t, key, k, "every call carries the effect key")
			}
			if tc.wantCode != "" {
				requireFailure(t, err, failure.Terminal, tc.wantCode, effects.ErrOutcomeUnknown)
				require.Equal(t, effects.StatusUnknown, eff.Status)
				l, err := f.admin.List(context.Background(), effects.Filter{Status: effects.StatusUnknown}, effects.Page{})
				require.NoError(t, err)
				require.Len(t, l.Effects, 1)
				require.Equal(t, key, l.Effects[0].Key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, effects.StatusCompleted, eff.Status)
			require.Equal(t, f.prov.Charges(key)[0], eff.ProviderRef)
			require.NoError(t, f.commitWith(h2, eff.Write(), f.domainWrite("order-9", eff.ProviderRef)))
			require.Equal(t, eff.ProviderRef, f.payment("order-9"))
			// The crashed attempt's lease cannot commit (fenced).
			require.Error(t, f.commitWith(h, eff.Write()))
		})
	}
}

func TestUnknownResolvedByOperator(t *testing.T) {
	tests := []struct {
		name      string
		res       effects.Resolution
		wantCalls int
		wantRef   string
	}{
		{"completed with the provider's reference: never called again", effects.Resolution{Completed: true, Ref: "ch_0001", By: "ops@x", Reason: "found in the provider's dashboard"}, 1, "ch_0001"},
		{"not done: called again with the same key", effects.Resolution{NotDone: true, By: "ops@x", Reason: "no such charge at the provider"}, 2, "ch_0002"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			key := effects.Key(msgType, "order-5", "charge")
			f.prov.SetMode(func(_ string, call int) payments.Mode {
				if call == 1 {
					return payments.Lose // charged, answer lost
				}
				return payments.OK
			})
			h := f.acquire("order-5")
			eff, err := f.log.Do(context.Background(), h.msg, sendCall, f.charge("/sends"))
			requireFailure(t, err, failure.Terminal, effects.CodeOutcomeUnknown, effects.ErrOutcomeUnknown)
			require.Equal(t, effects.StatusUnknown, eff.Status)
			require.Zero(t, eff.TTL, "an UNKNOWN effect never expires")
			require.Equal(t, 1.0, f.metric("ddbworker_effect_unknown_total", map[string]string{"provider": "legacy-pay"}))
			require.Equal(t, 1.0, f.metric("ddbworker_effect_calls_total", map[string]string{"result": "unclear"}))

			// Until resolved, every attempt fails the same way, without a call.
			f.crash()
			h = f.acquire("order-5")
			_, err = f.log.Do(context.Background(), h.msg, sendCall, f.charge("/sends"))
			requireFailure(t, err, failure.Terminal, effects.CodeOutcomeUnknown, nil)
			calls, _ := f.prov.Count(key)
			require.Equal(t, 1, calls)

			// Only with who and why.
			_, err = f.admin.Resolve(context.Background(), key, effects.Resolution{Completed: true, Ref: "x"})
			require.ErrorContains(t, err, "By")
			resolved, err := f.admin.Resolve(context.Background(), key, tc.res)
			require.NoError(t, err)
			require.Equal(t, tc.res.By, resolved.ResolvedBy)
			require.Equal(t, tc.res.Reason, resolved.ResolveReason)
			require.NotEmpty(t, resolved.ResolvedAt)
			// Resolved once: a second resolution is refused.
			_, err = f.admin.Resolve(context.Background(), key, tc.res)
			require.ErrorIs(t, err, effects.ErrNotResolvable)
			l, err := f.admin.List(context.Background(), effects.Filter{Status: effects.StatusUnknown}, effects.Page{})
			require.NoError(t, err)
			require.Empty(t, l.Effects)

			f.crash()
			h = f.acquire("order-5")
			eff, err = f.log.Do(context.Background(), h.msg, sendCall, f.charge("/sends"))
			require.NoError(t, err)
			require.Equal(t, tc.wantRef, eff.ProviderRef)
			calls, _ = f.prov.Count(key)
			require.Equal(t, tc.wantCalls, calls)
			require.NoError(t, f.commitWith(h, eff.Write()))
		})
	}
}

func TestProviderAnswers(t *testing.T) {
	tests := []struct {
		name       string
		call       effects.Call
		path       string
		first      payments.Mode
		wantKind   failure.Kind
		wantCode   string
		wantStatus effects.Status
		sentinel   error
		// the next attempt, the provider answering OK
		nextCalls int
		nextErr   string // code, "" = completed
	}{
		{"declined: FAILED, terminal with the provider's code, never asked again", chargeCall, "/charges", payments.Decline,
			failure.Terminal, "CARD_DECLINED", effects.StatusFailed, effects.ErrRefused, 1, "CARD_DECLINED"},
		{"busy (certainly not done): NOT_DONE, retryable, asked again", sendCall, "/sends", payments.Busy,
			failure.Retryable, effects.CodeNotDone, effects.StatusNotDone, effects.ErrNotDone, 2, ""},
		{"500 after charging, idempotent: retryable, asked again with the same key", chargeCall, "/charges", payments.Fail500,
			failure.Retryable, effects.CodeCallFailed, effects.StatusStarted, effects.ErrCallFailed, 2, ""},
		{"response lost, idempotent: retryable, asked again with the same key", chargeCall, "/charges", payments.Lose,
			failure.Retryable, effects.CodeCallFailed, effects.StatusStarted, effects.ErrCallFailed, 2, ""},
		{"500 after charging, no idempotency keys: UNKNOWN", sendCall, "/sends", payments.Fail500,
			failure.Terminal, effects.CodeOutcomeUnknown, effects.StatusUnknown, effects.ErrOutcomeUnknown, 1, effects.CodeOutcomeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			key := effects.Key(msgType, "order-3", "charge")
			f.prov.SetMode(func(_ string, call int) payments.Mode {
				if call == 1 {
					return tc.first
				}
				return payments.OK
			})
			h := f.acquire("order-3")
			eff, err := f.log.Do(context.Background(), h.msg, tc.call, f.charge(tc.path))
			requireFailure(t, err, tc.wantKind, tc.wantCode, tc.sentinel)
			require.Equal(t, tc.wantStatus, eff.Status)
			ee, ok := effects.AsError(err)
			require.True(t, ok)
			require.Equal(t, key, ee.Key)

			f.crash() // the worker records the failure; the next attempt takes over
			h = f.acquire("order-3")
			eff, err = f.log.Do(context.Background(), h.msg, tc.call, f.charge(tc.path))
			calls, performed := f.prov.Count(key)
			require.Equal(t, tc.nextCalls, calls)
			require.LessOrEqual(t, performed, 1, "charged at most once")
			if tc.nextErr != "" {
				f, _ := failure.As(err)
				require.NotNil(t, f)
				require.Equal(t, tc.nextErr, f.Code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, effects.StatusCompleted, eff.Status)
			if tc.call.Idempotent {
				require.Equal(t, f.prov.Charges(key)[0], eff.ProviderRef, "the provider deduplicated by the key")
			}
			require.NoError(t, f.commitWith(h, eff.Write()))
		})
	}
}

func TestRefusalCommittedAsDomainState(t *testing.T) {
	f := newFixture(t)
	f.prov.SetMode(func(string, int) payments.Mode { return payments.Decline })
	h := f.acquire("order-4")
	_, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	ee, ok := effects.AsError(err)
	require.True(t, ok)
	require.ErrorIs(t, err, effects.ErrRefused)
	// The handler records the decline in its domain instead of failing.
	decline := ddbworker.Put(f.env.Table, ddbworker.Key{"PK": "ORDER#order-4", "SK": "PAYMENT"}, ddbworker.Item{"declined": ee.Effect.FailureCode})
	require.NoError(t, f.commitWith(h, ee.Effect.Write(), decline))
	got, err := f.admin.Get(context.Background(), ee.Key)
	require.NoError(t, err)
	require.NotEmpty(t, got.CommittedAt)
	require.Equal(t, "CARD_DECLINED", got.FailureCode)
}

func TestRequestMismatchIsTerminal(t *testing.T) {
	f := newFixture(t)
	h := f.acquire("order-2")
	eff, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	require.NoError(t, err)
	other := chargeCall
	other.Request = map[string]any{"amount": 9999, "currency": "EUR"}
	_, err = f.log.Do(context.Background(), h.msg, other, f.charge("/charges"))
	requireFailure(t, err, failure.Terminal, effects.CodeRequestMismatch, effects.ErrRequestMismatch)
	require.True(t, ddbworker.IsTerminal(err))
	require.Equal(t, 1.0, f.metric("ddbworker_effect_request_mismatches_total", nil))
	got, err := f.admin.Get(context.Background(), eff.Key)
	require.NoError(t, err)
	require.Equal(t, eff.RequestHash, got.RequestHash, "the record is untouched")
	require.Equal(t, eff.ProviderRef, got.ProviderRef)
	calls, _ := f.prov.Count(eff.Key)
	require.Equal(t, 1, calls)
}

func TestFencedOnTheInboxLease(t *testing.T) {
	t.Run("a worker whose lease was taken over never starts a call", func(t *testing.T) {
		f := newFixture(t)
		stale := f.acquire("order-6")
		f.crash()
		_ = f.acquire("order-6") // a new lease holds it now
		_, err := f.log.Do(context.Background(), stale.msg, chargeCall, f.charge("/charges"))
		requireFailure(t, err, failure.Retryable, effects.CodeLeaseLost, effects.ErrLeaseLost)
		calls, _ := f.prov.Count(effects.Key(msgType, "order-6", "charge"))
		require.Zero(t, calls)
	})
	t.Run("a lease given back and acquired again at the same attempt: the old token fences", func(t *testing.T) {
		f := newFixture(t)
		old := f.acquire("order-6b")
		require.NoError(t, f.commit.Release(context.Background(), old.lease, failure.NewRetryable(failure.CodeThrottled, "throttled")))
		again := f.acquire("order-6b") // the same attempt, run again under a new lease
		require.Equal(t, old.msg.Attempt, again.msg.Attempt, "a release charges no attempt")
		require.NotEqual(t, old.msg.LeaseToken, again.msg.LeaseToken)
		_, err := f.log.Do(context.Background(), old.msg, chargeCall, f.charge("/charges"))
		requireFailure(t, err, failure.Retryable, effects.CodeLeaseLost, effects.ErrLeaseLost)
		calls, _ := f.prov.Count(effects.Key(msgType, "order-6b", "charge"))
		require.Zero(t, calls)
		eff, err := f.log.Do(context.Background(), again.msg, chargeCall, f.charge("/charges"))
		require.NoError(t, err)
		require.Equal(t, effects.StatusCompleted, eff.Status)
	})
	t.Run("no inbox record (a Fused route): terminal", func(t *testing.T) {
		f := newFixture(t)
		msg := &ddbworker.Message{Envelope: &envelope.Envelope{IdempotencyKey: "order-7", MessageType: msgType}, Attempt: 1}
		_, err := f.log.Do(context.Background(), msg, chargeCall, f.charge("/charges"))
		requireFailure(t, err, failure.Terminal, effects.CodeNotLeased, effects.ErrNotLeased)
		calls, _ := f.prov.Count(effects.Key(msgType, "order-7", "charge"))
		require.Zero(t, calls)
	})
	t.Run("two runs of one attempt: the second waits for the call in progress", func(t *testing.T) {
		f := newFixture(t)
		f.prov.SetMode(func(string, int) payments.Mode { return payments.Hold })
		h := f.acquire("order-8")
		var wg sync.WaitGroup
		var first *effects.Effect
		var firstErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, firstErr = f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
		}()
		<-f.prov.Entered // the first is inside its call
		_, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
		requireFailure(t, err, failure.Retryable, effects.CodeInProgress, effects.ErrInProgress)
		f.prov.Release()
		wg.Wait()
		require.NoError(t, firstErr)
		require.Equal(t, effects.StatusCompleted, first.Status)
		calls, _ := f.prov.Count(first.Key)
		require.Equal(t, 1, calls)
	})
}

func TestCompletionCarriedByTheCommit(t *testing.T) {
	f := newFixture(t)
	// DynamoDB fails the completion write right after the provider answered.
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Times: 1, Err: errors.New("injected: DynamoDB unavailable")})
	h := f.acquire("order-10")
	eff, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	require.NoError(t, err)
	require.True(t, eff.Pending)
	require.Equal(t, 1.0, f.metric("ddbworker_effect_completions_deferred_total", nil))
	got, err := f.admin.Get(context.Background(), eff.Key)
	require.NoError(t, err)
	require.Equal(t, effects.StatusStarted, got.Status, "not written yet")

	require.NoError(t, f.commitWith(h, eff.Write(), f.domainWrite("order-10", eff.ProviderRef)))
	got, err = f.admin.Get(context.Background(), eff.Key)
	require.NoError(t, err)
	require.Equal(t, effects.StatusCompleted, got.Status, "the commit carried the completion")
	require.Equal(t, eff.ProviderRef, got.ProviderRef)
	require.NotEmpty(t, got.CommittedAt)
	require.Equal(t, eff.ProviderRef, f.payment("order-10"))
}

func TestListAndPages(t *testing.T) {
	f := newFixture(t)
	for _, order := range []string{"a", "b", "c"} {
		h := f.acquire(order)
		_, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
		require.NoError(t, err)
	}
	f.prov.SetMode(func(string, int) payments.Mode { return payments.Decline })
	h := f.acquire("d")
	_, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	require.Error(t, err)

	tests := []struct {
		filter effects.Filter
		want   int
	}{
		{effects.Filter{}, 4},
		{effects.Filter{Status: effects.StatusCompleted}, 3},
		{effects.Filter{Status: effects.StatusFailed}, 1},
		{effects.Filter{Status: effects.StatusUnknown}, 0},
		{effects.Filter{Provider: "other"}, 0},
	}
	for _, tc := range tests {
		var all []*effects.Effect
		page := effects.Page{Limit: 2}
		for {
			l, err := f.admin.List(context.Background(), tc.filter, page)
			require.NoError(t, err)
			require.LessOrEqual(t, len(l.Effects), 2)
			all = append(all, l.Effects...)
			if l.Next == "" {
				break
			}
			page.Cursor = l.Next
		}
		require.Len(t, all, tc.want, "%+v", tc.filter)
	}
	_, err = f.admin.List(context.Background(), effects.Filter{Status: "DONE"}, effects.Page{})
	require.ErrorContains(t, err, "unknown status")
	_, err = f.admin.Get(context.Background(), "nope")
	require.ErrorIs(t, err, effects.ErrNotFound)
}

// A worker whose inbox lease ran out while it was inside a call to a
// provider without idempotency keys: the next attempt marks the effect
// UNKNOWN while that call is still in progress. An operator may not
// resolve it until the call lease is over — a NOT_DONE resolution made
// then would refuse the late answer (its reference lost) and let the next
// attempt call the provider a second time.
func TestResolveWaitsForACallStillInProgress(t *testing.T) {
	f := newFixture(t)
	ddb := dynamodb.NewFromConfig(f.env.AWS)
	l, err := effects.New(ddb, effects.Config{Inbox: f.store, Now: f.clock.Now, CallTimeout: time.Minute})
	require.NoError(t, err)
	key := effects.Key(msgType, "order-r", "charge")
	f.prov.SetMode(func(string, int) payments.Mode { return payments.Hold })
	h1 := f.acquire("order-r")
	var wg sync.WaitGroup
	var first *effects.Effect
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		first, firstErr = l.Do(context.Background(), h1.msg, sendCall, f.charge("/sends"))
	}()
	<-f.prov.Entered // the first lease is inside its call (its call lease: 62 s)
	f.crash()        // its inbox lease ran out (40 s): a new lease takes the work over
	h2 := f.acquire("order-r")
	eff, err := l.Do(context.Background(), h2.msg, sendCall, f.charge("/sends"))
	requireFailure(t, err, failure.Terminal, effects.CodeOutcomeUnknown, effects.ErrOutcomeUnknown)
	require.Equal(t, effects.StatusUnknown, eff.Status)

	_, err = f.admin.Resolve(context.Background(), key, effects.Resolution{NotDone: true, By: "ops@x", Reason: "no charge at the provider yet"})
	require.ErrorIs(t, err, effects.ErrNotResolvable, "a call is still in progress")

	f.prov.Release() // the late answer arrives: the truth beats the guess
	wg.Wait()
	require.NoError(t, firstErr)
	require.Equal(t, effects.StatusCompleted, first.Status)

	f.crash()
	h3 := f.acquire("order-r")
	eff, err = l.Do(context.Background(), h3.msg, sendCall, f.charge("/sends"))
	require.NoError(t, err)
	require.Equal(t, first.ProviderRef, eff.ProviderRef)
	calls, performed := f.prov.Count(key)
	require.Equal(t, 1, calls, "no second call")
	require.Equal(t, 1, performed)
}

// A call to a provider without idempotency keys ends unclear and DynamoDB
// refuses the UNKNOWN marking: the effect is still STARTED (not listed as
// UNKNOWN, with a TTL). The work must not fail terminal with it so: it is
// retried, and the next attempt marks it UNKNOWN.
func TestUnknownMarkingFailedIsRetried(t *testing.T) {
	f := newFixture(t)
	key := effects.Key(msgType, "order-u", "charge")
	f.prov.SetMode(func(string, int) payments.Mode { return payments.Lose })
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Times: 1, Err: errors.New("injected: DynamoDB unavailable")})
	h := f.acquire("order-u")
	_, err := f.log.Do(context.Background(), h.msg, sendCall, f.charge("/sends"))
	require.Error(t, err)
	fl, ok := failure.As(err)
	require.False(t, ok && fl.Kind == failure.Terminal, "terminal while the effect is not marked UNKNOWN: %v", err)
	got, err := f.admin.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, effects.StatusStarted, got.Status)

	f.crash()
	h = f.acquire("order-u")
	eff, err := f.log.Do(context.Background(), h.msg, sendCall, f.charge("/sends"))
	requireFailure(t, err, failure.Terminal, effects.CodeOutcomeUnknown, effects.ErrOutcomeUnknown)
	require.Equal(t, effects.StatusUnknown, eff.Status)
	l, err := f.admin.List(context.Background(), effects.Filter{Status: effects.StatusUnknown}, effects.Page{})
	require.NoError(t, err)
	require.Len(t, l.Effects, 1)
	calls, _ := f.prov.Count(key)
	require.Equal(t, 1, calls)
}

// An EFFECT_LEASE_LOST failure carries the inbox's *inbox.LeaseLostError
// (with the inbox record the fence found), so that the worker treats it as
// the lost lease it is — a leaseLost verdict, no business attempt — and
// not as a failure of the work: recorded by Fail while the record still
// names this attempt's token (an expired lease no one took over yet), it
// charged an attempt for an outage.
func TestLeaseLostIsTheInboxLeaseLost(t *testing.T) {
	f := newFixture(t)
	h := f.acquire("order-lost")
	f.crash() // the lease ran out; no one took it over: still this token's
	_, err := f.log.Do(context.Background(), h.msg, chargeCall, f.charge("/charges"))
	requireFailure(t, err, failure.Retryable, effects.CodeLeaseLost, effects.ErrLeaseLost)
	var lost *inbox.LeaseLostError
	require.ErrorAs(t, err, &lost)
	require.ErrorIs(t, err, inbox.ErrLeaseLost)
	require.Equal(t, h.lease.Token, lost.Lease.Token)
	require.Equal(t, h.lease.Attempt, lost.Lease.Attempt)
	require.Equal(t, "order-lost", lost.Lease.Key)
	require.NotNil(t, lost.Record, "the inbox record the fence found")
	require.Equal(t, inbox.StatusProcessing, lost.Record.Status)
	require.Equal(t, h.lease.Token, lost.Record.LeaseToken, "expired under this very token")
	require.False(t, lost.Completed())
	calls, _ := f.prov.Count(effects.Key(msgType, "order-lost", "charge"))
	require.Zero(t, calls, "no call under an expired lease")
}
