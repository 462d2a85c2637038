package stale_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const day = 24 * time.Hour

func TestPolicyWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   stale.Policy
		want stale.Policy
		errs []string
	}{
		{"zero value gets defaults", stale.Policy{}, stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}, nil},
		{"explicit values kept", stale.Policy{Lease: time.Minute, Skew: 5 * time.Second}, stale.Policy{Lease: time.Minute, Skew: 5 * time.Second}, nil},
		{"shortest lease", stale.Policy{Lease: time.Second, Skew: time.Millisecond}, stale.Policy{Lease: time.Second, Skew: time.Millisecond}, nil},
		{"lease below 1s", stale.Policy{Lease: 999 * time.Millisecond, Skew: time.Millisecond}, stale.Policy{}, []string{"Policy.Lease 999ms must be at least 1s"}},
		{"negative skew", stale.Policy{Skew: -time.Second}, stale.Policy{}, []string{"Policy.Skew -1s"}},
		{"skew equal to lease", stale.Policy{Lease: 5 * time.Second, Skew: 5 * time.Second}, stale.Policy{}, []string{"Policy.Skew 5s must be within [0, Lease)"}},
		{"default skew longer than a short lease", stale.Policy{Lease: 2 * time.Second}, stale.Policy{}, []string{"Policy.Skew 2s"}},
		{"both problems at once", stale.Policy{Lease: 100 * time.Millisecond, Skew: -time.Second}, stale.Policy{}, []string{"Policy.Lease", "Policy.Skew"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.WithDefaults()
			if tt.errs == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			for _, e := range tt.errs {
				require.ErrorContains(t, err, e)
			}
		})
	}
}

func TestPolicyBoundaries(t *testing.T) {
	p := stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}
	exp := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	tests := []struct {
		name      string
		now       time.Time
		expired   bool
		remaining time.Duration
	}{
		{"lease running", exp.Add(-10 * time.Second), false, 12 * time.Second},
		{"at the lease end", exp, false, 2 * time.Second},
		{"ended less than Skew ago", exp.Add(time.Second), false, time.Second},
		{"one ns before the margin ends", exp.Add(2*time.Second - time.Nanosecond), false, time.Nanosecond},
		{"exactly at the margin's end", exp.Add(2 * time.Second), false, 0},
		{"one ns past the margin", exp.Add(2*time.Second + time.Nanosecond), true, 0},
		{"long expired", exp.Add(time.Hour), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.expired, p.Expired(exp, tt.now))
			require.Equal(t, tt.remaining, p.Remaining(exp, tt.now))
		})
	}
}

// TestStaleBeforeMatchesExpired: the takeover's condition
// leaseExpiresAt < StaleBefore(now) must agree with Expired for leases stored
// in epoch milliseconds, at millisecond-aligned clocks.
func TestStaleBeforeMatchesExpired(t *testing.T) {
	p := stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}
	exp := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	for off := -5 * time.Millisecond; off <= 5*time.Millisecond; off += time.Millisecond {
		now := exp.Add(p.Skew + off)
		require.Equal(t, p.Expired(exp, now), exp.UnixMilli() < p.StaleBefore(now), "offset %s", off)
	}
	require.Equal(t, exp.Add(-p.Skew).UnixMilli(), p.StaleBefore(exp))
}

func TestStaleBeforeSubMillisecond(t *testing.T) {
	p := stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}
	exp := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	for _, off := range []time.Duration{time.Nanosecond, 500 * time.Microsecond, 999 * time.Microsecond} {
		now := exp.Add(p.Skew + off)
		require.True(t, p.Expired(exp, now))
		require.True(t, exp.UnixMilli() < p.StaleBefore(now), "offset %s: expired, but the condition would refuse the takeover", off)
	}
}

func TestPolicyExpiresAtAndRenewAfter(t *testing.T) {
	p, err := stale.Policy{Lease: 30 * time.Second}.WithDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.UTC)
	got := p.ExpiresAt(now)
	require.Equal(t, time.Date(2026, 3, 1, 12, 0, 30, 123_000_000, time.UTC), got, "truncated to the stored millisecond")
	require.Equal(t, got, time.UnixMilli(got.UnixMilli()).UTC(), "round-trips through epoch ms")
	require.Equal(t, 15*time.Second, p.RenewAfter())
}

func TestTTLWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   inbox.TTL
		want inbox.TTL
		errs []string
	}{
		{"defaults", inbox.TTL{}, inbox.TTL{Processing: 7 * day, Completed: 35 * day, Failed: 35 * day}, nil},
		{"minimums accepted", inbox.TTL{Processing: time.Hour, Completed: 28 * day, Failed: time.Hour}, inbox.TTL{Processing: time.Hour, Completed: 28 * day, Failed: time.Hour}, nil},
		{"completed below 28 days", inbox.TTL{Completed: 28*day - time.Second}, inbox.TTL{}, []string{"TTL.Completed", "at least 28 days"}},
		{"completed 14 days", inbox.TTL{Completed: 14 * day}, inbox.TTL{}, []string{"TTL.Completed 336h0m0s"}},
		{"processing below 1h", inbox.TTL{Processing: 59 * time.Minute}, inbox.TTL{}, []string{"TTL.Processing 59m0s"}},
		{"failed below 1h", inbox.TTL{Failed: time.Minute}, inbox.TTL{}, []string{"TTL.Failed 1m0s"}},
		{"negative", inbox.TTL{Processing: -time.Hour}, inbox.TTL{}, []string{"TTL.Processing"}},
		{"all problems at once", inbox.TTL{Processing: time.Second, Completed: day, Failed: time.Second}, inbox.TTL{}, []string{"TTL.Processing", "TTL.Completed", "TTL.Failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.WithDefaults()
			if tt.errs == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			for _, e := range tt.errs {
				require.ErrorContains(t, err, e)
			}
		})
	}
}

func TestTTLFor(t *testing.T) {
	ttl := inbox.TTL{Processing: 2 * day, Completed: 40 * day, Failed: 30 * day}
	now := time.Date(2026, 3, 1, 12, 0, 0, 900_000_000, time.UTC)
	tests := []struct {
		status inbox.Status
		want   time.Duration
	}{
		{inbox.StatusProcessing, 2 * day},
		{inbox.StatusCompleted, 40 * day},
		{inbox.StatusFailedRetryable, 30 * day},
		{inbox.StatusFailedTerminal, 30 * day},
		{inbox.Status("UNKNOWN"), 30 * day},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			require.Equal(t, now.Add(tt.want).Unix(), ttl.For(tt.status, now), "epoch seconds")
		})
	}
	d, err := inbox.TTL{}.WithDefaults()
	require.NoError(t, err)
	require.GreaterOrEqual(t, d.For(inbox.StatusCompleted, now), now.Add(35*day).Unix(), "COMPLETED outlives SQS + DLQ retention")
}

// Renewer, against DynamoDB Local.

type fixture struct {
	t     *testing.T
	env   *testenv.Env
	inj   *faults.Injector
	ddb   *dynamodb.Client
	clock *testenv.Clock
	gate  *gate.Gate
}

var policy = stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}

func newFixture(t *testing.T, indexProcessing bool) *fixture {
	t.Helper()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	f := &fixture{t: t, env: env, inj: faults.New(3), clock: testenv.NewClock()}
	f.ddb = dynamodb.NewFromConfig(env.AWS, f.inj.DynamoDB)
	var err error
	f.gate, err = gate.New(f.ddb, gate.Config{Store: inbox.Store{Table: env.Table, IndexProcessing: indexProcessing, AttentionShards: 4}, Owner: "worker-1", Policy: policy, Now: f.clock.Now})
	require.NoError(t, err)
	return f
}

func (f *fixture) renewer(indexProcessing bool) *stale.Renewer {
	f.t.Helper()
	r, err := stale.NewRenewer(f.ddb, stale.RenewerConfig{Store: inbox.Store{Table: f.env.Table, IndexProcessing: indexProcessing, AttentionShards: 4}, Policy: policy, Now: f.clock.Now})
	require.NoError(f.t, err)
	return r
}

func (f *fixture) acquire(key string) inbox.Lease {
	f.t.Helper()
	d, err := f.gate.Acquire(context.Background(), &gate.Request{Work: inbox.Work{Key: key, MessageType: "CaseOpened", RequestHash: "h", AggregateType: "Case", AggregateID: "c-1"}})
	require.NoError(f.t, err)
	require.Equal(f.t, gate.Acquired, d.Action)
	return d.Lease
}

func (f *fixture) raw(key string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.env.Table), Key: (inbox.Store{}).Key(key, "CaseOpened"), ConsistentRead: aws.Bool(true)})
	require.NoError(f.t, err)
	return out.Item
}

func (f *fixture) record(key string) *inbox.Record {
	f.t.Helper()
	rec, err := (inbox.Store{}).Decode(f.raw(key))
	require.NoError(f.t, err)
	return rec
}

func TestRenew(t *testing.T) {
	for _, ip := range []bool{false, true} {
		t.Run("IndexProcessing="+strconv.FormatBool(ip), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, ip)
			r := f.renewer(ip)
			l := f.acquire("k-renew")
			before := f.raw("k-renew")

			for i := range 3 { // a heartbeat: renew every half lease
				f.clock.Advance(policy.RenewAfter())
				now := f.clock.Now()
				f.inj.ResetCalls()
				renewed, err := r.Renew(ctx, l)
				require.NoError(t, err, "renewal %d", i)
				require.Equal(t, map[string]int{"DynamoDB.UpdateItem": 1}, f.inj.Calls())
				want := l
				want.ExpiresAt = now.Add(policy.Lease)
				require.Equal(t, want, renewed, "only the expiry changes")
				l = renewed

				rec := f.record("k-renew")
				item := f.raw("k-renew")
				require.Equal(t, inbox.StatusProcessing, rec.Status)
				require.Equal(t, l.Token, rec.LeaseToken)
				require.Equal(t, now.Add(policy.Lease).UnixMilli(), rec.LeaseExpiresAt)
				require.Equal(t, inbox.FormatTime(now), rec.LastSeenAt)
				require.Zero(t, rec.Attempts, "a renewal is not an attempt")
				require.Equal(t, before[tables.DefaultLayout().AggregateSK], item[tables.DefaultLayout().AggregateSK])
				if ip {
					require.Equal(t, before[tables.DefaultLayout().AttentionPK], item[tables.DefaultLayout().AttentionPK])
					require.Equal(t, inbox.FormatTime(now.Add(policy.Lease)), rec.GSI2SK, "the attention index follows the lease")
				} else {
					require.Empty(t, rec.GSI2PK)
					require.Empty(t, rec.GSI2SK)
				}
			}

			// The renewed lease holds against a second receiver: in flight.
			f.clock.Advance(policy.Lease)
			d, err := f.gate.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: "k-renew", MessageType: "CaseOpened", RequestHash: "h"}})
			require.NoError(t, err)
			require.Equal(t, gate.InFlight, d.Action)
		})
	}
}

func TestRenewLeaseLost(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *fixture) (mine inbox.Lease)
		status inbox.Status // "" for a missing record
	}{
		{
			name: "taken over by another token",
			setup: func(f *fixture) inbox.Lease {
				mine := f.acquire("k-lost")
				f.clock.Advance(time.Minute)
				f.acquire("k-lost")
				return mine
			},
			status: inbox.StatusProcessing,
		},
		{
			name: "wrong token",
			setup: func(f *fixture) inbox.Lease {
				l := f.acquire("k-lost")
				l.Token = "not-the-token"
				return l
			},
			status: inbox.StatusProcessing,
		},
		{
			name: "already completed under this token",
			setup: func(f *fixture) inbox.Lease {
				l := f.acquire("k-lost")
				c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table}, Now: f.clock.Now})
				require.NoError(f.t, err)
				require.NoError(f.t, c.Commit(context.Background(), l, nil, mutation.Completion{}, 0))
				return l
			},
			status: inbox.StatusCompleted,
		},
		{
			name: "record missing",
			setup: func(f *fixture) inbox.Lease {
				return inbox.Lease{Key: "k-lost", MessageType: "CaseOpened", Token: "t"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			l := tt.setup(f)
			before := f.raw("k-lost")
			f.clock.Advance(time.Second)

			got, err := f.renewer(false).Renew(context.Background(), l)
			require.ErrorIs(t, err, inbox.ErrLeaseLost)
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, err, &lost)
			require.Equal(t, l, got, "the lease comes back unchanged")
			require.Equal(t, l, lost.Lease)
			if tt.status == "" {
				require.Nil(t, lost.Record)
				require.Contains(t, err.Error(), "record missing")
				require.Empty(t, f.raw("k-lost"), "a renewal never creates a record")
				return
			}
			require.NotNil(t, lost.Record, "the failed condition returns the record")
			require.Equal(t, tt.status, lost.Record.Status)
			if tt.status == inbox.StatusCompleted {
				require.Equal(t, l.Token, lost.Record.LeaseToken, "completed by this very lease")
			} else {
				require.NotEqual(t, l.Token, lost.Record.LeaseToken)
			}
			require.Equal(t, before, f.raw("k-lost"), "the record is not touched")
		})
	}
}

func TestNewRenewerValidation(t *testing.T) {
	_, err := stale.NewRenewer(nil, stale.RenewerConfig{Policy: stale.Policy{Lease: time.Millisecond}})
	require.Error(t, err)
	for _, want := range []string{"RenewAPI is required", "RenewerConfig: inbox: Store.Table is required", "Policy.Lease"} {
		require.ErrorContains(t, err, want)
	}
	r, err := stale.NewRenewer(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), stale.RenewerConfig{Store: inbox.Store{Table: "t"}})
	require.NoError(t, err)
	require.NotNil(t, r)
}

func TestPolicyZeroSkew(t *testing.T) {
	p, err := stale.Policy{Skew: stale.Zero}.WithDefaults()
	require.NoError(t, err)
	require.Zero(t, p.Skew)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, p.Expired(now.Add(-time.Nanosecond), now), "without skew a lease is expired right after its end")
	_, err = stale.Policy{Skew: -time.Second}.WithDefaults()
	require.ErrorContains(t, err, "Policy.Skew")
}
