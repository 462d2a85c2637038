package mutation_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	lease   = 30 * time.Second
	msgType = "CaseEscalated"
	opTWI   = "DynamoDB.TransactWriteItems"
	opUpd   = "DynamoDB.UpdateItem"
	shards  = 16
)

type fixture struct {
	t     *testing.T
	env   *testenv.Env
	inj   *faults.Injector
	ddb   *dynamodb.Client // through the fault injector; assertions read with env.DynamoDB
	clock *testenv.Clock
	gate  *gate.Gate
	c     *mutation.Committer
}

func newFixture(t *testing.T, indexProcessing bool) *fixture {
	t.Helper()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	inj := faults.New(7)
	ddb := dynamodb.NewFromConfig(env.AWS, inj.DynamoDB, func(o *dynamodb.Options) {
		// The SDK's standard retryer without the backoff sleep.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	f := &fixture{t: t, env: env, inj: inj, ddb: ddb, clock: testenv.NewClock()}
	var err error
	f.gate, err = gate.New(ddb, gate.Config{Store: inbox.Store{Table: env.Table, IndexProcessing: indexProcessing, AttentionShards: shards},
		Owner: "worker-1", Now: f.clock.Now, Policy: stale.Policy{Lease: lease}})
	require.NoError(t, err)
	f.c, err = mutation.New(ddb, mutation.Config{Store: inbox.Store{Table: env.Table, IndexProcessing: indexProcessing, AttentionShards: shards}, Now: f.clock.Now})
	require.NoError(t, err)
	return f
}

func work(key string) *gate.Request {
	return &gate.Request{Work: inbox.Work{Key: key, MessageType: msgType, RequestHash: "hash-" + key, SchemaVersion: 1, AggregateType: "Case", AggregateID: "c-1"}}
}

// acquire takes a lease through the real gate and resets the call tally.
func (f *fixture) acquire(key string) inbox.Lease {
	f.t.Helper()
	d, err := f.gate.Acquire(context.Background(), work(key))
	require.NoError(f.t, err)
	require.Equal(f.t, gate.Acquired, d.Action)
	f.inj.ResetCalls()
	return d.Lease
}

// takeover expires the current lease and takes the record over with a new token.
func (f *fixture) takeover(key string) inbox.Lease {
	f.t.Helper()
	f.clock.Advance(time.Minute)
	return f.acquire(key)
}

func dkey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		tables.DefaultLayout().PartitionKey: &types.AttributeValueMemberS{Value: pk},
		tables.DefaultLayout().SortKey:      &types.AttributeValueMemberS{Value: sk},
	}
}

func (f *fixture) raw(key map[string]types.AttributeValue) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.env.Table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(f.t, err)
	return out.Item
}

func (f *fixture) inbox(key string) (*inbox.Record, map[string]types.AttributeValue) {
	f.t.Helper()
	item := f.raw((inbox.Store{}).Key(key, msgType))
	require.NotEmpty(f.t, item)
	rec, err := (inbox.Store{}).Decode(item)
	require.NoError(f.t, err)
	return rec, item
}

// domainItem is an application item living in the same table.
type domainItem struct {
	PK      string `dynamodbav:"PK"`
	SK      string `dynamodbav:"SK"`
	Version int64  `dynamodbav:"version,omitempty"`
	Stage   string `dynamodbav:"stage,omitempty"`
	N       int64  `dynamodbav:"n,omitempty"`
}

func (f *fixture) put(it domainItem) {
	f.t.Helper()
	item, err := attributevalue.MarshalMap(it)
	require.NoError(f.t, err)
	_, err = f.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.env.Table), Item: item})
	require.NoError(f.t, err)
}

// get returns the domain item, or nil when it does not exist.
func (f *fixture) get(pk, sk string) *domainItem {
	f.t.Helper()
	item := f.raw(dkey(pk, sk))
	if len(item) == 0 {
		return nil
	}
	var it domainItem
	require.NoError(f.t, attributevalue.UnmarshalMap(item, &it))
	return &it
}

func has(item map[string]types.AttributeValue, name string) bool { _, ok := item[name]; return ok }

// Domain writes, built with the front door's builders.

func goKey(pk, sk string) ddbworker.Key {
	return ddbworker.Key{tables.DefaultLayout().PartitionKey: pk, tables.DefaultLayout().SortKey: sk}
}

// render is w as the worker hands it to the committer.
func (f *fixture) render(w ddbworker.Write) mutation.Write {
	f.t.Helper()
	m, err := writes.Mutation(w)
	require.NoError(f.t, err)
	return m
}

func (f *fixture) setStage(pk, stage string, version int64, guards ...ddbworker.Guard) mutation.Write {
	return f.render(ddbworker.Update(f.env.Table, goKey(pk, "STATE")).Set("stage", stage).Set("version", version).Guard(guards...))
}

// ledger is a create-only ledger entry; policy, if given, replaces
// CreateOnly's (superseded ALREADY_EXISTS).
func (f *fixture) ledger(pk string, n int, policy ...ddbworker.Policy) mutation.Write {
	g := ddbworker.CreateOnly()
	for _, p := range policy {
		g = g.Else(p)
	}
	return f.render(ddbworker.Put(f.env.Table, goKey(pk, "LEDGER#"+strconv.Itoa(n)), ddbworker.Item{"n": n}).Guard(g))
}

func (f *fixture) count(pk string) mutation.Write {
	return f.render(ddbworker.Update(f.env.Table, goKey(pk, "COUNTER")).Add("n", 1))
}

func TestCommitAppliesWritesAndCompletes(t *testing.T) {
	tests := []struct {
		name        string
		done        mutation.Completion
		wantOutcome string
	}{
		{"default outcome", mutation.Completion{ResultRef: "ledger/1"}, inbox.OutcomeApplied},
		{"handler outcome", mutation.Completion{Outcome: "NO_CHANGE"}, "NO_CHANGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, true)
			f.put(domainItem{PK: "CASE#1", SK: "STATE", Version: 1, Stage: "OPEN"})
			f.put(domainItem{PK: "CUSTOMER#1", SK: "PROFILE"})
			f.put(domainItem{PK: "CASE#1", SK: "DRAFT"})
			l := f.acquire("k-apply")
			_, before := f.inbox("k-apply")
			require.True(t, has(before, tables.DefaultLayout().AttentionPK), "indexed PROCESSING record")
			now := f.clock.Now()

			writes := []mutation.Write{
				f.setStage("CASE#1", "ESCALATED", 2, ddbworker.NewerVersion("version", 2)),
				f.ledger("CASE#1", 1, ddbworker.Fail("DUPLICATE_ENTRY", "")),
				f.render(ddbworker.Check(f.env.Table, goKey("CUSTOMER#1", "PROFILE"), ddbworker.MustExist().Else(ddbworker.Fail("CUSTOMER_NOT_FOUND", "")))),
				f.render(ddbworker.Delete(f.env.Table, goKey("CASE#1", "DRAFT"))),
				f.setStage("CASE#2", "OPEN", 1, ddbworker.NewerVersion("version", 1)), // absent version passes
			}
			require.NoError(t, f.c.Commit(ctx, l, writes, tt.done, 0))
			require.Equal(t, map[string]int{opTWI: 1}, f.inj.Calls(), "one transaction")

			require.Equal(t, &domainItem{PK: "CASE#1", SK: "STATE", Version: 2, Stage: "ESCALATED"}, f.get("CASE#1", "STATE"))
			require.Equal(t, &domainItem{PK: "CASE#1", SK: "LEDGER#1", N: 1}, f.get("CASE#1", "LEDGER#1"))
			require.Nil(t, f.get("CASE#1", "DRAFT"))
			require.Equal(t, &domainItem{PK: "CASE#2", SK: "STATE", Version: 1, Stage: "OPEN"}, f.get("CASE#2", "STATE"))

			rec, item := f.inbox("k-apply")
			ts := inbox.FormatTime(now)
			require.Equal(t, inbox.StatusCompleted, rec.Status)
			require.Equal(t, tt.wantOutcome, rec.Outcome)
			require.Equal(t, tt.done.ResultRef, rec.ResultRef)
			require.Equal(t, ts, rec.CompletedAt)
			require.Equal(t, ts, rec.LastActivity())
			require.GreaterOrEqual(t, rec.TTL, now.Add(35*24*time.Hour).Unix(), "COMPLETED must outlive every redelivery")
			require.Equal(t, l.Token, rec.LeaseToken, "the token stays: a late Fail of the same lease sees COMPLETED")
			require.Zero(t, rec.Attempts, "a commit counts no failed attempt")
			for _, a := range []string{tables.DefaultLayout().AttentionPK, tables.DefaultLayout().AttentionSK, attr.LeaseExpiresAt} {
				require.False(t, has(item, a), "%s must be removed on completion", a)
			}
			require.Equal(t, before[tables.DefaultLayout().AggregatePK], item[tables.DefaultLayout().AggregatePK])
			require.Equal(t, before[tables.DefaultLayout().AggregateSK], item[tables.DefaultLayout().AggregateSK])
		})
	}
}

func TestCommitLeaseLost(t *testing.T) {
	tests := []struct {
		name          string
		setup         func(f *fixture) inbox.Lease // returns the stale lease
		wantStatus    inbox.Status                 // "" when the record is missing
		wantCompleted bool
	}{
		{
			name: "another token holds PROCESSING",
			setup: func(f *fixture) inbox.Lease {
				old := f.acquire("k-lost")
				f.takeover("k-lost")
				return old
			},
			wantStatus: inbox.StatusProcessing,
		},
		{
			name: "another token completed it",
			setup: func(f *fixture) inbox.Lease {
				old := f.acquire("k-lost")
				require.NoError(f.t, f.c.Commit(context.Background(), f.takeover("k-lost"), nil, mutation.Completion{}, 0))
				return old
			},
			wantStatus: inbox.StatusCompleted, wantCompleted: true,
		},
		{
			name: "this lease already completed it (ambiguous earlier commit)",
			setup: func(f *fixture) inbox.Lease {
				l := f.acquire("k-lost")
				require.NoError(f.t, f.c.Commit(context.Background(), l, []mutation.Write{f.count("CASE#8")}, mutation.Completion{}, 1))
				return l
			},
			wantStatus: inbox.StatusCompleted, wantCompleted: true,
		},
		{
			name: "the lease was released by a failure",
			setup: func(f *fixture) inbox.Lease {
				l := f.acquire("k-lost")
				require.NoError(f.t, f.c.Fail(context.Background(), l, failure.NewRetryable("DOWNSTREAM_DOWN", "x")))
				return l
			},
			wantStatus: inbox.StatusFailedRetryable,
		},
		{
			name: "the record does not exist",
			setup: func(f *fixture) inbox.Lease {
				return inbox.Lease{Key: "k-lost", MessageType: msgType, Token: "never-acquired-" + gate.NewToken()}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, false)
			old := tt.setup(f)
			rawBefore := f.raw((inbox.Store{}).Key("k-lost", msgType))

			err := f.c.Commit(ctx, old, []mutation.Write{f.count("CASE#9"), f.ledger("CASE#9", 1)}, mutation.Completion{}, 0)
			require.ErrorIs(t, err, inbox.ErrLeaseLost)
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, err, &lost)
			require.Equal(t, tt.wantCompleted, lost.Completed())
			require.Equal(t, old, lost.Lease)
			if tt.wantStatus == "" {
				require.Nil(t, lost.Record)
				require.Contains(t, err.Error(), "missing")
			} else {
				require.NotNil(t, lost.Record)
				require.Equal(t, tt.wantStatus, lost.Record.Status)
				require.Contains(t, err.Error(), string(tt.wantStatus))
			}
			require.Nil(t, f.get("CASE#9", "COUNTER"), "no domain write applies without the lease")
			require.Nil(t, f.get("CASE#9", "LEDGER#1"))
			require.Equal(t, rawBefore, f.raw((inbox.Store{}).Key("k-lost", msgType)), "the record is not touched")
		})
	}
}

func TestCommitGuardFailures(t *testing.T) {
	caseNotFound := ddbworker.MustExist().Else(ddbworker.Fail("CASE_NOT_FOUND", "case c-1 does not exist"))
	tests := []struct {
		name    string
		seed    []domainItem
		write   func(f *fixture) mutation.Write
		verdict mutation.Verdict
		oldSet  bool
	}{
		{
			name: "MustExist on a missing item: its policy",
			write: func(f *fixture) mutation.Write {
				return f.setStage("CASE#1", "ESCALATED", 2, caseNotFound, ddbworker.ExpectVersion("version", 1))
			},
			verdict: mutation.Verdict{Kind: mutation.Fail, Code: "CASE_NOT_FOUND", Message: "case c-1 does not exist"},
		},
		{
			name: "MustExist and ExpectVersion on a present item: the version's guard decides",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "OPEN"}},
			write: func(f *fixture) mutation.Write {
				return f.setStage("CASE#1", "ESCALATED", 4, caseNotFound, ddbworker.ExpectVersion("version", 3))
			},
			verdict: mutation.Verdict{Kind: mutation.Retry}, oldSet: true,
		},
		{
			name: "CreateOnly on an existing item",
			seed: []domainItem{{PK: "CASE#1", SK: "LEDGER#1", N: 1}},
			write: func(f *fixture) mutation.Write {
				return f.ledger("CASE#1", 1, ddbworker.Fail("DUPLICATE_ENTRY", ""))
			},
			verdict: mutation.Verdict{Kind: mutation.Fail, Code: "DUPLICATE_ENTRY"}, oldSet: true,
		},
		{
			name: "NewerVersion with an older version: superseded",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "CLOSED"}},
			write: func(f *fixture) mutation.Write {
				return f.setStage("CASE#1", "ESCALATED", 3, ddbworker.NewerVersion("version", 3))
			},
			verdict: mutation.Verdict{Kind: mutation.Supersede}, oldSet: true, // the outcome defaults to SUPERSEDED when judged
		},
		{
			name: "NewerVersion with the same version: superseded, state never rolls back",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "CLOSED"}},
			write: func(f *fixture) mutation.Write {
				return f.setStage("CASE#1", "ESCALATED", 5, ddbworker.NewerVersion("version", 5).Else(ddbworker.Supersede("STALE_VERSION")))
			},
			verdict: mutation.Verdict{Kind: mutation.Supersede, Outcome: "STALE_VERSION"}, oldSet: true,
		},
		{
			name: "ExpectVersion mismatch: retry",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "OPEN"}},
			write: func(f *fixture) mutation.Write {
				return f.setStage("CASE#1", "ESCALATED", 5, ddbworker.ExpectVersion("version", 4))
			},
			verdict: mutation.Verdict{Kind: mutation.Retry}, oldSet: true,
		},
		{
			name: "a write without a judge: retry",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "OPEN"}},
			write: func(f *fixture) mutation.Write {
				w := f.setStage("CASE#1", "ESCALATED", 5, ddbworker.ExpectVersion("version", 4).Else(ddbworker.Fail("X", "")))
				w.Judge = nil
				return w
			},
			verdict: mutation.Verdict{Kind: mutation.Retry}, oldSet: true,
		},
		{
			name: "a judge that finds no failing guard: retry (the item changed since)",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "OPEN"}},
			write: func(f *fixture) mutation.Write {
				w := f.setStage("CASE#1", "ESCALATED", 5, ddbworker.ExpectVersion("version", 4).Else(ddbworker.Fail("X", "")))
				w.Judge = func(map[string]types.AttributeValue) (mutation.Verdict, bool) {
					return mutation.Verdict{Kind: mutation.Fail, Code: "X"}, false
				}
				return w
			},
			verdict: mutation.Verdict{Kind: mutation.Retry}, oldSet: true,
		},
		{
			name: "ConditionCheck on a missing item",
			write: func(f *fixture) mutation.Write {
				return f.render(ddbworker.Check(f.env.Table, goKey("CUSTOMER#1", "PROFILE"), ddbworker.MustExist().Else(ddbworker.Fail("CUSTOMER_NOT_FOUND", ""))))
			},
			verdict: mutation.Verdict{Kind: mutation.Fail, Code: "CUSTOMER_NOT_FOUND"},
		},
		{
			name: "guarded Delete",
			seed: []domainItem{{PK: "CASE#1", SK: "STATE", Version: 5, Stage: "OPEN"}},
			write: func(f *fixture) mutation.Write {
				return f.render(ddbworker.Delete(f.env.Table, goKey("CASE#1", "STATE")).Guard(ddbworker.ExpectVersion("version", 6)))
			},
			verdict: mutation.Verdict{Kind: mutation.Retry}, oldSet: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, false)
			for _, it := range tt.seed {
				f.put(it)
			}
			l := f.acquire("k-guard")
			inboxBefore := f.raw((inbox.Store{}).Key("k-guard", msgType))
			stateBefore := f.raw(dkey("CASE#1", "STATE"))

			writes := []mutation.Write{f.ledger("CASE#2", 7), tt.write(f), f.count("CASE#2")}
			err := f.c.Commit(ctx, l, writes, mutation.Completion{}, 0)
			require.ErrorIs(t, err, mutation.ErrGuard)
			var ge *mutation.GuardError
			require.ErrorAs(t, err, &ge)
			require.Equal(t, 1, ge.Index)
			require.Equal(t, tt.verdict, ge.Verdict)
			if tt.oldSet {
				require.NotEmpty(t, ge.Old, "the failed condition returns the item as it was")
				require.Equal(t, &types.AttributeValueMemberS{Value: tt.seed[0].SK}, ge.Old[tables.DefaultLayout().SortKey])
			} else {
				require.Empty(t, ge.Old)
			}

			// Nothing applied: no domain write, the inbox still PROCESSING under l.
			require.Nil(t, f.get("CASE#2", "LEDGER#7"))
			require.Nil(t, f.get("CASE#2", "COUNTER"))
			require.Equal(t, stateBefore, f.raw(dkey("CASE#1", "STATE")))
			require.Equal(t, inboxBefore, f.raw((inbox.Store{}).Key("k-guard", msgType)))
		})
	}
}

// TestGuardsJudgedAsDynamoDBEvaluates: a write's judge and DynamoDB agree
// on the item as it was. Each case seeds an item, asks the judge about it,
// and commits the guarded write through DynamoDB Local: the commit applies
// exactly when the judge finds no failing guard, and a cancelled commit's
// verdict (the judge asked about the item DynamoDB returned) names the
// guard DynamoDB failed. The judge before this test misread paths, typed
// equality and numbers that are not int64: "was" marks the verdict it gave
// such a commit.
func TestGuardsJudgedAsDynamoDBEvaluates(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	fail := func(code string) ddbworker.Policy { return ddbworker.Fail(code, "") }
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	doc := func(kv ...any) types.AttributeValue {
		m := map[string]types.AttributeValue{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return &types.AttributeValueMemberM{Value: m}
	}
	for i, tc := range []struct {
		name   string
		seed   types.AttributeValue // an M of the item's attributes besides its key; nil: no item
		guards []ddbworker.Guard
		want   string // the code of the guard DynamoDB fails; "": the commit applies
	}{
		{"no item: must exist", nil, []ddbworker.Guard{ddbworker.MustExist().Else(fail("GONE"))}, "GONE"},
		{"no item: newer version holds", nil, []ddbworker.Guard{ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, ""},
		{"nested member differs (was: rerun)", doc("meta", doc("owner", str("bob")), "meta.owner", str("ann")),
			[]ddbworker.Guard{ddbworker.Equal("meta.owner", "ann").Else(fail("OWNER"))}, "OWNER"},
		{"nested member holds, the next guard fails (was: OWNER)", doc("meta", doc("owner", str("ann")), "v", num("2")),
			[]ddbworker.Guard{ddbworker.Equal("meta.owner", "ann").Else(fail("OWNER")), ddbworker.ExpectVersion("v", 1).Else(fail("VERSION"))}, "VERSION"},
		{"list element", doc("tags", &types.AttributeValueMemberL{Value: []types.AttributeValue{str("x"), str("y")}}),
			[]ddbworker.Guard{ddbworker.Equal("tags[1]", "y").Else(fail("TAG"))}, ""},
		{"a number is not its string (was: rerun)", doc("n", str("1")), []ddbworker.Guard{ddbworker.Equal("n", 1).Else(fail("N"))}, "N"},
		{"map member of another type (was: rerun)", doc("m", doc("k", str("1"))), []ddbworker.Guard{ddbworker.Equal("m", map[string]any{"k": 1}).Else(fail("M"))}, "M"},
		{"map, numbers by value", doc("m", doc("k", num("1.0"))), []ddbworker.Guard{ddbworker.Equal("m", map[string]any{"k": 1}).Else(fail("M"))}, ""},
		{"a list is not a set (was: rerun)", doc("tags", &types.AttributeValueMemberSS{Value: []string{"x", "y"}}),
			[]ddbworker.Guard{ddbworker.Equal("tags", []string{"x", "y"}).Else(fail("TAGS"))}, "TAGS"},
		{"sets in any order", doc("tags", &types.AttributeValueMemberSS{Value: []string{"x", "y"}}),
			[]ddbworker.Guard{ddbworker.Equal("tags", &types.AttributeValueMemberSS{Value: []string{"y", "x"}}).Else(fail("TAGS"))}, ""},
		{"newer version on a string (was: rerun)", doc("v", str("9")),
			[]ddbworker.Guard{ddbworker.MustExist().Else(fail("GONE")), ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, "OLD"},
		{"newer version on a higher fraction (was: rerun)", doc("v", num("3.5")),
			[]ddbworker.Guard{ddbworker.MustExist().Else(fail("GONE")), ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, "OLD"},
		{"newer version on a lower fraction", doc("v", num("2.5")), []ddbworker.Guard{ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, ""},
		{"newer version beyond int64 (was: rerun)", doc("v", num("12345678901234567890")), []ddbworker.Guard{ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, "OLD"},
		{"newer version on NULL (was: rerun)", doc("v", &types.AttributeValueMemberNULL{Value: true}), []ddbworker.Guard{ddbworker.NewerVersion("v", 3).Else(fail("OLD"))}, "OLD"},
		{"newer version without the attribute, the next guard fails", doc("s", str("closed")),
			[]ddbworker.Guard{ddbworker.NewerVersion("v", 3).Else(fail("OLD")), ddbworker.Equal("s", "open").Else(fail("CLOSED"))}, "CLOSED"},
		{"expect version written 3.0", doc("v", num("3.0")), []ddbworker.Guard{ddbworker.ExpectVersion("v", 3).Else(fail("VERSION"))}, ""},
		{"newer than: no item", nil, []ddbworker.Guard{ddbworker.NewerThan("at", "2025-06-01T12:00:00.000Z").Else(fail("STALE"))}, ""},
		{"newer than: no attribute", doc("s", str("open")), []ddbworker.Guard{ddbworker.NewerThan("at", "2025-06-01T12:00:00.000Z").Else(fail("STALE"))}, ""},
		{"newer than: an older timestamp", doc("at", str("2025-06-01T11:59:59.999Z")), []ddbworker.Guard{ddbworker.NewerThan("at", "2025-06-01T12:00:00.000Z").Else(fail("STALE"))}, ""},
		{"newer than: the same timestamp", doc("at", str("2025-06-01T12:00:00.000Z")), []ddbworker.Guard{ddbworker.NewerThan("at", "2025-06-01T12:00:00.000Z").Else(fail("STALE"))}, "STALE"},
		{"newer than: a newer timestamp", doc("at", str("2025-06-01T12:00:00.001Z")), []ddbworker.Guard{ddbworker.NewerThan("at", "2025-06-01T12:00:00.000Z").Else(fail("STALE"))}, "STALE"},
		{"newer than: strings byte by byte", doc("at", str("b")), []ddbworker.Guard{ddbworker.NewerThan("at", "ab").Else(fail("STALE"))}, "STALE"},
		{"newer than: a lower number", doc("at", num("1748779199999")), []ddbworker.Guard{ddbworker.NewerThan("at", int64(1748779200000)).Else(fail("STALE"))}, ""},
		{"newer than: a number by value", doc("at", num("10")), []ddbworker.Guard{ddbworker.NewerThan("at", 9.5).Else(fail("STALE"))}, "STALE"},
		{"newer than: a number is never lower than a string", doc("at", num("1")), []ddbworker.Guard{ddbworker.NewerThan("at", "2").Else(fail("STALE"))}, "STALE"},
		{"newer than: a binary", doc("at", &types.AttributeValueMemberB{Value: []byte{1, 2}}), []ddbworker.Guard{ddbworker.NewerThan("at", []byte{1, 3}).Else(fail("STALE"))}, ""},
		{"newer than: nested", doc("meta", doc("at", str("2025-06-02"))), []ddbworker.Guard{ddbworker.NewerThan("meta.at", "2025-06-01").Else(fail("STALE"))}, "STALE"},
	} {
		pk := "JUDGE#" + strconv.Itoa(i)
		var seeded map[string]types.AttributeValue
		if tc.seed != nil {
			seeded = tc.seed.(*types.AttributeValueMemberM).Value
			maps.Copy(seeded, dkey(pk, "STATE"))
			_, err := f.env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.env.Table), Item: seeded})
			require.NoError(t, err, tc.name)
		}
		w := f.render(ddbworker.Update(f.env.Table, goKey(pk, "STATE")).Set("touched", true).Guard(tc.guards...))
		v, failed := w.Judge(seeded)
		require.Equal(t, tc.want != "", failed, "%s: the judge on the seeded item", tc.name)
		err := f.c.Commit(ctx, f.acquire("k-judge-"+strconv.Itoa(i)), []mutation.Write{w}, mutation.Completion{}, 0)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			require.True(t, has(f.raw(dkey(pk, "STATE")), "touched"), tc.name)
			continue
		}
		var ge *mutation.GuardError
		require.ErrorAs(t, err, &ge, tc.name)
		require.Equal(t, mutation.Verdict{Kind: mutation.Fail, Code: tc.want}, ge.Verdict, tc.name)
		require.Equal(t, v, ge.Verdict, "%s: the judge on the seeded item and on the item DynamoDB returned", tc.name)
	}
}

// TestCommitLeaseLostWinsOverGuard: the inbox fence and a domain guard both
// fail; the lease loss decides (the guard's verdict belongs to a holder that
// no longer exists), and nothing applies.
func TestCommitLeaseLostWinsOverGuard(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	old := f.acquire("k-both")
	current := f.takeover("k-both")
	before := f.raw((inbox.Store{}).Key("k-both", msgType))
	w := f.setStage("CASE#1", "ESCALATED", 2, ddbworker.MustExist().Else(ddbworker.Supersede("")))
	err := f.c.Commit(ctx, old, []mutation.Write{w, f.count("CASE#2")}, mutation.Completion{}, 0)
	require.NotErrorIs(t, err, mutation.ErrGuard)
	var lost *inbox.LeaseLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, current.Token, lost.Record.LeaseToken)
	require.Nil(t, f.get("CASE#1", "STATE"))
	require.Nil(t, f.get("CASE#2", "COUNTER"))
	require.Equal(t, before, f.raw((inbox.Store{}).Key("k-both", msgType)))
}

func TestCommitTransactionConflict(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	l := f.acquire("k-conflict")
	before := f.raw((inbox.Store{}).Key("k-conflict", msgType))
	f.inj.Add(faults.Rule{Operation: "TransactWriteItems", Kind: faults.KindConflict, Times: 1})
	writes := []mutation.Write{f.count("CASE#1"), f.ledger("CASE#1", 1)}

	err := f.c.Commit(ctx, l, writes, mutation.Completion{}, 0)
	require.Equal(t, 1, f.inj.Fired()[faults.KindConflict])
	fe, ok := failure.As(err)
	require.True(t, ok, "want *failure.Error, got %T: %v", err, err)
	require.Equal(t, failure.Retryable, fe.Kind)
	require.Equal(t, failure.CodeTransactionConflict, fe.Code)
	require.ErrorIs(t, err, failure.ErrRetryable)
	require.NotErrorIs(t, err, inbox.ErrLeaseLost)
	require.NotErrorIs(t, err, mutation.ErrGuard)

	reasons := []struct {
		i    int
		want string
		ok   bool
	}{
		{0, "TransactionConflict", true},
		{1, "None", true},
		{2, "None", true}, // the inbox flip
		{3, "", false},
		{-1, "", false},
	}
	for _, r := range reasons {
		got, ok := mutation.CancellationReason(err, r.i)
		require.Equal(t, r.ok, ok, "reason %d", r.i)
		require.Equal(t, r.want, got, "reason %d", r.i)
	}
	require.Nil(t, f.get("CASE#1", "COUNTER"))
	require.Equal(t, before, f.raw((inbox.Store{}).Key("k-conflict", msgType)))

	// Retryable indeed: the same commit goes through once the conflict is gone.
	require.NoError(t, f.c.Commit(ctx, l, writes, mutation.Completion{}, 0))
	require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
}

func TestCancellationReasonOfOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("boom"), failure.NewRetryable("X", "y"), &types.TransactionCanceledException{}} {
		got, ok := mutation.CancellationReason(err, 0)
		require.False(t, ok)
		require.Empty(t, got)
	}
}

func TestCommitThrottled(t *testing.T) {
	tests := []struct {
		name    string
		times   int
		applied bool
	}{
		{"short burst: the SDK retries through it", 2, true},
		{"beyond the SDK's retries: retryable THROTTLED", 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, false)
			l := f.acquire("k-throttle")
			f.inj.Add(faults.Rule{Operation: "TransactWriteItems", Kind: faults.KindThrottle, Times: tt.times})
			err := f.c.Commit(ctx, l, []mutation.Write{f.count("CASE#1")}, mutation.Completion{}, 0)
			require.Equal(t, map[string]int{opTWI: 1}, f.inj.Calls(), "SDK retries are attempts of one call")
			rec, _ := f.inbox("k-throttle")
			if tt.applied {
				require.NoError(t, err)
				require.Equal(t, tt.times, f.inj.Fired()[faults.KindThrottle])
				require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
				require.Equal(t, inbox.StatusCompleted, rec.Status)
				return
			}
			require.Error(t, err)
			fe := failure.Classify(err, failure.CodeServiceUnavailable)
			require.Equal(t, failure.Retryable, fe.Kind)
			require.Equal(t, failure.CodeThrottled, fe.Code)
			require.Nil(t, f.get("CASE#1", "COUNTER"))
			require.Equal(t, inbox.StatusProcessing, rec.Status)
		})
	}
}

// TestCommitLostResponseAppliesOnce: the transaction is applied, its
// response lost; the SDK retries with the same ClientRequestToken and the
// domain effect happens once.
func TestCommitLostResponseAppliesOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	l := f.acquire("k-ambiguous")
	f.inj.Add(faults.Rule{Operation: "TransactWriteItems", Kind: faults.KindLostResponse, Times: 1})
	writes := []mutation.Write{f.count("CASE#1")}

	require.NoError(t, f.c.Commit(ctx, l, writes, mutation.Completion{}, 0))
	require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse], "the fault must have fired")
	require.Equal(t, map[string]int{opTWI: 1}, f.inj.Calls())
	require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N, "applied exactly once")
	rec, _ := f.inbox("k-ambiguous")
	require.Equal(t, inbox.StatusCompleted, rec.Status)

	// The caller replays the identical commit (e.g. after giving up on a
	// timeout): same token, same request — still once.
	require.NoError(t, f.c.Commit(ctx, l, writes, mutation.Completion{}, 0))
	require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)

	// A replay with a fresh request token is fenced by the inbox instead.
	err := f.c.Commit(ctx, l, writes, mutation.Completion{}, 1)
	var lost *inbox.LeaseLostError
	require.ErrorAs(t, err, &lost)
	require.True(t, lost.Completed())
	require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
}

func TestRequestToken(t *testing.T) {
	base := inbox.Lease{Key: "k-1", MessageType: "CaseOpened", Token: "aaaa"}
	tok := mutation.RequestToken(base, 0)
	require.Len(t, tok, 36, "ClientRequestToken allows 1..36 characters")
	require.Equal(t, tok, mutation.RequestToken(base, 0), "deterministic")
	require.Equal(t, strings.ToLower(tok), tok)
	require.NotContains(t, tok, " ")

	other := func(mod func(l *inbox.Lease)) inbox.Lease { l := base; mod(&l); return l }
	tests := []struct {
		name    string
		l       inbox.Lease
		attempt int
	}{
		{"next attempt", base, 1},
		{"other token", other(func(l *inbox.Lease) { l.Token = "bbbb" }), 0},
		{"other key", other(func(l *inbox.Lease) { l.Key = "k-2" }), 0},
		{"other type", other(func(l *inbox.Lease) { l.MessageType = "CaseClosed" }), 0},
		{"fields do not run together", inbox.Lease{Key: "k-1C", MessageType: "aseOpened", Token: "aaaa"}, 0},
	}
	seen := map[string]string{tok: "base"}
	for _, tt := range tests {
		got := mutation.RequestToken(tt.l, tt.attempt)
		require.Len(t, got, 36)
		require.NotContains(t, seen, got, "%s collides with %s", tt.name, seen[got])
		seen[got] = tt.name
	}
	// Owner, expiry and attempts of the lease do not change the token: an
	// SDK retry of the same commit must reuse it.
	require.Equal(t, tok, mutation.RequestToken(other(func(l *inbox.Lease) { l.Owner, l.Attempt, l.ExpiresAt = "w-2", 3, time.Now() }), 0))
}

func TestCommitValidationException(t *testing.T) {
	tests := []struct {
		name   string
		writes func(f *fixture) []mutation.Write
	}{
		{"two writes on one item", func(f *fixture) []mutation.Write {
			return []mutation.Write{f.count("CASE#1"), f.count("CASE#1")}
		}},
		{"a domain write on the inbox record", func(f *fixture) []mutation.Write {
			var key ddbworker.Key
			require.NoError(f.t, attributevalue.UnmarshalMap((inbox.Store{}).Key("k-invalid", msgType), &key))
			return []mutation.Write{f.render(ddbworker.Update(f.env.Table, key).Set("note", "x"))}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			l := f.acquire("k-invalid")
			before := f.raw((inbox.Store{}).Key("k-invalid", msgType))
			err := f.c.Commit(context.Background(), l, tt.writes(f), mutation.Completion{}, 0)
			fe, ok := failure.As(err)
			require.True(t, ok, "want *failure.Error, got %T: %v", err, err)
			require.Equal(t, failure.Terminal, fe.Kind)
			require.Equal(t, failure.CodeInvalidTransaction, fe.Code)
			require.ErrorIs(t, err, failure.ErrTerminal)
			require.True(t, failure.IsValidation(err))
			require.Nil(t, f.get("CASE#1", "COUNTER"))
			require.Equal(t, before, f.raw((inbox.Store{}).Key("k-invalid", msgType)))
		})
	}
}

func TestCommitInvalidWritesMakeNoCall(t *testing.T) {
	f := newFixture(t, false)
	l := f.acquire("k-invalid-result")
	many := make([]mutation.Write, mutation.MaxWrites+1)
	for i := range many {
		many[i] = f.ledger("CASE#1", i)
	}
	put := f.ledger("CASE#1", 1)
	twoActions := put
	twoActions.Item.Delete = &types.Delete{TableName: aws.String(f.env.Table), Key: dkey("CASE#1", "X")}
	tests := []struct {
		name   string
		writes []mutation.Write
		want   string
	}{
		{"more than 99 writes", many, "100 domain writes, at most 99"},
		{"a write without an action", []mutation.Write{put, {}}, "write 1: mutation: invalid writes: it sets 0 of Put, Update, Delete and ConditionCheck, not exactly one"},
		{"a write with two actions", []mutation.Write{twoActions}, "write 0: mutation: invalid writes: it sets 2 of"},
	}
	rec := inbox.NewRecord(&work("k-fused-invalid").Work, f.clock.Now())
	rec.LeaseToken = "t"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, commit := range map[string]func() error{
				"Commit":      func() error { return f.c.Commit(context.Background(), l, tt.writes, mutation.Completion{}, 0) },
				"CommitFused": func() error { return f.c.CommitFused(context.Background(), rec, tt.writes, mutation.Completion{}, 0) },
			} {
				err := commit()
				fe, ok := failure.As(err)
				require.True(t, ok, "%s: want *failure.Error, got %T", name, err)
				require.Equal(t, failure.Terminal, fe.Kind, name)
				require.Equal(t, failure.CodeInvalidResult, fe.Code, name)
				require.ErrorIs(t, err, mutation.ErrInvalidWrite, name)
				require.ErrorContains(t, err, tt.want, name)
			}
			require.Empty(t, f.inj.Calls(), "rejected before any DynamoDB call")
		})
	}
}

// TestCommitMaxWrites: 99 domain writes plus the inbox flip is DynamoDB's
// limit of 100 actions, and it goes through.
func TestCommitMaxWrites(t *testing.T) {
	f := newFixture(t, false)
	l := f.acquire("k-99")
	writes := make([]mutation.Write, mutation.MaxWrites)
	for i := range writes {
		writes[i] = f.ledger("CASE#1", i)
	}
	require.NoError(t, f.c.Commit(context.Background(), l, writes, mutation.Completion{}, 0))
	require.NotNil(t, f.get("CASE#1", "LEDGER#98"))
	rec, _ := f.inbox("k-99")
	require.Equal(t, inbox.StatusCompleted, rec.Status)
}

// newRec is a fused run's fresh record. Tokens are random like the gate's:
// DynamoDB keeps ClientRequestTokens per account, not per table, so fixed
// tokens would collide across tests.
func newRec(f *fixture, key, token string) *inbox.Record {
	r := inbox.NewRecord(&work(key).Work, f.clock.Now())
	r.LeaseToken, r.LeaseOwner = token+"-"+gate.NewToken(), "worker-1"
	return r
}

func TestCommitFused(t *testing.T) {

	t.Run("fresh: record written COMPLETED in the same transaction", func(t *testing.T) {
		f := newFixture(t, false)
		now := f.clock.Now()
		rec := newRec(f, "k-fused", "tok-1")
		require.NoError(t, f.c.CommitFused(context.Background(), rec, []mutation.Write{f.count("CASE#1")}, mutation.Completion{ResultRef: "r-1"}, 0))
		require.Equal(t, map[string]int{opTWI: 1}, f.inj.Calls(), "one round trip")
		require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)

		got, item := f.inbox("k-fused")
		require.Equal(t, inbox.StatusCompleted, got.Status)
		require.Zero(t, got.Attempts)
		require.Equal(t, 1, got.Deliveries)
		require.Equal(t, inbox.OutcomeApplied, got.Outcome)
		require.Equal(t, "r-1", got.ResultRef)
		require.Equal(t, rec.LeaseToken, got.LeaseToken)
		require.Equal(t, inbox.FormatTime(now), got.CompletedAt)
		require.GreaterOrEqual(t, got.TTL, now.Add(35*24*time.Hour).Unix())
		require.Equal(t, "hash-k-fused", got.RequestHash)
		require.Equal(t, inbox.AggregatePK("Case", "c-1"), got.GSI1PK)
		for _, a := range []string{tables.DefaultLayout().AttentionPK, tables.DefaultLayout().AttentionSK, attr.LeaseExpiresAt} {
			require.False(t, has(item, a), a)
		}
		require.Empty(t, rec.Status, "the caller's record is not modified")
	})

	existing := []struct {
		name   string
		setup  func(f *fixture)
		status inbox.Status
		token  string
	}{
		{"PROCESSING under the gate", func(f *fixture) { f.acquire("k-fused") }, inbox.StatusProcessing, ""},
		{"COMPLETED by another token", func(f *fixture) {
			require.NoError(f.t, f.c.CommitFused(context.Background(), newRec(f, "k-fused", "tok-other"), nil, mutation.Completion{}, 0))
		}, inbox.StatusCompleted, "tok-other-"},
	}
	for _, tt := range existing {
		t.Run("existing record: "+tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			tt.setup(f)
			before := f.raw((inbox.Store{}).Key("k-fused", msgType))
			err := f.c.CommitFused(context.Background(), newRec(f, "k-fused", "tok-1"), []mutation.Write{f.count("CASE#1")}, mutation.Completion{}, 0)
			require.ErrorIs(t, err, mutation.ErrExists)
			var ee *mutation.ExistsError
			require.ErrorAs(t, err, &ee)
			require.NotNil(t, ee.Record)
			require.Equal(t, tt.status, ee.Record.Status)
			require.Equal(t, "k-fused", ee.Record.Key)
			if tt.token != "" {
				require.True(t, strings.HasPrefix(ee.Record.LeaseToken, tt.token), ee.Record.LeaseToken)
			}
			require.Nil(t, f.get("CASE#1", "COUNTER"), "no domain write applies")
			require.Equal(t, before, f.raw((inbox.Store{}).Key("k-fused", msgType)))
		})
	}

	t.Run("own earlier commit under another request token is success", func(t *testing.T) {
		f := newFixture(t, false)
		rec := newRec(f, "k-fused", "tok-1")
		writes := []mutation.Write{f.count("CASE#1")}
		require.NoError(t, f.c.CommitFused(context.Background(), rec, writes, mutation.Completion{}, 0))
		require.NoError(t, f.c.CommitFused(context.Background(), rec, writes, mutation.Completion{}, 1))
		require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
	})

	t.Run("lost response: applied once", func(t *testing.T) {
		f := newFixture(t, false)
		f.inj.Add(faults.Rule{Operation: "TransactWriteItems", Kind: faults.KindLostResponse, Times: 1})
		require.NoError(t, f.c.CommitFused(context.Background(), newRec(f, "k-fused", "tok-1"), []mutation.Write{f.count("CASE#1")}, mutation.Completion{}, 0))
		require.Equal(t, 1, f.inj.Fired()[faults.KindLostResponse])
		require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
	})

	t.Run("domain guard failure", func(t *testing.T) {
		f := newFixture(t, false)
		w := f.setStage("CASE#1", "ESCALATED", 2, ddbworker.MustExist().Else(ddbworker.Fail("CASE_NOT_FOUND", "")))
		err := f.c.CommitFused(context.Background(), newRec(f, "k-fused", "tok-1"), []mutation.Write{f.count("CASE#2"), w}, mutation.Completion{}, 0)
		var ge *mutation.GuardError
		require.ErrorAs(t, err, &ge)
		require.Equal(t, 1, ge.Index)
		require.Equal(t, "CASE_NOT_FOUND", ge.Verdict.Code)
		require.Empty(t, f.raw((inbox.Store{}).Key("k-fused", msgType)), "no inbox record either")
		require.Nil(t, f.get("CASE#2", "COUNTER"))
	})
}

func TestSupersede(t *testing.T) {
	tests := []struct {
		name    string
		outcome string
		want    string
	}{
		{"default outcome", "", inbox.OutcomeSuperseded},
		{"guard's outcome", "STALE_VERSION", "STALE_VERSION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, true)
			l := f.acquire("k-super")
			require.NoError(t, f.c.Supersede(ctx, l, tt.outcome))
			require.Equal(t, map[string]int{opUpd: 1}, f.inj.Calls())
			rec, item := f.inbox("k-super")
			require.Equal(t, inbox.StatusCompleted, rec.Status)
			require.Equal(t, tt.want, rec.Outcome)
			require.Equal(t, inbox.FormatTime(f.clock.Now()), rec.CompletedAt)
			require.False(t, has(item, tables.DefaultLayout().AttentionPK))
			require.False(t, has(item, attr.LeaseExpiresAt))

			// Again with the same lease: the record is COMPLETED already.
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, f.c.Supersede(ctx, l, tt.outcome), &lost)
			require.True(t, lost.Completed())
		})
	}

	t.Run("fenced by the token", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, false)
		old := f.acquire("k-super")
		current := f.takeover("k-super")
		before := f.raw((inbox.Store{}).Key("k-super", msgType))
		err := f.c.Supersede(ctx, old, "")
		var lost *inbox.LeaseLostError
		require.ErrorAs(t, err, &lost)
		require.False(t, lost.Completed())
		require.Equal(t, current.Token, lost.Record.LeaseToken)
		require.Equal(t, before, f.raw((inbox.Store{}).Key("k-super", msgType)))
	})
}

func TestFail(t *testing.T) {
	long := strings.Repeat("x", 600)
	// 511 ASCII bytes then "é" (2 bytes): byte 512 is inside the rune.
	multibyte := strings.Repeat("a", 511) + strings.Repeat("é", 50)
	tests := []struct {
		name    string
		f       *failure.Error
		status  inbox.Status
		message string
	}{
		{"retryable", failure.NewRetryable("DOWNSTREAM_DOWN", "pricing is down"), inbox.StatusFailedRetryable, "pricing is down"},
		{"terminal", failure.NewTerminal("CASE_NOT_FOUND", "case c-1 does not exist"), inbox.StatusFailedTerminal, "case c-1 does not exist"},
		{"exactly 512 bytes is kept", failure.NewTerminal("BIG", long[:512]), inbox.StatusFailedTerminal, long[:512]},
		{"long message is truncated", failure.NewTerminal("BIG", long), inbox.StatusFailedTerminal, long[:512] + "…"},
		{"truncation keeps UTF-8 whole", failure.NewRetryable("BIG", multibyte), inbox.StatusFailedRetryable, multibyte[:511] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, false)
			l := f.acquire("k-fail")
			f.clock.Advance(time.Second)
			now := f.clock.Now()
			require.NoError(t, f.c.Fail(ctx, l, tt.f))
			require.Equal(t, map[string]int{opUpd: 1}, f.inj.Calls())

			rec, item := f.inbox("k-fail")
			ts := inbox.FormatTime(now)
			require.Equal(t, tt.status, rec.Status)
			require.Equal(t, tt.f.Code, rec.FailureCode)
			require.Equal(t, tt.message, rec.FailureMessage)
			require.True(t, utf8.ValidString(rec.FailureMessage))
			require.LessOrEqual(t, len(rec.FailureMessage), 512+len("…"))
			require.Equal(t, ts, rec.FailedAt)
			require.Equal(t, ts, rec.LastActivity())
			require.Equal(t, inbox.AttentionPK(tt.status, inbox.Shard("k-fail", shards)), rec.GSI2PK)
			require.Equal(t, ts, rec.GSI2SK)
			require.False(t, has(item, attr.LeaseExpiresAt), "the lease is released")
			require.Equal(t, now.Add(35*24*time.Hour).Unix(), rec.TTL)
			require.Equal(t, 1, rec.Attempts, "the recorded failure counts the lease's attempt")

			// The lease is gone: the same holder can neither commit nor fail
			// otherwise; failing the same way again is the retry of an
			// applied write whose response was lost.
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, f.c.Commit(ctx, l, nil, mutation.Completion{}, 0), &lost)
			require.False(t, lost.Completed())
			require.NoError(t, f.c.Fail(ctx, l, tt.f))
			require.ErrorAs(t, f.c.Fail(ctx, l, failure.NewRetryable("OTHER_CODE", "x")), &lost)
			rec, _ = f.inbox("k-fail")
			require.Equal(t, 1, rec.Attempts, "counted once")
		})
	}

	t.Run("fenced by the token", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, false)
		old := f.acquire("k-fail")
		current := f.takeover("k-fail")
		before := f.raw((inbox.Store{}).Key("k-fail", msgType))
		err := f.c.Fail(ctx, old, failure.NewRetryable("X", "y"))
		require.ErrorIs(t, err, inbox.ErrLeaseLost)
		var lost *inbox.LeaseLostError
		require.ErrorAs(t, err, &lost)
		require.False(t, lost.Completed())
		require.Equal(t, current.Token, lost.Record.LeaseToken)
		require.Equal(t, before, f.raw((inbox.Store{}).Key("k-fail", msgType)))
	})

	t.Run("after the commit already applied with the same token", func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t, false)
		l := f.acquire("k-fail")
		// The commit applies but the caller never hears back (all attempts lose their response).
		f.inj.Add(faults.Rule{Operation: "TransactWriteItems", Kind: faults.KindLostResponse, Times: 10})
		err := f.c.Commit(ctx, l, []mutation.Write{f.count("CASE#1")}, mutation.Completion{}, 0)
		require.Error(t, err)
		f.inj.Clear()

		err = f.c.Fail(ctx, l, failure.Classify(err, failure.CodeTimeout))
		var lost *inbox.LeaseLostError
		require.ErrorAs(t, err, &lost)
		require.True(t, lost.Completed(), "the ambiguous commit did apply: a duplicate success")
		rec, _ := f.inbox("k-fail")
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, int64(1), f.get("CASE#1", "COUNTER").N)
	})
}

func TestNewValidation(t *testing.T) {
	_, err := mutation.New(nil, mutation.Config{Store: inbox.Store{AttentionShards: 101, TTL: inbox.TTL{Completed: 7 * 24 * time.Hour}}})
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "errors.Join expected, got %T", err)
	require.Len(t, joined.Unwrap(), 2, "the API, and the store's problems joined")
	for _, want := range []string{"API is required", "Store.Table is required", "AttentionShards 101", "TTL.Completed"} {
		require.ErrorContains(t, err, want)
	}
	_, err = mutation.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), mutation.Config{Store: inbox.Store{Table: "t"}})
	require.NoError(t, err)
}

// TestFailCountsTheLeasesAttempt: the second business attempt's failure
// records attempts 2, whatever took the lease over in between.
func TestFailCountsTheLeasesAttempt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	l := f.acquire("k-twice")
	require.NoError(t, f.c.Fail(ctx, l, failure.NewRetryable("DOWNSTREAM", "down")))
	l2 := f.acquire("k-twice")
	require.Equal(t, 2, l2.Attempt)
	require.NoError(t, f.c.Fail(ctx, l2, failure.NewRetryable("DOWNSTREAM", "down")))
	rec, _ := f.inbox("k-twice")
	require.Equal(t, 2, rec.Attempts)
	require.Equal(t, inbox.StatusFailedRetryable, rec.Status)
}

// TestRelease: a lease given back without an outcome keeps the record
// PROCESSING under no token, says when and why, and charges (or refunds)
// nothing.
func TestRelease(t *testing.T) {
	for _, ip := range []bool{false, true} {
		t.Run("IndexProcessing="+strconv.FormatBool(ip), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, ip)
			l := f.acquire("k-release")
			f.clock.Advance(time.Second)
			now := f.clock.Now()
			require.NoError(t, f.c.Release(ctx, l, failure.NewRetryable(failure.CodeThrottled, "throttled")))
			require.Equal(t, map[string]int{opUpd: 1}, f.inj.Calls())
			rec, item := f.inbox("k-release")
			require.Equal(t, inbox.StatusProcessing, rec.Status)
			require.True(t, rec.Released())
			require.False(t, has(item, attr.LeaseToken))
			require.False(t, has(item, attr.Attempts), "nothing charged, nothing refunded")
			require.Equal(t, now.UnixMilli(), rec.LeaseExpiresAt)
			require.Equal(t, failure.CodeThrottled, rec.FailureCode)
			require.Equal(t, inbox.FormatTime(now), rec.LastSeenAt)
			if ip {
				require.Equal(t, inbox.FormatTime(now), rec.GSI2SK, "the sweeper's index sorts it by the release")
			}
			// The released holder is fenced out.
			var lost *inbox.LeaseLostError
			require.ErrorAs(t, f.c.Commit(ctx, l, nil, mutation.Completion{}, 0), &lost)
			require.ErrorAs(t, f.c.Release(ctx, l, failure.NewRetryable(failure.CodeThrottled, "again")), &lost)
		})
	}
}

// TestEnd: ending a record decided on without a lease is fenced on the
// record as read; a record that moved on is a *ChangedError.
func TestEnd(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	l := f.acquire("k-end")
	require.NoError(t, f.c.Fail(ctx, l, failure.NewRetryable("DOWNSTREAM", "down")))
	rec, _ := f.inbox("k-end")
	end := failure.NewTerminal(failure.CodeMaxAttempts, "1 of 1 business attempts used")
	staleBefore := stale.Policy{Lease: lease}.StaleBefore(f.clock.Now())

	// Someone takes it over between the read and the end.
	moved := f.acquire("k-end")
	err := f.c.End(ctx, rec, end, staleBefore)
	var changed *mutation.ChangedError
	require.ErrorAs(t, err, &changed)
	require.ErrorIs(t, err, mutation.ErrChanged)
	require.Equal(t, moved.Token, changed.Record.LeaseToken)

	require.NoError(t, f.c.Fail(ctx, moved, failure.NewRetryable("DOWNSTREAM", "down")))
	rec, _ = f.inbox("k-end")
	require.NoError(t, f.c.End(ctx, rec, end, staleBefore))
	rec, _ = f.inbox("k-end")
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, failure.CodeMaxAttempts, rec.FailureCode)
	require.Equal(t, 2, rec.Attempts, "ending counts no attempt")
	require.NoError(t, f.c.End(ctx, rec, end, staleBefore), "a retried end whose first try applied")
}

// TestFreshRecords: a fused run's failure or supersede creates the work's
// record in one conditional PutItem; an existing record is an
// *ExistsError, and a retried write of our own is no error.
func TestFreshRecords(t *testing.T) {
	ctx := context.Background()
	t.Run("failed", func(t *testing.T) {
		f := newFixture(t, false)
		rec := newRec(f, "k-fresh-fail", "tok-1")
		require.NoError(t, f.c.FailFresh(ctx, rec, failure.NewTerminal("CASE_NOT_FOUND", "no case")))
		got, item := f.inbox("k-fresh-fail")
		require.Equal(t, inbox.StatusFailedTerminal, got.Status)
		require.Equal(t, "CASE_NOT_FOUND", got.FailureCode)
		require.Equal(t, 1, got.Attempts, "the fused run was the first business attempt")
		require.Equal(t, inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard("k-fresh-fail", shards)), got.GSI2PK)
		require.False(t, has(item, attr.LeaseExpiresAt))
		require.NoError(t, f.c.FailFresh(ctx, rec, failure.NewTerminal("CASE_NOT_FOUND", "no case")), "our own write again")
		var exists *mutation.ExistsError
		require.ErrorAs(t, f.c.FailFresh(ctx, newRec(f, "k-fresh-fail", "tok-2"), failure.NewRetryable("X", "y")), &exists)
		require.Equal(t, rec.LeaseToken, exists.Record.LeaseToken)
	})
	t.Run("superseded", func(t *testing.T) {
		f := newFixture(t, false)
		rec := newRec(f, "k-fresh-super", "tok-1")
		require.NoError(t, f.c.SupersedeFresh(ctx, rec, "ALREADY_EXISTS"))
		got, _ := f.inbox("k-fresh-super")
		require.Equal(t, inbox.StatusCompleted, got.Status)
		require.Equal(t, "ALREADY_EXISTS", got.Outcome)
		require.Zero(t, got.Attempts)
	})
}

func TestReject(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	c, err := mutation.New(f.ddb, mutation.Config{Store: inbox.Store{Table: f.env.Table, AttentionShards: 10}, Now: f.clock.Now})
	require.NoError(t, err)
	now := f.clock.Now()
	r := &mutation.Rejection{SQSMessageID: "msg-0001", Code: "IDEMPOTENCY_HASH_MISMATCH", Message: "other work", Key: "k-bad", MessageType: msgType, RequestHash: "hash-a",
		AggregateType: "Case", AggregateID: "c-7", CorrelationID: "corr-7"}
	require.NoError(t, c.Reject(ctx, r))

	key := (inbox.Store{}).RejectionKey(r.SQSMessageID)
	item := f.raw(key)
	require.NotEmpty(t, item)
	rec, err := (inbox.Store{}).Decode(item)
	require.NoError(t, err)
	require.True(t, rec.Rejection)
	ts := inbox.FormatTime(now)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, "IDEMPOTENCY_HASH_MISMATCH", rec.FailureCode)
	require.Equal(t, "other work", rec.FailureMessage)
	require.Equal(t, "corr-7", rec.CorrelationID)
	require.Equal(t, inbox.AggregatePK("Case", "c-7"), rec.GSI1PK, "listed in the aggregate's history")
	require.Equal(t, inbox.AggregateSK(inbox.FormatTime(now), msgType, "k-bad"), rec.GSI1SK)
	require.Equal(t, "msg-0001", rec.SQSMessageID)
	require.Equal(t, "k-bad", rec.Key)
	require.Equal(t, ts, rec.FailedAt)
	require.Equal(t, inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard("msg-0001", 10)), rec.GSI2PK)
	require.Equal(t, ts, rec.GSI2SK)
	require.Equal(t, now.Add(35*24*time.Hour).Unix(), rec.TTL)
	require.Empty(t, f.raw((inbox.Store{}).Key("k-bad", msgType)), "a rejection never files under the idempotency key")

	// Recording the same message again is a no-op, even with other details.
	f.clock.Advance(time.Minute)
	require.NoError(t, c.Reject(ctx, &mutation.Rejection{SQSMessageID: "msg-0001", Code: "OTHER"}))
	require.Equal(t, item, f.raw(key))

	// A message with no readable identity is still accounted for.
	require.NoError(t, c.Reject(ctx, &mutation.Rejection{SQSMessageID: "msg-0002", Code: "INVALID_ENVELOPE"}))
	rec2, err := (inbox.Store{}).Decode(f.raw((inbox.Store{}).RejectionKey("msg-0002")))
	require.NoError(t, err)
	require.True(t, rec2.Rejection)
	require.Empty(t, rec2.GSI1PK, "no aggregate, no aggregate-index entry")
	require.Equal(t, map[string]int{"DynamoDB.PutItem": 3}, f.inj.Calls(), "one PutItem each, no read")
}
