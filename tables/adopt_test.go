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

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/testenv"
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
			want:   []blocker{{"index GSI1", "AggregateIndex", tables.AdoptAggregateIndex}},
			reason: "an index of that name exists with the key (email), and the layout's needs (GSI1PK, GSI1SK)"},
		{name: "a layout attribute of another type", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes:    []types.GlobalSecondaryIndex{hashIndex("bySeq", "GSI2SK")},
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI2SK"), AttributeType: types.ScalarAttributeTypeN}}}, layout: appLayout(),
			want:   []blocker{{"attribute GSI2SK", "AttentionSK", tables.AdoptAttentionSK}},
			reason: "the table defines it as type N"},
		{name: "an index of the layout's name and keys, one of them a number", opts: testenv.AppTableOptions{TTL: "expiresAt",
			Indexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("GSI2"), KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("GSI2PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("GSI2SK"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}},
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI2PK"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("GSI2SK"), AttributeType: types.ScalarAttributeTypeN}}}, layout: appLayout(),
			want:   []blocker{{"attribute GSI2SK", "AttentionSK", tables.AdoptAttentionSK}},
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
	require.Empty(t, plan.Warnings)
	require.Equal(t, "UpdateTimeToLive: TTL on ttl (epoch seconds); no item of yours carries it (all 20 items read, the whole table)", plan.Changes[2].Detail)

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
			// The application's sessions carry the attribute: enabling TTL on
			// it takes the opt-in.
			plan, err := tables.Plan(ctx, b, tables.AdoptConfig{Name: app.Name, Layout: layout, TTLExistingItems: true})
			require.NoError(t, err)
			require.NoError(t, plan.Err())
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

// shopOptions add what the measured cases need to the shop table.
type shopOptions struct {
	// NumberGSI2SK items carry GSI2SK as a Number (a leaderboard score).
	NumberGSI2SK int
	// PastTTL items carry ttl, epoch seconds an hour ago; FutureTTL a day
	// ahead.
	PastTTL, FutureTTL int
}

// newShop is the measured application table: key PK/SK, its own GSI1 on
// GSI1PK/GSI1SK (projection ALL, the single-table convention) besides the
// testenv indexes, TTL off, and customers and orders that carry GSI1PK and
// GSI1SK; opts adds items of the measured cases.
func newShop(t *testing.T, ddb *dynamodb.Client, opts shopOptions) *testenv.AppTable {
	t.Helper()
	ctx := context.Background()
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{PK: "PK", SK: "SK", Items: 20,
		Indexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("GSI1"), KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("GSI1PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("GSI1SK"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
		Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI1PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("GSI1SK"), AttributeType: types.ScalarAttributeTypeS}}})
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	var items []map[string]types.AttributeValue
	for c := range 5 {
		customer := fmt.Sprintf("SHOPPER#%02d", c)
		items = append(items, map[string]types.AttributeValue{"PK": s(customer), "SK": s("PROFILE"), "GSI1PK": s(fmt.Sprintf("EMAIL#s%02d@example.com", c)),
			"GSI1SK": s(customer), "name": s(fmt.Sprintf("Shopper %d", c))})
		for o := range 3 {
			order := fmt.Sprintf("ORDER#%02d-%d", c, o)
			items = append(items, map[string]types.AttributeValue{"PK": s(customer), "SK": s(order), "GSI1PK": s(order), "GSI1SK": s(customer),
				"total": n(int64(10*c + o)), "lines": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("SKU-1"), n(2)}}})
		}
	}
	for i := range opts.NumberGSI2SK {
		items = append(items, map[string]types.AttributeValue{"PK": s("LEADERBOARD"), "SK": s(fmt.Sprintf("PLAYER#%02d", i)), "GSI2PK": s("SCORES"), "GSI2SK": n(int64(100 + i))})
	}
	for i := range opts.PastTTL {
		items = append(items, map[string]types.AttributeValue{"PK": s(fmt.Sprintf("CART#%02d", i)), "SK": s("CART"), "ttl": n(time.Now().Add(-time.Hour).Unix())})
	}
	for i := range opts.FutureTTL {
		items = append(items, map[string]types.AttributeValue{"PK": s(fmt.Sprintf("CART#F%02d", i)), "SK": s("CART"), "ttl": n(time.Now().Add(24 * time.Hour).Unix())})
	}
	for _, it := range items {
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(app.Name), Item: it})
		require.NoError(t, err)
	}
	return app
}

// The measured cases of adopting an application's table with ddbworker's
// default layout, each planned on the shop table: what would change
// something of the application's blocks the plan, naming the option that
// allows it and the layout of names the table does not use; Adopt refuses
// such a plan and the table, its items and TTL stay as they were; the
// proposed layout, or the opt-in, plans without blockers.
func TestAdoptLeavesTheApplicationsOwn(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	type blocker struct{ Subject, Field, Suggest, Option, OptionValue string }
	for _, tc := range []struct {
		name     string
		shop     shopOptions
		cfg      tables.AdoptConfig
		want     []blocker
		reasons  []string // in the first blocker's reason
		proposed tables.Layout
		// optIn allows what blocked; then the plan has these steps.
		optIn     func(*tables.AdoptConfig)
		optInPlan []step
		warning   string // in the opted-in plan's warnings
	}{{
		name: "1: the application's own GSI1",
		want: []blocker{{"index GSI1", "AggregateIndex", tables.AdoptAggregateIndex, "ShareIndexes", "GSI1"}},
		reasons: []string{"an index of that name and keys exists, (GSI1PK, GSI1SK) ALL, ACTIVE, and nothing shows it is ddbworker's: " +
			"20 of the first 20 items in it are not inbox records (one: PK=SHOPPER#", "). The inbox records would enter it beside your items, projected ALL"},
		proposed: tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: tables.AdoptAggregateIndex, AggregatePK: tables.AdoptAggregatePK,
			AggregateSK: tables.AdoptAggregateSK, AttentionIndex: "GSI2", AttentionPK: "GSI2PK", AttentionSK: "GSI2SK", TTL: "ttl"},
		optIn:     func(c *tables.AdoptConfig) { c.ShareIndexes = []string{"GSI1"} },
		optInPlan: []step{{tables.ChangeCreateIndex, "GSI2"}, {tables.ChangeEnableTTL, "ttl"}},
	}, {
		name: "2: items carrying GSI2SK as a Number",
		shop: shopOptions{NumberGSI2SK: 3},
		cfg:  tables.AdoptConfig{ShareIndexes: []string{"GSI1"}},
		want: []blocker{{"attribute GSI2SK", "AttentionSK", tables.AdoptAttentionSK, "", ""}},
		reasons: []string{"3 items of yours (all 43 items read, the whole table) carry it with another type than a string, e.g. PK=LEADERBOARD SK=PLAYER#0", ": " +
			"the new index GSI2 would be keyed on it as a string, and DynamoDB would then refuse every write of such an item (\"Type mismatch for Index Key\")"},
		proposed: tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: "GSI1", AggregatePK: "GSI1PK", AggregateSK: "GSI1SK",
			AttentionIndex: tables.AdoptAttentionIndex, AttentionPK: tables.AdoptAttentionPK, AttentionSK: tables.AdoptAttentionSK, TTL: "ttl"},
	}, {
		name: "3: TTL off, items carrying ttl in the past",
		shop: shopOptions{PastTTL: 4, FutureTTL: 2},
		cfg:  tables.AdoptConfig{ShareIndexes: []string{"GSI1"}},
		want: []blocker{{"TTL", "TTL", tables.AdoptTTL, "TTLExistingItems", ""}},
		reasons: []string{"6 items of yours (all 46 items read, the whole table) carry ttl: 4 a number of epoch seconds in the past, which DynamoDB would delete within about two days of TTL being enabled; " +
			"2 a later one, deleted when it comes; 0 not a number (TTL ignores them); e.g. PK=CART#0", " SK=CART. TTL is enabled on an attribute items of yours carry only when told to"},
		proposed: tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: "GSI1", AggregatePK: "GSI1PK", AggregateSK: "GSI1SK",
			AttentionIndex: "GSI2", AttentionPK: "GSI2PK", AttentionSK: "GSI2SK", TTL: tables.AdoptTTL},
		optIn:     func(c *tables.AdoptConfig) { c.TTLExistingItems = true },
		optInPlan: []step{{tables.ChangeCreateIndex, "GSI2"}, {tables.ChangeEnableTTL, "ttl"}},
		warning:   "TTL is enabled as told although 6 items of yours (all 46 items read, the whole table) carry ttl: 4 a number of epoch seconds in the past",
	}, {
		name: "a sample that does not reach the items",
		shop: shopOptions{NumberGSI2SK: 3},
		cfg:  tables.AdoptConfig{ShareIndexes: []string{"GSI1"}, SampleItems: 5},
		want: []blocker{{"TTL", "TTL", tables.AdoptTTL, "ScanAll", ""}},
		reasons: []string{"none of the first 5 items carries ttl, but the table holds about 43 and the rest were not read: " +
			"TTL is enabled on an attribute only once no item of yours is shown to carry it"},
		proposed: tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: "GSI1", AggregatePK: "GSI1PK", AggregateSK: "GSI1SK",
			AttentionIndex: "GSI2", AttentionPK: "GSI2PK", AttentionSK: "GSI2SK", TTL: tables.AdoptTTL},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			app := newShop(t, ddb, tc.shop)
			items := app.Items(t, ddb)
			before := describe(t, ddb, app.Name)
			cfg := tc.cfg
			cfg.Name = app.Name
			plan, err := tables.Plan(ctx, ddb, cfg)
			require.NoError(t, err)
			var got []blocker
			for _, b := range plan.Blockers {
				got = append(got, blocker{b.Subject, b.Field, b.Suggest, b.Option, b.OptionValue})
			}
			require.Equal(t, tc.want, got)
			for _, r := range tc.reasons {
				require.Contains(t, plan.Blockers[0].Reason, r)
			}
			require.Equal(t, tc.proposed, plan.Proposed)
			require.ErrorIs(t, tables.Adopt(ctx, ddb, plan, tables.AdoptOptions{}), tables.ErrIncompatible)
			require.Equal(t, before, describe(t, ddb, app.Name), "nothing changed: indexes, TTL")
			require.Equal(t, items, app.Items(t, ddb), "every item as it was")

			proposed := cfg
			proposed.Layout = plan.Proposed
			again, err := tables.Plan(ctx, ddb, proposed)
			require.NoError(t, err)
			require.NoError(t, again.Err(), "the proposed layout changes nothing of the application's")
			if tc.optIn != nil {
				tc.optIn(&cfg)
				opted, err := tables.Plan(ctx, ddb, cfg)
				require.NoError(t, err)
				require.NoError(t, opted.Err())
				require.Equal(t, tc.optInPlan, steps(opted))
				if tc.warning != "" {
					require.Contains(t, strings.Join(opted.Warnings, "\n"), tc.warning)
				}
			}
		})
	}

	t.Run("2: the full scan finds what the sample did not", func(t *testing.T) {
		app := newShop(t, ddb, shopOptions{NumberGSI2SK: 3})
		cfg := tables.AdoptConfig{Name: app.Name, ShareIndexes: []string{"GSI1"}, SampleItems: 5, TTLExistingItems: true}
		plan, err := tables.Plan(ctx, ddb, cfg)
		require.NoError(t, err)
		require.NoError(t, plan.Err())
		require.Contains(t, strings.Join(plan.Warnings, "\n"), "none of the first 5 items carries GSI2PK, GSI2SK, but the table holds about 43 and the rest were not read")
		var seen []tables.ScanProgress
		cfg.ScanAll, cfg.ScanProgress = true, func(p tables.ScanProgress) { seen = append(seen, p) }
		plan, err = tables.Plan(ctx, ddb, cfg)
		require.NoError(t, err)
		require.Len(t, plan.Blockers, 1)
		require.Equal(t, "attribute GSI2SK", plan.Blockers[0].Subject)
		require.Contains(t, plan.Blockers[0].Reason, "3 items of yours (all 43 items read) carry it with another type than a string")
		require.NotEmpty(t, seen)
		require.Equal(t, tables.ScanProgress{Read: 43, Pages: len(seen), Done: true}, seen[len(seen)-1])
	})
}

// A local index of the application's keyed on an attribute the inbox
// records write (status) would hold them too: it blocks until shared.
func TestAdoptLocalIndexTheRecordsEnter(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	name := testenv.Unique("lsi")
	key := func(h, r string) []types.KeySchemaElement {
		return []types.KeySchemaElement{{AttributeName: aws.String(h), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(r), KeyType: types.KeyTypeRange}}
	}
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str("PK"), str("SK"), str(attr.Status)}, KeySchema: key("PK", "SK"),
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{IndexName: aws.String("byStatus"), KeySchema: key("PK", attr.Status),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })

	plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: name})
	require.NoError(t, err)
	require.Len(t, plan.Blockers, 1)
	require.Equal(t, "index byStatus", plan.Blockers[0].Subject)
	require.Equal(t, "your index byStatus (PK, status) ALL, local is keyed on PK, status, which the inbox records write too: they would enter it, beside your items", plan.Blockers[0].Reason)
	require.Equal(t, []string{"ShareIndexes", "byStatus"}, []string{plan.Blockers[0].Option, plan.Blockers[0].OptionValue})

	plan, err = tables.Plan(ctx, ddb, tables.AdoptConfig{Name: name, ShareIndexes: []string{"byStatus"}})
	require.NoError(t, err)
	require.NoError(t, plan.Err())
	plan, err = tables.Plan(ctx, ddb, tables.AdoptConfig{Name: name, ShareIndexes: []string{"byStatsu"}})
	require.NoError(t, err)
	require.Equal(t, "it is named to be shared (AdoptConfig.ShareIndexes), but the table has no index of that name", plan.Blockers[0].Reason, "a typo is no opt-in")
}
