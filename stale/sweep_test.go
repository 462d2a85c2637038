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

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/metrics"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/stale"
)

func (f *fixture) sweeper(useIndex bool, m metrics.Provider) *stale.Sweeper {
	f.t.Helper()
	s, err := stale.NewSweeper(f.ddb, stale.SweepConfig{Store: inbox.Store{Table: f.env.Table, AttentionShards: 4}, Policy: policy, Grace: time.Hour,
		UseIndex: useIndex, PageSize: 2, Metrics: m, Now: f.clock.Now})
	require.NoError(f.t, err)
	return s
}

// The sweeper, through the attention index (workers with IndexProcessing)
// and by scan: it reports expired leases, marks the abandoned ones (expired
// for longer than Grace) FAILED_TERMINAL LEASE_ABANDONED — fenced, listed
// for operators — and a later delivery of the same work takes an abandoned
// record over.
func TestSweep(t *testing.T) {
	for _, useIndex := range []bool{true, false} {
		t.Run("UseIndex="+strconv.FormatBool(useIndex), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, useIndex)
			m := metricstest.New()
			sw := f.sweeper(useIndex, m)

			for i := range 3 {
				f.acquire("k-abandoned-" + strconv.Itoa(i)) // expire 2 h ago
			}
			f.clock.Advance(time.Hour)
			f.acquire("k-expired") // expires 1 h ago
			done := f.acquire("k-done")
			require.NoError(t, f.committer().Commit(ctx, done, nil, mutation.Completion{}, 0))
			f.clock.Advance(time.Hour)
			f.acquire("k-live") // holds a live lease

			// A dry run reports and changes nothing.
			rep, err := sw.Sweep(ctx, stale.SweepOptions{DryRun: true})
			require.NoError(t, err)
			require.Equal(t, map[bool]string{true: "index", false: "scan"}[useIndex], rep.Source)
			require.Equal(t, 4, rep.Read)
			require.Equal(t, 1, rep.Expired)
			require.Equal(t, 3, rep.Abandoned)
			require.Zero(t, rep.Marked)
			require.Len(t, rep.Stuck, 4)
			require.Equal(t, "k-expired", rep.Stuck[3].Record.Key, "longest expired first")
			require.Equal(t, time.Hour-policy.Lease, rep.Stuck[3].ExpiredFor)
			require.Equal(t, "dry run", rep.Stuck[0].Note)
			require.Equal(t, inbox.StatusProcessing, f.record("k-abandoned-0").Status)

			// One at most, then the rest.
			rep, err = sw.Sweep(ctx, stale.SweepOptions{MaxMarks: 1})
			require.NoError(t, err)
			require.Equal(t, 1, rep.Marked)
			require.Equal(t, 2.0, m.Value("ddbworker_stuck_records", "abandoned"), "two abandoned left unmarked")
			rep, err = sw.Sweep(ctx, stale.SweepOptions{})
			require.NoError(t, err)
			require.Equal(t, 2, rep.Marked)
			require.Equal(t, 1, rep.Expired, "an expired lease within Grace is only reported")
			require.Equal(t, 3.0, m.Value("ddbworker_sweep_marked_total"))
			require.Equal(t, 0.0, m.Value("ddbworker_stuck_records", "abandoned"))
			require.Equal(t, 1.0, m.Value("ddbworker_stuck_records", "expired"))

			for i := range 3 {
				rec := f.record("k-abandoned-" + strconv.Itoa(i))
				require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
				require.Equal(t, failure.CodeLeaseAbandoned, rec.FailureCode)
				require.Contains(t, rec.FailureMessage, "no delivery took it over")
				require.Zero(t, rec.LeaseExpiresAt)
				require.Equal(t, inbox.FormatTime(f.clock.Now()), rec.FailedAt)
			}
			require.Equal(t, inbox.StatusProcessing, f.record("k-expired").Status)
			require.Equal(t, inbox.StatusProcessing, f.record("k-live").Status)
			require.Equal(t, inbox.StatusCompleted, f.record("k-done").Status)

			// Operators find them in the attention index.
			reader, err := inbox.NewReader(f.env.DynamoDB, inbox.ReaderConfig{Store: inbox.Store{Table: f.env.Table, AttentionShards: 4}})
			require.NoError(t, err)
			l, err := reader.ListAttention(ctx, inbox.StatusFailedTerminal, inbox.AttentionFilter{Code: failure.CodeLeaseAbandoned}, inbox.Page{})
			require.NoError(t, err)
			require.Len(t, l.Records, 3)

			// Nothing is lost: a redelivery of the same work takes it over.
			d, err := f.gate.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: "k-abandoned-0", MessageType: "CaseOpened", RequestHash: "h"}})
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, d.Action)
			require.Equal(t, 1, d.Lease.Attempt, "an abandoned lease is no business attempt")
			require.NoError(t, f.committer().Commit(ctx, d.Lease, nil, mutation.Completion{}, 0))
			done0 := f.record("k-abandoned-0")
			require.Equal(t, inbox.StatusCompleted, done0.Status)
			require.Equal(t, failure.CodeLeaseAbandoned, done0.FailureCode, "the earlier failure stays as history")
			require.Zero(t, done0.Attempts, "no failure was ever recorded")
			require.Equal(t, 1, done0.Takeovers, "takeovers say how many leases were abandoned")

			// A second sweep finds nothing new to mark.
			rep, err = sw.Sweep(ctx, stale.SweepOptions{})
			require.NoError(t, err)
			require.Zero(t, rep.Marked)
			require.Zero(t, rep.Abandoned)
		})
	}
}

// TestSweepSeesReleasedLeases: a lease given back (inbox.Release, after
// infrastructure trouble or a shutdown) whose message never returns is
// stuck like an expired one: the sweeper reports it and, past Grace, ends
// it LEASE_ABANDONED with a code — by the index and by the scan, for
// releases written now (no token, the release time as the expiry) and by
// workers before 0.9 (leaseExpiresAt 0, the time in lastSeenAt).
func TestSweepSeesReleasedLeases(t *testing.T) {
	for _, useIndex := range []bool{true, false} {
		t.Run("UseIndex="+strconv.FormatBool(useIndex), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, useIndex)
			c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table, AttentionShards: 4, IndexProcessing: useIndex}, Now: f.clock.Now})
			require.NoError(t, err)
			released := f.acquire("k-released")
			require.NoError(t, c.Release(ctx, released, failure.NewRetryable(failure.CodeShutdown, "deploy")))
			// As a worker before 0.9 released it: token kept, expiry 0.
			old := f.acquire("k-released-old")
			upd := map[string]types.AttributeValue{
				":zero": &types.AttributeValueMemberN{Value: "0"}, ":ts": &types.AttributeValueMemberS{Value: inbox.FormatTime(f.clock.Now())},
			}
			_, err = f.env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.env.Table), Key: (inbox.Store{}).Key(old.Key, old.MessageType),
				UpdateExpression: aws.String("SET leaseExpiresAt = :zero, lastSeenAt = :ts, GSI2SK = :ts"), ExpressionAttributeValues: upd})
			require.NoError(t, err)
			f.clock.Advance(2 * time.Hour)

			rep, err := f.sweeper(useIndex, nil).Sweep(ctx, stale.SweepOptions{})
			require.NoError(t, err)
			require.Equal(t, 2, rep.Abandoned, "released leases are stuck records too")
			require.Equal(t, 2, rep.Marked)
			for _, key := range []string{"k-released", "k-released-old"} {
				rec := f.record(key)
				require.Equal(t, inbox.StatusFailedTerminal, rec.Status, key)
				require.Equal(t, failure.CodeLeaseAbandoned, rec.FailureCode, key)
				require.Contains(t, rec.FailureMessage, "given back", key)
			}
			require.Contains(t, f.record("k-released").FailureMessage, failure.CodeShutdown, "the release's reason is kept")

			// A redelivery of the work still takes it over.
			d, err := f.gate.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: "k-released", MessageType: "CaseOpened", RequestHash: "h"}})
			require.NoError(t, err)
			require.Equal(t, gate.Acquired, d.Action)
		})
	}
}

// The mark is fenced: a holder whose renewal lands between the sweeper's
// read and its mark keeps the lease.
func TestSweepFencedByRenewal(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, true)
	l := f.acquire("k-late-renewal")
	f.clock.Advance(3 * time.Hour)
	r, err := stale.NewRenewer(f.env.DynamoDB, stale.RenewerConfig{Store: inbox.Store{Table: f.env.Table, IndexProcessing: true, AttentionShards: 4}, Policy: policy, Now: f.clock.Now})
	require.NoError(t, err)
	f.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindHook, Times: 1,
		Hook: func(ctx context.Context, _ any) {
			_, err := r.Renew(ctx, l)
			require.NoError(t, err)
		}})
	rep, err := f.sweeper(true, nil).Sweep(ctx, stale.SweepOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Abandoned)
	require.Zero(t, rep.Marked)
	require.Contains(t, rep.Stuck[0].Note, "changed meanwhile")
	rec := f.record("k-late-renewal")
	require.Equal(t, inbox.StatusProcessing, rec.Status)
	require.Equal(t, l.Token, rec.LeaseToken)
}

func TestNewSweeperValidation(t *testing.T) {
	_, err := stale.NewSweeper(nil, stale.SweepConfig{Grace: -time.Second, PageSize: 5000, Policy: stale.Policy{Lease: time.Millisecond}})
	require.Error(t, err)
	for _, want := range []string{"SweepAPI is required", "Table is required", "Grace -1s", "PageSize 5000", "Policy.Lease"} {
		require.ErrorContains(t, err, want)
	}
}

func (f *fixture) committer() *mutation.Committer {
	f.t.Helper()
	c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table, AttentionShards: 4}, Now: f.clock.Now})
	require.NoError(f.t, err)
	return c
}
