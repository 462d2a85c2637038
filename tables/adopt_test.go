package tables_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dev/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

// appLayout is the layout that fits testenv's application table with its
// own TTL attribute.
func appLayout() tables.Layout {
	return tables.Layout{PartitionKey: "pk", SortKey: "sk", TTL: "expiresAt"}
}

// described is everything Describe* says of a table, to compare before and
// after.
type described struct {
	Table *types.TableDescription
	TTL   *types.TimeToLiveDescription
}

func describe(t *testing.T, ddb *dynamodb.Client, name string) described {
	t.Helper()
	d, err := ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	ttl, err := ddb.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	require.NoError(t, err)
	return described{d.Table, ttl.TimeToLiveDescription}
}

type step struct {
	Kind   tables.ChangeKind
	Target string
}

func steps(p tables.AdoptPlan) []step {
	out := []step{}
	for _, c := range p.Changes {
		out = append(out, step{c.Kind, c.Target})
	}
	return out
}

func keptTargets(p tables.AdoptPlan) []string {
	var out []string
	for _, k := range p.Kept {
		out = append(out, k.Target)
	}
	return out
}

func index(t *testing.T, d described, name string) types.GlobalSecondaryIndexDescription {
	t.Helper()
	for _, g := range d.Table.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == name {
			return g
		}
	}
	require.Failf(t, "no index", "%s has no index %s", aws.ToString(d.Table.TableName), name)
	return types.GlobalSecondaryIndexDescription{}
}

// An application's table with its own key names, indexes, TTL attribute
// and a few hundred items: the plan lists exactly the two indexes, planning
// changes nothing, adopting adds both (ACTIVE, KEYS_ONLY) and leaves every
// item, the application's indexes and its TTL as they were; Verify and
// Ensure accept the table, and a second plan has nothing to do.
func TestAdoptApplicationTable(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{TTL: "expiresAt"})
	items := app.Items(t, ddb)
	require.Len(t, items, 300)
	before := describe(t, ddb, app.Name)

	plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: appLayout()})
	require.NoError(t, err)
	require.NoError(t, plan.Err())
	require.True(t, plan.KeyFits)
	require.Equal(t, []step{{tables.ChangeCreateIndex, "GSI1"}, {tables.ChangeCreateIndex, "GSI2"}}, steps(plan))
	require.Equal(t, []string{"key", "index byEmail", "index byStatus", "TTL", "items"}, keptTargets(plan))
	require.Empty(t, plan.Warnings)
	create := plan.Changes[0]
	require.Equal(t, "(GSI1PK S, GSI1SK S) KEYS_ONLY, on-demand, as the table; waits for its backfill", create.Detail)
	require.Nil(t, create.Index.ProvisionedThroughput, "an on-demand table's index needs no throughput")
	require.Equal(t, before, describe(t, ddb, app.Name), "a plan changes nothing")

	var mu sync.Mutex
	var seen []tables.Progress
	require.NoError(t, tables.Adopt(ctx, ddb, plan, tables.AdoptOptions{PollInterval: 50 * time.Millisecond, Progress: func(p tables.Progress) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, p)
	}}))
	var done []string
	for _, p := range seen {
		require.Equal(t, 2, p.Steps)
		if p.Done {
			done = append(done, fmt.Sprintf("%d %s %s", p.Step, p.Change.Target, p.Index.IndexStatus))
		}
	}
	require.Equal(t, []string{"1 GSI1 ACTIVE", "2 GSI2 ACTIVE"}, done)

	after := describe(t, ddb, app.Name)
	for _, name := range []string{"GSI1", "GSI2"} {
		g := index(t, after, name)
		require.Equal(t, types.IndexStatusActive, g.IndexStatus)
		require.Equal(t, types.ProjectionTypeKeysOnly, g.Projection.ProjectionType)
	}
	for _, name := range []string{"byEmail", "byStatus"} {
		require.Equal(t, index(t, before, name), index(t, after, name), "the application's own index is untouched")
	}
	require.Equal(t, before.TTL, after.TTL, "TTL stays on the application's attribute")
	require.Equal(t, items, app.Items(t, ddb), "every application item as it was")

	require.NoError(t, tables.Verify(ctx, ddb, app.Name, appLayout()), "run's startup check accepts the table")
	require.NoError(t, tables.Ensure(ctx, ddb, tables.Config{Name: app.Name, Layout: appLayout()}), "tables create accepts it")
	again, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: appLayout()})
	require.NoError(t, err)
	require.Empty(t, again.Changes, "adopting an adopted table changes nothing")
	require.NoError(t, again.Err())
	require.NoError(t, tables.Adopt(ctx, ddb, again, tables.AdoptOptions{}))
}

// What cannot change blocks the plan, each with its reason and the layout
// name that fits; Adopt refuses such a plan and changes nothing.
func TestAdoptBlockers(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	hashIndex := func(name, attr string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attr), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}
	}
	var eighteen []types.GlobalSecondaryIndex
	for i := range 18 {
		eighteen = append(eighteen, hashIndex(fmt.Sprintf("app%02d", i), "email"))
	}
	type blocker struct{ Subject, Field, Suggest string }
	for _, tc := range []struct {
		name   string
		opts   testenv.AppTableOptions
		layout tables.Layout
		want   []blocker
		reason string // in the first blocker's reason
	}{
		{name: "other key names", opts: testenv.AppTableOptions{PK: "id", SK: "kind", TTL: "expiresAt"}, layout: tables.Layout{TTL: "expiresAt"},
			want:   []blocker{{"key", "PartitionKey", "id"}, {"key", "SortKey", "kind"}},
			reason: "the table's partition key is id, not PK, and a key schema cannot change"},
		{name: "no sort key", opts: testenv.AppTableOptions{NoSortKey: true}, layout: tables.Layout{PartitionKey: "pk"},
			want:   []blocker{{"key", "", ""}},
			reason: "the table has no sort key"},
		{name: "an index of the layout's name with other keys", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes: []types.GlobalSecondaryIndex{hashIndex("GSI1", "email")}}, layout: appLayout(),
			want:   []blocker{{"index GSI1", "AggregateIndex", ""}},
			reason: "an index of that name exists with the key (email), and the layout's needs (GSI1PK, GSI1SK)"},
		{name: "a layout attribute of another type", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes:    []types.GlobalSecondaryIndex{hashIndex("bySeq", "GSI2SK")},
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI2SK"), AttributeType: types.ScalarAttributeTypeN}}}, layout: appLayout(),
			want:   []blocker{{"attribute GSI2SK", "AttentionSK", ""}},
			reason: "the table defines it as type N"},
		{name: "an index of the layout's name and keys, one of them a number", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("GSI2"), KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("GSI2PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("GSI2SK"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}},
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI2PK"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("GSI2SK"), AttributeType: types.ScalarAttributeTypeN}}}, layout: appLayout(),
			want:   []blocker{{"attribute GSI2SK", "AttentionSK", ""}},
			reason: "the table defines it as type N"},
		{name: "an index of yours keyed on a record attribute of another type", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes:    []types.GlobalSecondaryIndex{hashIndex("byAttempts", "attempts")},
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("attempts"), AttributeType: types.ScalarAttributeTypeS}}}, layout: appLayout(),
			want:   []blocker{{"index byAttempts", "", ""}},
			reason: "index byAttempts is keyed on attempts of type S, which the inbox records write as type N: DynamoDB would refuse every record"},
		{name: "20 indexes already", opts: testenv.AppTableOptions{TTL: "expiresAt", Indexes: eighteen}, layout: appLayout(),
			want:   []blocker{{"indexes", "", ""}},
			reason: "the table has 20 global secondary indexes and the inbox needs 2 more, over DynamoDB's default quota of 20 per table"},
		{name: "TTL on another attribute", opts: testenv.AppTableOptions{TTL: "expiresAt"}, layout: tables.Layout{PartitionKey: "pk", SortKey: "sk"},
			want:   []blocker{{"TTL", "TTL", "expiresAt"}},
			reason: "TTL is ENABLED on expiresAt, and DynamoDB allows one TTL attribute per table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{PK: tc.opts.PK, SK: tc.opts.SK, NoSortKey: tc.opts.NoSortKey, TTL: tc.opts.TTL,
				Items: 20, Indexes: tc.opts.Indexes, Attributes: tc.opts.Attributes})
			items := app.Items(t, ddb)
			before := describe(t, ddb, app.Name)

			plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: tc.layout})
			require.NoError(t, err)
			var got []blocker
			for _, b := range plan.Blockers {
				got = append(got, blocker{b.Subject, b.Field, b.Suggest})
			}
			require.Equal(t, tc.want, got)
			require.Contains(t, plan.Blockers[0].Reason, tc.reason)

			err = tables.Adopt(ctx, ddb, plan, tables.AdoptOptions{})
			require.ErrorIs(t, err, tables.ErrIncompatible)
			var ae *tables.AdoptError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, app.Name, ae.Table)
			require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), len(tc.want), "one error per blocker")
			require.Equal(t, before, describe(t, ddb, app.Name), "nothing changed")
			require.Equal(t, items, app.Items(t, ddb))
		})
	}
}

// A table without TTL gets it on the layout's attribute (with a warning
// about items that carry it), and the stream when asked; a provisioned
// table's indexes take its throughput, or the one given.
func TestAdoptTTLStreamAndThroughput(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{Items: 20, Provisioned: true})
	layout := tables.Layout{PartitionKey: "pk", SortKey: "sk"}

	plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: layout, Stream: true, IndexReadCapacity: 2})
	require.NoError(t, err)
	require.NoError(t, plan.Err())
	require.Equal(t, []step{{tables.ChangeCreateIndex, "GSI1"}, {tables.ChangeCreateIndex, "GSI2"}, {tables.ChangeEnableTTL, "ttl"},
		{tables.ChangeEnableStream, "stream"}}, steps(plan))
	require.Contains(t, plan.Changes[0].Detail, "provisioned 2 RCU, 3 WCU (given, else the table's)")
	require.Len(t, plan.Warnings, 1)
	require.Contains(t, plan.Warnings[0], "DynamoDB deletes every item whose ttl is a number of epoch seconds in the past")

	require.NoError(t, tables.Adopt(ctx, ddb, plan, tables.AdoptOptions{PollInterval: 50 * time.Millisecond}))
	after := describe(t, ddb, app.Name)
	tp := index(t, after, "GSI1").ProvisionedThroughput
	require.Equal(t, []int64{2, 3}, []int64{aws.ToInt64(tp.ReadCapacityUnits), aws.ToInt64(tp.WriteCapacityUnits)})
	require.Equal(t, types.TimeToLiveStatusEnabled, after.TTL.TimeToLiveStatus)
	require.Equal(t, "ttl", aws.ToString(after.TTL.AttributeName))
	require.True(t, aws.ToBool(after.Table.StreamSpecification.StreamEnabled))
	require.Equal(t, types.StreamViewTypeNewImage, after.Table.StreamSpecification.StreamViewType)
	require.NoError(t, tables.Verify(ctx, ddb, app.Name, layout))

	again, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: layout, Stream: true})
	require.NoError(t, err)
	require.Empty(t, again.Changes)
	require.Contains(t, keptTargets(again), "stream")
}

// backfilling is DynamoDB Local as AWS looks while an index is built: each
// index an UpdateTable creates is CREATING and backfilling (the table
// UPDATING) for the next `polls` reads of the table, or for ever while
// stuck, before DynamoDB Local's own status shows (it keeps a new index
// CREATING for a moment, the table ACTIVE); an index of the application's
// may be CREATING at first. It logs the creations, the reads it made up
// and the first that showed the index ACTIVE, in order. Its
// DescribeTimeToLive may report TTL disabled, as a read just before
// someone else enabled it.
type backfilling struct {
	*dynamodb.Client
	mu          sync.Mutex
	polls       int
	stuck       bool
	left        map[string]int  // reads left to make up
	reads       map[string]int  // reads made up
	watch       map[string]bool // waiting to log the first real ACTIVE
	log         []string
	ttlDisabled int // DescribeTimeToLive calls left that report DISABLED
}

func newBackfilling(ddb *dynamodb.Client, polls int) *backfilling {
	return &backfilling{Client: ddb, polls: polls, left: map[string]int{}, reads: map[string]int{}, watch: map[string]bool{}}
}

func (b *backfilling) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	out, err := b.Client.UpdateTable(ctx, in, optFns...)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range in.GlobalSecondaryIndexUpdates {
		if u.Create != nil {
			b.left[aws.ToString(u.Create.IndexName)] = b.polls
			b.log = append(b.log, fmt.Sprintf("create %s (%d index updates)", aws.ToString(u.Create.IndexName), len(in.GlobalSecondaryIndexUpdates)))
		}
	}
	return out, err
}

func (b *backfilling) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := b.Client.DescribeTable(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range out.Table.GlobalSecondaryIndexes {
		g := &out.Table.GlobalSecondaryIndexes[i]
		name := aws.ToString(g.IndexName)
		n, building := b.left[name]
		switch {
		case building && (n > 0 || b.stuck):
			b.left[name]--
			r := int64(b.reads[name])
			b.reads[name]++
			g.IndexStatus, g.Backfilling = types.IndexStatusCreating, aws.Bool(true)
			g.IndexSizeBytes, g.ItemCount = aws.Int64(100*r), aws.Int64(r)
			out.Table.TableStatus = types.TableStatusUpdating
			b.log = append(b.log, name+" CREATING")
		case building:
			delete(b.left, name)
			b.watch[name] = true
		}
		if _, building := b.left[name]; !building && b.watch[name] && g.IndexStatus == types.IndexStatusActive {
			delete(b.watch, name)
			b.log = append(b.log, name+" ACTIVE")
		}
	}
	return out, nil
}

func (b *backfilling) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	out, err := b.Client.DescribeTimeToLive(ctx, in, optFns...)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && b.ttlDisabled > 0 {
		b.ttlDisabled--
		out.TimeToLiveDescription = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	}
	return out, err
}

func (b *backfilling) logged() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

// Adopt polls each backfill until the index is ACTIVE, reporting every
// read (status, backfilling, size, items), creates one index at a time —
// the next only once the previous one and the application's own are done —
// and bounds each wait: a wait that ends first returns ErrNotActive, and
// the next plan waits for the index DynamoDB goes on building.
func TestAdoptWaitsForEachBackfill(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{Items: 20, TTL: "expiresAt"})
	plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: app.Name, Layout: appLayout()})
	require.NoError(t, err)
	require.Equal(t, []step{{tables.ChangeCreateIndex, "GSI1"}, {tables.ChangeCreateIndex, "GSI2"}}, steps(plan))

	b := newBackfilling(ddb, 3)
	b.left["byEmail"] = 2

	var mu sync.Mutex
	var lines []string
	err = tables.Adopt(ctx, b, plan, tables.AdoptOptions{PollInterval: 20 * time.Millisecond, Progress: func(p tables.Progress) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%d/%d %s %s", p.Step, p.Steps, p.Change.Target, p.TableStatus)
		if p.Index != nil {
			line += fmt.Sprintf(" %s %s backfilling=%t %dB %d items", aws.ToString(p.Index.IndexName), p.Index.IndexStatus, aws.ToBool(p.Index.Backfilling),
				aws.ToInt64(p.Index.IndexSizeBytes), aws.ToInt64(p.Index.ItemCount))
		}
		if p.Done {
			line += " done"
		}
		lines = append(lines, line)
	}})
	require.NoError(t, err)
	var own []string // DynamoDB Local's own CREATING (its table ACTIVE), for as long as it lasts
	made := slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		if strings.Contains(l, " ACTIVE GSI") && strings.Contains(l, " CREATING ") {
			own = append(own, l)
			return true
		}
		return false
	})
	for _, l := range own {
		require.Regexp(t, `^(1/2 GSI1 ACTIVE GSI1|2/2 GSI2 ACTIVE GSI2) CREATING backfilling=(true|false) 0B 0 items$`, l)
	}
	require.Equal(t, []string{
		"byEmail CREATING", "byEmail CREATING", "byEmail ACTIVE",
		"create GSI1 (1 index updates)", "GSI1 CREATING", "GSI1 CREATING", "GSI1 CREATING", "GSI1 ACTIVE",
		"create GSI2 (1 index updates)", "GSI2 CREATING", "GSI2 CREATING", "GSI2 CREATING", "GSI2 ACTIVE",
	}, b.logged(), "one index at a time, each created once the table has no other in the making")
	require.Equal(t, []string{
		"1/2 GSI1 UPDATING byEmail CREATING backfilling=true 0B 0 items",
		"1/2 GSI1 UPDATING byEmail CREATING backfilling=true 100B 1 items",
		"1/2 GSI1 UPDATING GSI1 CREATING backfilling=true 0B 0 items",
		"1/2 GSI1 UPDATING GSI1 CREATING backfilling=true 100B 1 items",
		"1/2 GSI1 UPDATING GSI1 CREATING backfilling=true 200B 2 items",
		"1/2 GSI1 ACTIVE GSI1 ACTIVE backfilling=false 0B 0 items done",
		"2/2 GSI2 UPDATING GSI2 CREATING backfilling=true 0B 0 items",
		"2/2 GSI2 UPDATING GSI2 CREATING backfilling=true 100B 1 items",
		"2/2 GSI2 UPDATING GSI2 CREATING backfilling=true 200B 2 items",
		"2/2 GSI2 ACTIVE GSI2 ACTIVE backfilling=false 0B 0 items done",
	}, made)

	t.Run("a wait that ends first", func(t *testing.T) {
		app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{Items: 20, TTL: "expiresAt"})
		b := newBackfilling(ddb, 0)
		b.stuck = true
		plan, err := tables.Plan(ctx, b, tables.AdoptConfig{Name: app.Name, Layout: appLayout()})
		require.NoError(t, err)
		start := time.Now()
		err = tables.Adopt(ctx, b, plan, tables.AdoptOptions{Wait: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond})
		require.ErrorIs(t, err, tables.ErrNotActive)
		require.ErrorContains(t, err, "step 1 of 2 (create-index GSI1)")
		require.ErrorContains(t, err, "it is index GSI1 CREATING (backfilling: true)")
		require.Less(t, time.Since(start), 5*time.Second)

		again, err := tables.Plan(ctx, b, tables.AdoptConfig{Name: app.Name, Layout: appLayout()})
		require.NoError(t, err)
		require.Equal(t, []step{{tables.ChangeAwaitIndex, "GSI1"}, {tables.ChangeCreateIndex, "GSI2"}}, steps(again), "the index DynamoDB goes on building is waited for")
		b.mu.Lock()
		b.stuck = false
		b.mu.Unlock()
		require.NoError(t, tables.Adopt(ctx, b, again, tables.AdoptOptions{PollInterval: 20 * time.Millisecond}))
		require.NoError(t, tables.Verify(ctx, ddb, app.Name, appLayout()))
	})
}

// TTL enabled by someone else between the plan and Adopt is done, not an
// error ("TimeToLive is already enabled"); enabled on another attribute, it
// is an error.
func TestAdoptTTLEnabledMeanwhile(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	for _, tc := range []struct {
		theirs string
		want   string // the error, "" for none
	}{{theirs: "ttl"}, {theirs: "expiresAt", want: "TimeToLive is active on a different AttributeName"}} {
		t.Run(tc.theirs, func(t *testing.T) {
			app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{Items: 5, TTL: tc.theirs})
			b := newBackfilling(ddb, 0)
			b.ttlDisabled = 2 // the plan's read and Adopt's
			layout := tables.Layout{PartitionKey: "pk", SortKey: "sk"}
			plan, err := tables.Plan(ctx, b, tables.AdoptConfig{Name: app.Name, Layout: layout})
			require.NoError(t, err)
			require.Equal(t, step{tables.ChangeEnableTTL, "ttl"}, steps(plan)[2])
			err = tables.Adopt(ctx, b, plan, tables.AdoptOptions{PollInterval: 20 * time.Millisecond})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "step 3 of 3 (enable-ttl ttl)")
			var apiErr interface{ ErrorCode() string }
			require.True(t, errors.As(err, &apiErr))
		})
	}
}
