package gate_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	lease   = 30 * time.Second
	skew    = 2 * time.Second
	msgType = "CaseOpened"
	hashA   = "3f1c0a9b7e2d4c5a8b6f0e1d2c3b4a5968778695a4b3c2d1e0f1a2b3c4d5e6f7"
	hashB   = "0000000000000000000000000000000000000000000000000000000000000000"
	opPut   = "DynamoDB.PutItem"
	opUpd   = "DynamoDB.UpdateItem"
	opGet   = "DynamoDB.GetItem"
)

type fixture struct {
	t     *testing.T
	env   *testenv.Env
	inj   *faults.Injector
	ddb   *dynamodb.Client // through the fault injector; reads for assertions use env.DynamoDB
	clock *testenv.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	inj := faults.New(1)
	ddb := dynamodb.NewFromConfig(env.AWS, inj.DynamoDB, func(o *dynamodb.Options) {
		// The SDK's standard retryer, without the backoff sleep: injected
		// faults are retried exactly as real ones, only faster.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	return &fixture{t: t, env: env, inj: inj, ddb: ddb, clock: testenv.NewClock()}
}

func (f *fixture) gate(mods ...func(*gate.Config)) *gate.Gate {
	f.t.Helper()
	cfg := gate.Config{Store: inbox.Store{Table: f.env.Table}, Owner: "worker-1", Now: f.clock.Now, Policy: stale.Policy{Lease: lease, Skew: skew}}
	for _, m := range mods {
		m(&cfg)
	}
	g, err := gate.New(f.ddb, cfg)
	require.NoError(f.t, err)
	return g
}

func (f *fixture) committer() *mutation.Committer {
	f.t.Helper()
	c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table}, Now: f.clock.Now})
	require.NoError(f.t, err)
	return c
}

func owner(name string) func(*gate.Config) { return func(c *gate.Config) { c.Owner = name } }

func indexProcessing(on bool) func(*gate.Config) {
	return func(c *gate.Config) { c.Store.IndexProcessing = on }
}

func request(key string) *gate.Request {
	return &gate.Request{Work: inbox.Work{
		Key: key, MessageType: msgType, RequestHash: hashA, SchemaVersion: 1,
		AggregateType: "Case", AggregateID: "case-" + key, CorrelationID: "corr-" + key, Producer: "intake",
	}}
}

// raw reads the stored item as it is (consistent read, not counted).
func (f *fixture) raw(key map[string]types.AttributeValue) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.env.Table), Key: key, ConsistentRead: aws.Bool(true),
	})
	require.NoError(f.t, err)
	return out.Item
}

func (f *fixture) record(key string) (*inbox.Record, map[string]types.AttributeValue) {
	f.t.Helper()
	item := f.raw((inbox.Store{}).Key(key, msgType))
	require.NotEmpty(f.t, item, "record %s missing", key)
	rec, err := (inbox.Store{}).Decode(item)
	require.NoError(f.t, err)
	return rec, item
}

// seed writes a record in a given state directly (not through the gate).
func (f *fixture) seed(req *gate.Request, mod func(r *inbox.Record)) {
	f.t.Helper()
	rec := inbox.NewRecord(&req.Work, f.clock.Now().Add(-time.Hour))
	mod(rec)
	item, err := (inbox.Store{}).Encode(rec), error(nil)
	require.NoError(f.t, err)
	_, err = f.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.env.Table), Item: item})
	require.NoError(f.t, err)
}

func has(item map[string]types.AttributeValue, name string) bool { _, ok := item[name]; return ok }

func str(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberS)
	require.True(t, ok, "attribute %s is not a string: %#v", name, item[name])
	return v.Value
}

func num(t *testing.T, item map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberN)
	require.True(t, ok, "attribute %s is not a number: %#v", name, item[name])
	n, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(t, err)
	return n
}

func TestAcquireFresh(t *testing.T) {
	tests := []struct {
		name            string
		indexProcessing bool
		reqMax          int
		wantMax         int
	}{
		{"default config", false, 0, 5},
		{"processing indexed", true, 0, 5},
		{"request overrides max attempts", false, 9, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			g := f.gate(indexProcessing(tt.indexProcessing), func(c *gate.Config) { c.Store.AttentionShards = 8 })
			req := request("k-fresh")
			req.Attempts.MaxAttempts = tt.reqMax
			now := f.clock.Now()

			d, err := g.Acquire(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, d.Action)
			require.Zero(t, d.Verdict, "a fresh record has no decision-table row")
			require.Nil(t, d.Record)
			require.Equal(t, tt.wantMax, d.Attempts.MaxAttempts)
			require.Len(t, d.Lease.Token, 32)
			require.Equal(t, inbox.Lease{
				Key: req.Key, MessageType: msgType, Token: d.Lease.Token, Owner: "worker-1",
				Attempt: 1, ExpiresAt: now.Add(lease), RequestHash: hashA,
			}, d.Lease)
			require.Equal(t, map[string]int{opPut: 1}, f.inj.Calls(), "a fresh acquisition is exactly one PutItem")

			rec, item := f.record(req.Key)
			ts := inbox.FormatTime(now)
			require.Equal(t, inbox.StatusProcessing, rec.Status)
			require.False(t, has(item, attr.Attempts), "claiming charges no business attempt")
			require.False(t, has(item, attr.Takeovers))
			require.Equal(t, 1, rec.Deliveries)
			require.Equal(t, d.Lease.Token, rec.LeaseToken)
			require.Equal(t, "worker-1", rec.LeaseOwner)
			require.Equal(t, now.Add(lease).UnixMilli(), num(t, item, attr.LeaseExpiresAt))
			require.Equal(t, hashA, str(t, item, attr.RequestHash))
			require.Equal(t, ts, rec.FirstSeenAt)
			require.Equal(t, ts, rec.StartedAt)
			require.Equal(t, "corr-"+req.Key, rec.CorrelationID)
			require.Equal(t, now.Add(7*24*time.Hour).Unix(), num(t, item, tables.DefaultLayout().TTL))
			require.Equal(t, "AGG#Case#case-"+req.Key, str(t, item, tables.DefaultLayout().AggregatePK))
			require.Equal(t, ts, str(t, item, tables.DefaultLayout().AggregateSK))
			for _, a := range []string{attr.IdempotencyKey, attr.MessageType, attr.AggregateType, attr.AggregateID,
				attr.StartedAt, attr.LastSeenAt} {
				require.False(t, has(item, a), "the fresh record stores each fact once: %s is in its keys or its firstSeenAt", a)
			}
			require.Equal(t, req.Key, rec.Key, "derived from PK")
			require.Equal(t, "Case", rec.AggregateType, "derived from the aggregate index key")
			require.Equal(t, "case-"+req.Key, rec.AggregateID)
			if tt.indexProcessing {
				require.Equal(t, inbox.AttentionPK(inbox.StatusProcessing, inbox.Shard(req.Key, 8)), str(t, item, tables.DefaultLayout().AttentionPK))
				require.Equal(t, inbox.FormatTime(now.Add(lease)), str(t, item, tables.DefaultLayout().AttentionSK))
			} else {
				require.False(t, has(item, tables.DefaultLayout().AttentionPK), "PROCESSING records stay out of the attention index by default")
				require.False(t, has(item, tables.DefaultLayout().AttentionSK))
			}
			for _, a := range []string{attr.CompletedAt, attr.FailedAt, attr.FailureCode, attr.Outcome} {
				require.False(t, has(item, a), "fresh record must not carry %s", a)
			}
		})
	}
}

// TestAcquireExistingRecordOneCall: every decision that does not take over
// costs exactly one PutItem (the existing record comes back with the failed
// condition: no GetItem) and leaves the record untouched.
func TestAcquireExistingRecordOneCall(t *testing.T) {
	tests := []struct {
		name       string
		seed       func(r *inbox.Record, now time.Time)
		reqHash    string
		action     gate.Action
		verdict    gate.Verdict
		code       string
		retryAfter time.Duration
	}{
		{
			name: "COMPLETED is a duplicate",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.Outcome, r.CompletedAt = inbox.StatusCompleted, "old", inbox.OutcomeApplied, inbox.FormatTime(now)
			},
			action: gate.Duplicate, verdict: gate.VerdictDuplicate,
		},
		{
			name: "PROCESSING with a live lease is in flight",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.LeaseExpiresAt = inbox.StatusProcessing, "other", now.Add(10*time.Second).UnixMilli()
			},
			action: gate.InFlight, verdict: gate.VerdictInFlight, retryAfter: 10*time.Second + skew,
		},
		{
			name: "PROCESSING that ended within the skew margin is in flight",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.LeaseExpiresAt = inbox.StatusProcessing, "other", now.Add(-time.Second).UnixMilli()
			},
			action: gate.InFlight, verdict: gate.VerdictInFlight, retryAfter: skew - time.Second,
		},
		{
			name: "hash mismatch on COMPLETED",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.Outcome = inbox.StatusCompleted, "old", inbox.OutcomeApplied
			},
			reqHash: hashB, action: gate.HashMismatch, verdict: gate.VerdictHashMismatch, code: failure.CodeHashMismatch,
		},
		{
			name: "hash mismatch on an expired lease is not taken over",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.LeaseExpiresAt = inbox.StatusProcessing, "other", now.Add(-time.Hour).UnixMilli()
			},
			reqHash: hashB, action: gate.HashMismatch, verdict: gate.VerdictHashMismatch, code: failure.CodeHashMismatch,
		},
		{
			name: "hash mismatch on FAILED_RETRYABLE is not taken over",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.FailureCode = inbox.StatusFailedRetryable, "other", "DOWNSTREAM"
			},
			reqHash: hashB, action: gate.HashMismatch, verdict: gate.VerdictHashMismatch, code: failure.CodeHashMismatch,
		},
		{
			name: "FAILED_TERMINAL is terminal again with its own code",
			seed: func(r *inbox.Record, now time.Time) {
				r.Status, r.LeaseToken, r.FailureCode, r.FailureMessage = inbox.StatusFailedTerminal, "old", "CASE_NOT_FOUND", "case c-9 does not exist"
			},
			action: gate.Terminal, verdict: gate.VerdictTerminalAgain, code: "CASE_NOT_FOUND",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			g := f.gate()
			req := request("k-existing")
			now := f.clock.Now()
			f.seed(req, func(r *inbox.Record) { tt.seed(r, now) })
			before := f.raw((inbox.Store{}).Key(req.Key, msgType))
			if tt.reqHash != "" {
				req.RequestHash = tt.reqHash
			}

			d, err := g.Acquire(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tt.action, d.Action)
			require.Equal(t, tt.verdict, d.Verdict)
			require.Equal(t, tt.code, d.Code)
			require.Equal(t, tt.retryAfter, d.RetryAfter)
			require.NotNil(t, d.Record)
			require.Equal(t, hashA, d.Record.RequestHash, "the decision carries the existing record")
			require.Empty(t, d.Lease.Token, "no lease unless acquired")
			if tt.code != "" {
				require.NotEmpty(t, d.Message)
			}
			require.Equal(t, map[string]int{opPut: 1}, f.inj.Calls(), "one DynamoDB call, no read")
			require.Equal(t, before, f.raw((inbox.Store{}).Key(req.Key, msgType)), "the existing record must not be touched")
		})
	}
}

func TestAcquireTakeoverOfExpiredLease(t *testing.T) {
	for _, ip := range []bool{false, true} {
		t.Run("IndexProcessing="+strconv.FormatBool(ip), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			g1, g2 := f.gate(owner("worker-1"), indexProcessing(ip)), f.gate(owner("worker-2"), indexProcessing(ip))
			req := request("k-takeover")
			first, err := g1.Acquire(ctx, req)
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, first.Action)
			_, item0 := f.record(req.Key)

			// Exactly at the end of the skew margin the lease is still held.
			f.clock.Advance(lease + skew)
			d, err := g2.Acquire(ctx, req)
			require.NoError(t, err)
			require.Equal(t, gate.InFlight, d.Action)
			require.Zero(t, d.RetryAfter)

			// One millisecond later it may be taken over.
			f.clock.Advance(time.Millisecond)
			now := f.clock.Now()
			f.inj.ResetCalls()
			d, err = g2.Acquire(ctx, req)
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, d.Action)
			require.Equal(t, gate.VerdictTakeover, d.Verdict)
			require.NotEqual(t, first.Lease.Token, d.Lease.Token, "a takeover mints a new fencing token")
			require.Equal(t, 1, d.Lease.Attempt, "no failure was recorded: still the first business attempt")
			require.Equal(t, "worker-2", d.Lease.Owner)
			require.Equal(t, now.Add(lease), d.Lease.ExpiresAt)
			require.Equal(t, first.Lease.Token, d.Record.LeaseToken, "the decision was read from the old record")
			require.Equal(t, map[string]int{opPut: 1, opUpd: 1}, f.inj.Calls())

			rec, item := f.record(req.Key)
			require.Equal(t, inbox.StatusProcessing, rec.Status)
			require.Equal(t, d.Lease.Token, rec.LeaseToken)
			require.Equal(t, "worker-2", rec.LeaseOwner)
			require.Zero(t, rec.Attempts, "a takeover charges no attempt")
			require.Equal(t, 1, rec.Takeovers, "the expired lease counts one takeover")
			require.Equal(t, 2, rec.Deliveries)
			require.Equal(t, now.Add(lease).UnixMilli(), rec.LeaseExpiresAt)
			require.Equal(t, inbox.FormatTime(now), rec.StartedAt)
			require.Equal(t, str(t, item0, attr.FirstSeenAt), rec.FirstSeenAt)
			require.Equal(t, item0[tables.DefaultLayout().AggregatePK], item[tables.DefaultLayout().AggregatePK], "aggregate-index keys never change after the gate")
			require.Equal(t, item0[tables.DefaultLayout().AggregateSK], item[tables.DefaultLayout().AggregateSK])
			if ip {
				require.Equal(t, inbox.FormatTime(now.Add(lease)), str(t, item, tables.DefaultLayout().AttentionSK))
			} else {
				require.False(t, has(item, tables.DefaultLayout().AttentionPK))
			}

			// The old holder is fenced out: it can neither commit nor renew.
			c := f.committer()
			err = c.Commit(ctx, first.Lease, nil, mutation.Completion{}, 0)
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, err, &lost)
			require.False(t, lost.Completed())
			require.Equal(t, d.Lease.Token, lost.Record.LeaseToken)
			ren, err := stale.NewRenewer(f.ddb, stale.RenewerConfig{Store: inbox.Store{Table: f.env.Table}, Policy: stale.Policy{Lease: lease, Skew: skew}, Now: f.clock.Now})
			require.NoError(t, err)
			_, err = ren.Renew(ctx, first.Lease)
			require.ErrorIs(t, err, inbox.ErrLeaseLost)

			// The new holder commits.
			require.NoError(t, c.Commit(ctx, d.Lease, nil, mutation.Completion{}, 0))
			rec, _ = f.record(req.Key)
			require.Equal(t, inbox.StatusCompleted, rec.Status)
		})
	}
}

func TestAcquireTakeoverOfFailedRetryable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g := f.gate()
	req := request("k-retryable")
	first, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.NoError(t, f.committer().Fail(ctx, first.Lease, failure.NewRetryable("DOWNSTREAM_DOWN", "pricing is down")))
	_, failed := f.record(req.Key)
	require.True(t, has(failed, tables.DefaultLayout().AttentionPK), "a failed record is in the attention index")

	// No clock movement: FAILED_RETRYABLE needs no lease expiry.
	f.inj.ResetCalls()
	d, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action)
	require.Equal(t, gate.VerdictTakeover, d.Verdict)
	require.Equal(t, 2, d.Lease.Attempt, "one failure recorded: the second attempt")
	require.NotEqual(t, first.Lease.Token, d.Lease.Token)
	require.Equal(t, inbox.StatusFailedRetryable, d.Record.Status)
	require.Equal(t, map[string]int{opPut: 1, opUpd: 1}, f.inj.Calls())

	rec, item := f.record(req.Key)
	require.Equal(t, inbox.StatusProcessing, rec.Status)
	require.Equal(t, d.Lease.Token, rec.LeaseToken)
	require.Equal(t, 1, rec.Attempts, "the failure counted the attempt; the takeover counts none")
	require.Zero(t, rec.Takeovers, "a FAILED_RETRYABLE record had no lease to abandon")
	require.Equal(t, f.clock.Now().Add(lease).UnixMilli(), rec.LeaseExpiresAt)
	require.False(t, has(item, tables.DefaultLayout().AttentionPK), "taken over: out of the attention index")
	require.False(t, has(item, tables.DefaultLayout().AttentionSK))
}

func TestAcquireEndsExhaustedAttempts(t *testing.T) {
	tests := []struct {
		name      string
		status    inbox.Status
		cfgMax    int
		reqMax    int
		attempts  int
		lastCode  string
		wantInMsg string
	}{
		{"expired PROCESSING, request limit", inbox.StatusProcessing, 0, 3, 3, "", "3 of 3 business attempts used"},
		{"FAILED_RETRYABLE, request limit", inbox.StatusFailedRetryable, 0, 3, 3, "DOWNSTREAM_DOWN", "last failure DOWNSTREAM_DOWN: pricing is down"},
		{"FAILED_RETRYABLE over the config limit", inbox.StatusFailedRetryable, 2, 0, 4, "DOWNSTREAM_DOWN", "4 of 2 business attempts used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			g := f.gate(func(c *gate.Config) { c.MaxAttempts = tt.cfgMax; c.Store.AttentionShards = 4 })
			req := request("k-exhausted")
			req.Attempts.MaxAttempts = tt.reqMax
			now := f.clock.Now()
			f.seed(req, func(r *inbox.Record) {
				r.Status, r.LeaseToken, r.Attempts, r.Deliveries = tt.status, "old", tt.attempts, tt.attempts
				if tt.status == inbox.StatusProcessing {
					r.LeaseExpiresAt = now.Add(-time.Minute).UnixMilli()
				}
				if tt.lastCode != "" {
					r.FailureCode, r.FailureMessage = tt.lastCode, "pricing is down"
				}
			})

			before := f.raw((inbox.Store{}).Key(req.Key, msgType))
			d, err := g.Acquire(ctx, req)
			require.NoError(t, err)
			require.Equal(t, gate.Exhausted, d.Action)
			require.Equal(t, gate.VerdictAttemptsExhausted, d.Verdict)
			require.Equal(t, failure.CodeMaxAttempts, d.Code)
			require.Contains(t, d.Message, tt.wantInMsg)
			require.Empty(t, d.Lease.Token)
			require.Equal(t, before, f.raw((inbox.Store{}).Key(req.Key, msgType)), "the gate writes no failure: the committer records it")

			c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table, AttentionShards: 4}, Now: f.clock.Now})
			require.NoError(t, err)
			require.NoError(t, c.End(ctx, d.Record, failure.NewTerminal(d.Code, d.Message), stale.Policy{Lease: lease, Skew: skew}.StaleBefore(now)))
			rec, item := f.record(req.Key)
			ts := inbox.FormatTime(now)
			require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
			require.Equal(t, failure.CodeMaxAttempts, rec.FailureCode)
			require.Equal(t, d.Message, rec.FailureMessage)
			require.Equal(t, ts, rec.FailedAt)
			require.Equal(t, tt.attempts, rec.Attempts, "ending a record is not an attempt")
			require.Equal(t, "old", rec.LeaseToken, "no new lease was granted")
			require.False(t, has(item, attr.LeaseExpiresAt))
			require.Equal(t, inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(req.Key, 4)), str(t, item, tables.DefaultLayout().AttentionPK))
			require.Equal(t, ts, str(t, item, tables.DefaultLayout().AttentionSK))
			require.Equal(t, now.Add(35*24*time.Hour).Unix(), rec.TTL)

			// A later delivery never re-runs it: terminal again, one call.
			f.inj.ResetCalls()
			again, err := g.Acquire(ctx, req)
			require.NoError(t, err)
			require.Equal(t, gate.Terminal, again.Action)
			require.Equal(t, gate.VerdictTerminalAgain, again.Verdict)
			require.Equal(t, failure.CodeMaxAttempts, again.Code)
			require.Equal(t, map[string]int{opPut: 1}, f.inj.Calls())
		})
	}
}

func TestAcquireRetryWindowExpired(t *testing.T) {
	tests := []struct {
		name   string
		status inbox.Status
	}{
		{"FAILED_RETRYABLE", inbox.StatusFailedRetryable},
		{"expired PROCESSING", inbox.StatusProcessing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			g := f.gate()
			now := f.clock.Now()
			req := request("k-window")
			req.Attempts.RetryableUntil = now.Add(-time.Second)
			f.seed(req, func(r *inbox.Record) {
				r.Status, r.LeaseToken = tt.status, "old"
				if tt.status == inbox.StatusProcessing {
					r.LeaseExpiresAt = now.Add(-time.Minute).UnixMilli()
				}
			})
			d, err := g.Acquire(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, gate.Exhausted, d.Action)
			require.Equal(t, gate.VerdictRetryWindowExpired, d.Verdict)
			require.Equal(t, failure.CodeRetryWindowExpired, d.Code)
			require.Contains(t, d.Message, inbox.FormatTime(req.Attempts.RetryableUntil))

			require.NoError(t, f.committer().End(context.Background(), d.Record, failure.NewTerminal(d.Code, d.Message), stale.Policy{Lease: lease, Skew: skew}.StaleBefore(now)))
			rec, item := f.record(req.Key)
			require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
			require.Equal(t, failure.CodeRetryWindowExpired, rec.FailureCode)
			require.Zero(t, rec.Attempts)
			require.True(t, has(item, tables.DefaultLayout().AttentionPK))
		})
	}

	t.Run("retryableUntil ahead is a takeover", func(t *testing.T) {
		f := newFixture(t)
		req := request("k-window-ahead")
		req.Attempts.RetryableUntil = f.clock.Now().Add(time.Hour)
		f.seed(req, func(r *inbox.Record) { r.Status, r.LeaseToken = inbox.StatusFailedRetryable, "old" })
		d, err := f.gate().Acquire(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, gate.Acquired, d.Action)
		require.Equal(t, gate.VerdictTakeover, d.Verdict)
	})
}

// TestAcquireConcurrentTakeover: several workers receive the same expired
// work at once; the fenced takeover lets exactly one of them in.
func TestAcquireConcurrentTakeover(t *testing.T) {
	const keys, workers = 6, 3
	ctx := context.Background()
	f := newFixture(t)
	g0 := f.gate(owner("worker-0"))
	for k := range keys {
		d, err := g0.Acquire(ctx, request("k-race-"+strconv.Itoa(k)))
		require.NoError(t, err)
		require.Equal(t, gate.Acquired, d.Action)
	}
	f.clock.Advance(lease + skew + time.Second)

	gates := make([]*gate.Gate, workers)
	for w := range gates {
		gates[w] = f.gate(owner("worker-" + strconv.Itoa(w+1)))
	}
	type result struct {
		d   gate.Decision
		err error
	}
	results := make([][]result, keys)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keys {
		results[k] = make([]result, workers)
		for w := range workers {
			wg.Go(func() {
				<-start
				d, err := gates[w].Acquire(ctx, request("k-race-"+strconv.Itoa(k)))
				results[k][w] = result{d, err}
			})
		}
	}
	close(start)
	wg.Wait()

	for k := range keys {
		var winner *gate.Decision
		for w := range workers {
			r := results[k][w]
			require.NoError(t, r.err)
			switch r.d.Action {
			case gate.Acquired:
				require.Nil(t, winner, "key %d: two workers acquired the same work", k)
				require.Equal(t, gate.VerdictTakeover, r.d.Verdict)
				winner = &r.d
			case gate.InFlight:
				require.Equal(t, gate.VerdictInFlight, r.d.Verdict)
			default:
				require.Failf(t, "unexpected action", "key %d worker %d: %s", k, w, r.d.Action)
			}
		}
		require.NotNil(t, winner, "key %d: nobody took over", k)
		rec, _ := f.record("k-race-" + strconv.Itoa(k))
		require.Equal(t, winner.Lease.Token, rec.LeaseToken)
		require.Equal(t, winner.Lease.Owner, rec.LeaseOwner)
		require.Zero(t, rec.Attempts, "a takeover charges no attempt")
		require.Equal(t, 1, rec.Takeovers, "exactly one takeover counted")
	}
}

// TestAcquireLostResponse: the write was applied but its response lost; the
// SDK retries the identical request, whose condition now fails against our
// own record. The gate must recognise its token and hold the lease.
func TestAcquireLostResponse(t *testing.T) {
	t.Run("fresh PutItem", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		g := f.gate()
		req := request("k-lost-put")
		now := f.clock.Now()
		f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindLostResponse, Times: 1})

		d, err := g.Acquire(ctx, req)
		require.NoError(t, err)
		require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse], "the fault must have fired")
		require.Equal(t, gate.Acquired, d.Action)
		require.Equal(t, gate.VerdictOwn, d.Verdict)
		require.Equal(t, 1, d.Lease.Attempt)
		require.True(t, now.Add(lease).Equal(d.Lease.ExpiresAt), "lease %s, want %s", d.Lease.ExpiresAt, now.Add(lease))
		require.Equal(t, map[string]int{opPut: 1}, f.inj.Calls(), "one API call (two attempts), no read")

		rec, _ := f.record(req.Key)
		require.Equal(t, d.Lease.Token, rec.LeaseToken)
		require.Zero(t, rec.Attempts)
		require.Equal(t, 1, rec.Deliveries)
		require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0), "the recovered lease commits")
	})

	t.Run("UpdateItem that ends the record", func(t *testing.T) {
		f := newFixture(t)
		req := request("k-lost-end")
		req.Attempts.MaxAttempts = 2
		f.seed(req, func(r *inbox.Record) { r.Status, r.LeaseToken, r.Attempts = inbox.StatusFailedRetryable, "old", 2 })
		d, err := f.gate().Acquire(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, gate.Exhausted, d.Action)
		f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1})
		require.NoError(t, f.committer().End(context.Background(), d.Record, failure.NewTerminal(d.Code, d.Message), stale.Policy{Lease: lease, Skew: skew}.StaleBefore(f.clock.Now())),
			"the retried write finds its own terminal record")
		require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse])
		rec, _ := f.record(req.Key)
		require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
		require.Equal(t, failure.CodeMaxAttempts, rec.FailureCode)
	})

	t.Run("takeover UpdateItem", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		g := f.gate()
		req := request("k-lost-update")
		first, err := g.Acquire(ctx, req)
		require.NoError(t, err)
		f.clock.Advance(time.Minute)
		f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1})

		d, err := g.Acquire(ctx, req)
		require.NoError(t, err)
		require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse])
		require.Equal(t, gate.Acquired, d.Action)
		require.Equal(t, gate.VerdictOwn, d.Verdict)
		require.NotEqual(t, first.Lease.Token, d.Lease.Token)
		require.Equal(t, 1, d.Lease.Attempt)
		rec, _ := f.record(req.Key)
		require.Equal(t, d.Lease.Token, rec.LeaseToken)
		require.Equal(t, 1, rec.Takeovers, "the retried takeover is counted once")
		require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0))
	})
}

// TestAcquireConcurrentFirstDeliveries: the same new work arrives at several
// workers at once; the conditional PutItem admits exactly one, the others
// see its live lease.
func TestAcquireConcurrentFirstDeliveries(t *testing.T) {
	const workers = 4
	ctx := context.Background()
	f := newFixture(t)
	decisions := make([]gate.Decision, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		g := f.gate(owner("worker-" + strconv.Itoa(w)))
		wg.Go(func() {
			<-start
			decisions[w], errs[w] = g.Acquire(ctx, request("k-first"))
		})
	}
	close(start)
	wg.Wait()
	acquired := 0
	for w := range workers {
		require.NoError(t, errs[w])
		switch decisions[w].Action {
		case gate.Acquired:
			acquired++
			rec, _ := f.record("k-first")
			require.Equal(t, decisions[w].Lease.Token, rec.LeaseToken)
		case gate.InFlight:
			require.Equal(t, lease+skew, decisions[w].RetryAfter)
		default:
			require.Failf(t, "unexpected action", "worker %d: %s", w, decisions[w].Action)
		}
	}
	require.Equal(t, 1, acquired)
	require.Equal(t, map[string]int{opPut: workers}, f.inj.Calls())
}

// TestAcquireTakeoverWithinTheLastMillisecond: Decide compares the lease end
// with nanosecond precision, the fenced UpdateItem with StaleBefore's
// millisecond-truncated value. In the sub-millisecond window after the skew
// margin the two disagree: every re-decision says "takeover" and every
// conditional update fails, until ErrRaceLimit.
func TestAcquireTakeoverWithinTheLastMillisecond(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g := f.gate()
	req := request("k-ms")
	_, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	f.clock.Advance(lease + skew + 500*time.Microsecond)
	d, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action)
	require.Equal(t, gate.VerdictTakeover, d.Verdict)
}

// TestFreshRecordStoresMessageType: DESIGN §2 lists messageType among the
// inbox record's attributes; the record keeps it in its sort key
// (WORKER#<type>) and reads it back from there, rather than storing it a
// second time (each fact once: the record stays one write unit).
func TestFreshRecordStoresMessageType(t *testing.T) {
	f := newFixture(t)
	req := request("k-type")
	_, err := f.gate().Acquire(context.Background(), req)
	require.NoError(t, err)
	rec, item := f.record(req.Key)
	require.Equal(t, msgType, rec.MessageType)
	require.Equal(t, "WORKER#"+msgType, str(t, item, tables.DefaultLayout().SortKey))
	require.False(t, has(item, attr.MessageType), "not stored twice")
}

func TestNewValidation(t *testing.T) {
	api := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	t.Run("every problem at once", func(t *testing.T) {
		_, err := gate.New(nil, gate.Config{
			MaxAttempts: 101, Store: inbox.Store{AttentionShards: -1, TTL: inbox.TTL{Completed: 24 * time.Hour}}, MaxRaces: -2,
			Policy: stale.Policy{Lease: 10 * time.Millisecond},
		})
		require.Error(t, err)
		joined, ok := err.(interface{ Unwrap() []error })
		require.True(t, ok, "errors.Join result expected, got %T", err)
		require.GreaterOrEqual(t, len(joined.Unwrap()), 5)
		for _, want := range []string{"API is required", "Store.Table is required", "MaxAttempts 101", "AttentionShards -1", "MaxRaces -2", "Policy.Lease", "TTL.Completed"} {
			require.ErrorContains(t, err, want)
		}
	})
	tests := []struct {
		name string
		cfg  gate.Config
		want string
	}{
		{"max attempts below 1", gate.Config{Store: inbox.Store{Table: "t"}, MaxAttempts: -1}, "MaxAttempts -1"},
		{"too many shards", gate.Config{Store: inbox.Store{Table: "t", AttentionShards: 101}}, "AttentionShards 101"},
		{"skew not below lease", gate.Config{Store: inbox.Store{Table: "t"}, Policy: stale.Policy{Lease: 5 * time.Second, Skew: 5 * time.Second}}, "Policy.Skew"},
		{"negative skew", gate.Config{Store: inbox.Store{Table: "t"}, Policy: stale.Policy{Skew: -time.Second}}, "Policy.Skew"},
		{"short processing TTL", gate.Config{Store: inbox.Store{Table: "t", TTL: inbox.TTL{Processing: time.Minute}}}, "TTL.Processing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gate.New(api, tt.cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("defaults", func(t *testing.T) {
		g, err := gate.New(api, gate.Config{Store: inbox.Store{Table: "t"}})
		require.NoError(t, err)
		require.Equal(t, stale.Policy{Lease: stale.DefaultLease, Skew: stale.DefaultSkew}, g.Policy())
		host, _ := os.Hostname()
		require.Equal(t, host+"/"+strconv.Itoa(os.Getpid()), g.Owner())
	})
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := gate.NewToken()
		require.Len(t, tok, 32)
		require.Equal(t, strings.ToLower(tok), tok)
		require.False(t, seen[tok], "tokens must not repeat")
		seen[tok] = true
	}
}

// TestAcquireSDKErrorsSurface: a failure that is not a condition failure
// (here: throttling beyond the SDK's retries) is returned as an error the
// caller classifies, never as a decision.
func TestAcquireSDKErrorsSurface(t *testing.T) {
	f := newFixture(t)
	g := f.gate()
	f.inj.Add(faults.Rule{Operation: "PutItem", Kind: faults.KindThrottle, Times: 10})
	_, err := g.Acquire(context.Background(), request("k-throttled"))
	require.Error(t, err)
	fe := failure.Classify(err, failure.CodeServiceUnavailable)
	require.Equal(t, failure.Retryable, fe.Kind)
	require.Equal(t, failure.CodeThrottled, fe.Code)
	require.False(t, errors.Is(err, gate.ErrRaceLimit))
	require.Empty(t, f.raw((inbox.Store{}).Key("k-throttled", msgType)))
}

// A takeover is fenced on the lease still being expired: when the holder's
// renewal lands between the decision (read from the expired record) and the
// takeover UpdateItem, token, status and attempts are unchanged, so only
// the lease condition stops the takeover. The gate must then re-decide:
// in flight, the holder keeps its lease.
func TestTakeoverFailsWhenLeaseRenewedMeanwhile(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g1, g2 := f.gate(owner("worker-1")), f.gate(owner("worker-2"))
	req := request("k-renewed")
	first, err := g1.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, first.Action)

	f.clock.Advance(lease + skew + time.Second) // expired: the decision will be a takeover
	ren, err := stale.NewRenewer(f.env.DynamoDB, stale.RenewerConfig{Store: inbox.Store{Table: f.env.Table}, Policy: stale.Policy{Lease: lease, Skew: skew}, Now: f.clock.Now})
	require.NoError(t, err)
	var renewed inbox.Lease
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindHook, Times: 1,
		Hook: func(ctx context.Context, _ any) {
			var rerr error
			renewed, rerr = ren.Renew(ctx, first.Lease) // the holder's heartbeat wins the race
			require.NoError(t, rerr)
		}})

	d, err := g2.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 1, f.inj.Fired()[faults.KindHook], "the renewal landed between decide and takeover")
	require.Equal(t, gate.InFlight, d.Action, "a takeover of a renewed lease must fail its condition")
	require.Equal(t, gate.VerdictInFlight, d.Verdict)
	require.Equal(t, lease+skew, d.RetryAfter)

	rec, _ := f.record(req.Key)
	require.Equal(t, inbox.StatusProcessing, rec.Status)
	require.Equal(t, first.Lease.Token, rec.LeaseToken, "the holder keeps its lease")
	require.Equal(t, "worker-1", rec.LeaseOwner)
	require.Zero(t, rec.Takeovers, "no takeover counted")
	require.Zero(t, rec.Attempts)
	require.Equal(t, renewed.ExpiresAt.UnixMilli(), rec.LeaseExpiresAt)
	require.NoError(t, f.committer().Commit(ctx, renewed, nil, mutation.Completion{}, 0), "the holder still commits")
}

// TestAcquireTakeoverOfReleasedLease: a lease given back after
// infrastructure trouble (no outcome, no token) is taken over at once, with
// no wait for its expiry, no attempt and no takeover counted.
func TestAcquireTakeoverOfReleasedLease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g1, g2 := f.gate(owner("worker-1")), f.gate(owner("worker-2"))
	req := request("k-released")
	first, err := g1.Acquire(ctx, req)
	require.NoError(t, err)
	require.NoError(t, f.committer().Release(ctx, first.Lease, failure.NewRetryable(failure.CodeThrottled, "throttled")))
	rec, item := f.record(req.Key)
	require.True(t, rec.Released())
	require.False(t, has(item, attr.LeaseToken), "a released lease has no holder")
	require.Equal(t, f.clock.Now().UnixMilli(), rec.LeaseExpiresAt, "the release says when the lease ended")

	d, err := g2.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action, "no wait for the released lease's expiry")
	require.Equal(t, gate.VerdictTakeover, d.Verdict)
	require.Equal(t, 1, d.Lease.Attempt)
	rec, _ = f.record(req.Key)
	require.Zero(t, rec.Attempts)
	require.Zero(t, rec.Takeovers, "a lease given back is not an abandoned one")
	require.Equal(t, 2, rec.Deliveries)
	require.Equal(t, "worker-2", rec.LeaseOwner)
	require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0))
}

// TestAcquireEndsAfterMaxTakeovers: work whose lease keeps expiring without
// an outcome (it kills its worker) is taken over MaxTakeovers times, then
// ended MAX_TAKEOVERS_EXCEEDED — with no business attempt counted.
func TestAcquireEndsAfterMaxTakeovers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const maxTakeovers = 3
	g := f.gate(func(c *gate.Config) { c.MaxTakeovers = maxTakeovers })
	req := request("k-crash-loop")
	d, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action)
	for i := 1; i <= maxTakeovers; i++ {
		f.clock.Advance(lease + skew + time.Second) // the holder crashed
		d, err = g.Acquire(ctx, req)
		require.NoError(t, err)
		require.Equal(t, gate.Acquired, d.Action, "takeover %d", i)
		rec, _ := f.record(req.Key)
		require.Equal(t, i, rec.Takeovers)
		require.Zero(t, rec.Attempts)
	}
	f.clock.Advance(lease + skew + time.Second)
	d, err = g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Exhausted, d.Action)
	require.Equal(t, gate.VerdictTakeoversExhausted, d.Verdict)
	require.Equal(t, failure.CodeMaxTakeovers, d.Code)
	require.Contains(t, d.Message, "expired without an outcome 4 times")
	require.NoError(t, f.committer().End(ctx, d.Record, failure.NewTerminal(d.Code, d.Message), stale.Policy{Lease: lease, Skew: skew}.StaleBefore(f.clock.Now())))
	rec, _ := f.record(req.Key)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, failure.CodeMaxTakeovers, rec.FailureCode)
	require.Zero(t, rec.Attempts, "crashes are not business attempts")
}

// TestAcquireUnansweredClaim: the gate's PutItem applies but every SDK
// attempt loses its response. The error says which lease the write may
// have taken, so the caller can give it back; given back, the next
// delivery takes the work over at once, charging nothing.
func TestAcquireUnansweredClaim(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g := f.gate()
	req := request("k-unanswered")
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindLostResponse, Times: 1})
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Kind: faults.KindServerError, Times: 5})

	_, err := g.Acquire(ctx, req)
	f.inj.Clear()
	var ce *gate.ClaimError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, gate.ErrClaim)
	require.Equal(t, failure.CodeServiceUnavailable, failure.Classify(err, "").Code, "infrastructure trouble: no attempt")
	rec, _ := f.record(req.Key)
	require.Equal(t, ce.Lease.Token, rec.LeaseToken, "the write applied under the lease the error names")

	require.NoError(t, f.committer().Release(ctx, ce.Lease, failure.Classify(err, "")))
	d, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action, "given back: taken over at once")
	require.Equal(t, 1, d.Lease.Attempt)
	rec, _ = f.record(req.Key)
	require.Zero(t, rec.Takeovers)
	require.Zero(t, rec.Attempts)
}

// TestTakeoverUnansweredClaim: the takeover's UpdateItem applies but every
// SDK attempt loses its response. As for the PutItem
// (TestAcquireUnansweredClaim), the error names the lease the write took,
// no business attempt is counted, and once the caller gives it back the
// next delivery takes the work over at once. The one takeover counted is
// the abandoned lease's, which the unanswered write took over.
func TestTakeoverUnansweredClaim(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	g := f.gate()
	req := request("k-unanswered-takeover")
	first, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	f.clock.Advance(lease + skew + time.Second) // its holder crashed
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1})
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindServerError, Times: 5})

	_, err = g.Acquire(ctx, req)
	require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse])
	require.Positive(t, f.inj.Fired()[faults.KindServerError], "the SDK retried; no attempt got an answer")
	f.inj.Clear()
	var ce *gate.ClaimError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, gate.ErrClaim)
	require.Equal(t, failure.CodeServiceUnavailable, failure.Classify(err, "").Code, "infrastructure trouble: no attempt")
	rec, _ := f.record(req.Key)
	require.Equal(t, ce.Lease.Token, rec.LeaseToken, "the takeover applied under the lease the error names")
	require.NotEqual(t, first.Lease.Token, rec.LeaseToken)
	require.Equal(t, 1, rec.Takeovers, "the abandoned lease, taken over")
	require.Zero(t, rec.Attempts)

	require.NoError(t, f.committer().Release(ctx, ce.Lease, failure.Classify(err, "")))
	d, err := g.Acquire(ctx, req)
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action, "given back: taken over at once, no wait for its expiry")
	require.Equal(t, 1, d.Lease.Attempt)
	rec, _ = f.record(req.Key)
	require.Equal(t, 1, rec.Takeovers, "a lease given back is no abandoned one")
	require.Zero(t, rec.Attempts)
	require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0))
}

// TestAcquireRenewsAHeldLease: a delivery that holds a lease already
// (Request.Token: it was parked while the database was unhealthy) gets it
// back — no takeover counted — and a lease that ran out while it waited,
// or has less than half a lease left, is renewed to a whole lease by an
// UpdateItem fenced on its token before Acquired is returned: a held
// lease is renewed before the handler starts, or not used. Before, the
// gate returned it as it was, expired, and the effect log refused the
// handler's call under it (EFFECT_LEASE_LOST, charged as an attempt).
// When the fence fails (another worker took the lease over meanwhile)
// the gate decides again from the record it found.
func TestAcquireRenewsAHeldLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		advance time.Duration // from the first acquisition
		renewed bool
	}{
		{"live lease used as it is", lease / 4, false},
		{"less than half a lease left", lease - lease/4, true},
		{"expired, within the skew", lease + skew/2, true},
		{"expired long ago", lease + time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			g := f.gate()
			req := request("k-held")
			first, err := g.Acquire(ctx, req)
			require.NoError(t, err)
			f.clock.Advance(tc.advance)
			now := f.clock.Now()
			f.inj.ResetCalls()

			held := *req
			held.Token = first.Lease.Token
			d, err := g.Acquire(ctx, &held)
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, d.Action)
			require.Equal(t, gate.VerdictOwn, d.Verdict)
			require.Equal(t, first.Lease.Token, d.Lease.Token, "the held lease, not a new one")
			require.Equal(t, 1, d.Lease.Attempt)
			rec, _ := f.record(req.Key)
			if tc.renewed {
				require.True(t, now.Add(lease).Truncate(time.Millisecond).Equal(d.Lease.ExpiresAt), "renewed to a whole lease: %s", d.Lease.ExpiresAt)
				require.Equal(t, map[string]int{opPut: 1, opUpd: 1}, f.inj.Calls(), "the claim's PutItem, then the renewal")
			} else {
				require.True(t, first.Lease.ExpiresAt.Equal(d.Lease.ExpiresAt))
				require.Equal(t, map[string]int{opPut: 1}, f.inj.Calls(), "no write for a live lease")
			}
			require.Equal(t, d.Lease.ExpiresAt.UnixMilli(), rec.LeaseExpiresAt, "the record says what the lease says")
			require.Equal(t, first.Lease.Token, rec.LeaseToken)
			require.Zero(t, rec.Takeovers, "getting a held lease back is no takeover")
			require.Zero(t, rec.Attempts)
			require.Equal(t, 1, rec.Deliveries)
			require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0), "the held lease commits")
		})
	}

	t.Run("taken over meanwhile: decided again", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		g1, g2 := f.gate(owner("worker-1")), f.gate(owner("worker-2"))
		req := request("k-held-lost")
		first, err := g1.Acquire(ctx, req)
		require.NoError(t, err)
		f.clock.Advance(lease + skew + time.Second)
		expired, _ := f.record(req.Key)    // as the read ahead found it
		other, err := g2.Acquire(ctx, req) // the lease ran out: another worker takes it over
		require.NoError(t, err)
		require.Equal(t, gate.VerdictTakeover, other.Verdict)

		held := *req
		held.Token = first.Lease.Token
		d, err := g1.Resolve(ctx, &held, expired) // decided on the record as it was: own, renewal fails
		require.NoError(t, err)
		require.Equal(t, gate.InFlight, d.Action, "the renewal's fence failed; decided again from the record it returned")
		require.Equal(t, gate.VerdictInFlight, d.Verdict)
		rec, _ := f.record(req.Key)
		require.Equal(t, other.Lease.Token, rec.LeaseToken, "the new holder keeps its lease")
		require.Equal(t, other.Lease.ExpiresAt.UnixMilli(), rec.LeaseExpiresAt, "not renewed by the old holder")
	})
}
