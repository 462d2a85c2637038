package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// shopLayout is the inbox's layout in an application's table: indexes and
// attributes of ddbworker's own, beside the application's GSI1.
var shopLayout = tables.Layout{PartitionKey: "PK", SortKey: "SK",
	AggregateIndex: "ddbworker-aggregate", AggregatePK: "ddbwAggPK", AggregateSK: "ddbwAggSK",
	AttentionIndex: "ddbworker-attention", AttentionPK: "ddbwAttnPK", AttentionSK: "ddbwAttnSK", TTL: "expiresAt"}

// shopLayoutFlags are the flags that name shopLayout.
var shopLayoutFlags = []string{"--aggregate-index", "ddbworker-aggregate", "--aggregate-pk-attribute", "ddbwAggPK",
	"--aggregate-sk-attribute", "ddbwAggSK", "--attention-index", "ddbworker-attention", "--attention-pk-attribute", "ddbwAttnPK",
	"--attention-sk-attribute", "ddbwAttnSK", "--ttl-attribute", "expiresAt"}

// newShopTable creates an application's single table: key (PK, SK), its
// own GSI1 on (GSI1PK, GSI1SK) projecting ALL, a few of its items in GSI1,
// and the inbox's two indexes under shopLayout's names.
func newShopTable(t *testing.T, ddb *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	name := testenv.Unique("shop")
	in := tables.Definition(name, shopLayout)
	in.AttributeDefinitions = append(in.AttributeDefinitions,
		types.AttributeDefinition{AttributeName: aws.String("GSI1PK"), AttributeType: types.ScalarAttributeTypeS},
		types.AttributeDefinition{AttributeName: aws.String("GSI1SK"), AttributeType: types.ScalarAttributeTypeS})
	in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{IndexName: aws.String("GSI1"),
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("GSI1PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("GSI1SK"), KeyType: types.KeyTypeRange}},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}})
	_, err := ddb.CreateTable(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	require.NoError(t, dynamodb.NewTableExistsWaiter(ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
	for _, id := range []string{"C-3", "C-4"} {
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "CUSTOMER#" + id}, "SK": &types.AttributeValueMemberS{Value: "PROFILE"},
			"GSI1PK": &types.AttributeValueMemberS{Value: "CUSTOMER#" + id}, "GSI1SK": &types.AttributeValueMemberS{Value: "PROFILE"},
			"name": &types.AttributeValueMemberS{Value: "customer " + id}}})
		require.NoError(t, err)
	}
	return name
}

// layoutCLI runs `ddbworker --dynamodb-endpoint … --table table args…`
// in-process; stderr must stay empty (errors are returned).
func layoutCLI(t *testing.T, table string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(App{Name: "ddbworker"})
	root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", table}, args...))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	require.Empty(t, errOut.String(), "nothing on stderr")
	return out.String(), err
}

func layoutJSON(t *testing.T, out string) inboxJSONDoc {
	t.Helper()
	var doc inboxJSONDoc
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	return doc
}

// The layout lives in the table (issue 22, measured case 4): on an
// application's table whose GSI1 is its own, with the inbox in indexes of
// other names that `tables create` recorded, every operator command run
// with no layout flag reads the inbox's records; one given a layout flag
// that disagrees refuses, naming the flag and both values.
func TestRecordedLayoutOperatorCommands(t *testing.T) {
	c := newInboxCLI(t) // no stray DDBWORKER_* variables; the emulators
	ctx := context.Background()
	ddb := c.env.DynamoDB
	shop := newShopTable(t, ddb)

	// The layout is recorded once, where the table is set up.
	out, err := layoutCLI(t, shop, append([]string{"tables", "create", "--stream"}, shopLayoutFlags...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "--aggregate-index ddbworker-aggregate")
	rec, ok, err := inbox.ReadRecorded(ctx, ddb, inbox.Store{Table: shop})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, rec.HasLayout(), "the layout is recorded: %v", rec.Settings)
	recorded, err := rec.Store.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, shopLayout, recorded.Layout)

	// The inbox's records, as the workers write them under the layout.
	store, err := inbox.Store{Table: shop, Layout: shopLayout}.WithDefaults()
	require.NoError(t, err)
	put := func(r *inbox.Record) {
		t.Helper()
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(shop), Item: store.Encode(r)})
		require.NoError(t, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	record := func(key string, seen time.Time) *inbox.Record {
		r := inbox.NewRecord(&inbox.Work{Key: key, MessageType: "OrderPlaced", RequestHash: "h-" + key, SchemaVersion: 1,
			AggregateType: "customer", AggregateID: "C-3", Producer: "shop"}, seen)
		r.LeaseOwner, r.LeaseToken = "worker-1", "token-"+key
		return r
	}
	done := record("order-1", now.Add(-5*time.Minute))
	done.Status, done.Outcome, done.CompletedAt = inbox.StatusCompleted, inbox.OutcomeApplied, inbox.FormatTime(now.Add(-4*time.Minute))
	put(done)
	failedAt := inbox.FormatTime(now.Add(-3 * time.Minute))
	bad := record("order-2", now.Add(-4*time.Minute))
	bad.Status, bad.FailureCode, bad.FailureMessage, bad.FailedAt = inbox.StatusFailedTerminal, "OUT_OF_STOCK", "no stock", failedAt
	bad.GSI2PK, bad.GSI2SK = inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard("order-2", store.AttentionShards)), failedAt
	put(bad)
	// A lease abandoned hours ago, for the sweeper.
	g, err := gate.New(ddb, gate.Config{Store: store, Owner: "worker-dead/1", Policy: stale.Policy{Lease: 30 * time.Second},
		Now: func() time.Time { return now.Add(-3 * time.Hour) }})
	require.NoError(t, err)
	d, err := g.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: "order-3", MessageType: "OrderPlaced", RequestHash: "h",
		AggregateType: "customer", AggregateID: "C-3"}})
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, d.Action)

	t.Run("inbox list --aggregate, no layout flags", func(t *testing.T) {
		out, err := layoutCLI(t, shop, "inbox", "list", "--aggregate", "customer/C-3", "-o", "json")
		require.NoError(t, err, out)
		require.Equal(t, []string{"order-3", "order-1", "order-2"}, keysOfJSON(layoutJSON(t, out)), "first-seen order")
	})
	t.Run("inbox list --status, no layout flags", func(t *testing.T) {
		out, err := layoutCLI(t, shop, "inbox", "list", "--status", "FAILED_TERMINAL", "-o", "json")
		require.NoError(t, err, out)
		require.Equal(t, []string{"order-2"}, keysOfJSON(layoutJSON(t, out)))
	})
	t.Run("inbox get, no layout flags", func(t *testing.T) {
		out, err := layoutCLI(t, shop, "inbox", "get", "order-2", "-o", "json")
		require.NoError(t, err, out)
		doc := layoutJSON(t, out)
		require.Equal(t, []string{"order-2"}, keysOfJSON(doc))
		require.Equal(t, "OUT_OF_STOCK", doc.Records[0].FailureCode)
	})
	t.Run("sweep, no layout flags", func(t *testing.T) {
		out, err := layoutCLI(t, shop, "sweep", "-o", "json")
		require.NoError(t, err, out)
		var doc sweepJSON
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		require.Equal(t, 1, doc.Marked, out)
		// Marked under the recorded layout: in the inbox's attention index
		// (and its TTL attribute), nothing under the default names.
		item, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(shop), Key: store.Key("order-3", "OrderPlaced"), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Contains(t, item.Item, "ddbwAttnPK")
		require.Contains(t, item.Item, "expiresAt")
		for _, name := range []string{"GSI1PK", "GSI2PK", "GSI2SK", "ttl"} {
			require.NotContains(t, item.Item, name)
		}
		out, err = layoutCLI(t, shop, "inbox", "list", "--status", "FAILED_TERMINAL", "--code", failure.CodeLeaseAbandoned, "-o", "json")
		require.NoError(t, err, out)
		require.Equal(t, []string{"order-3"}, keysOfJSON(layoutJSON(t, out)))
	})
	t.Run("relay --sweep, no layout flags", func(t *testing.T) {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
		q, err := c.env.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Unique("relay"))})
		require.NoError(t, err)
		w, err := outbox.New(outbox.Config{Table: shop, Layout: shopLayout})
		require.NoError(t, err)
		put, err := w.Put(ctx, outbox.Event{Envelope: &envelope.Envelope{MessageID: "m-1", SchemaVersion: envelope.SchemaV1, MessageType: "OrderShipped",
			Producer: "shop", OccurredAt: time.Now(), IdempotencyKey: "k-m-1", AggregateType: "customer", AggregateID: "C-3", Payload: []byte(`{}`)}})
		require.NoError(t, err)
		_, err = ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
		require.NoError(t, err)

		_, err = layoutCLI(t, shop, "relay", "--queue-url", aws.ToString(q.QueueUrl), "--sweep", "--sweep-age", "1ms", "--attention-index", "GSI2")
		require.ErrorContains(t, err, "--attention-index (DDBWORKER_ATTENTION_INDEX) is GSI2 but table "+shop+" records ddbworker-attention")
		testenv.Eventually(t, 5*time.Second, func() bool {
			out, err = layoutCLI(t, shop, "relay", "--queue-url", aws.ToString(q.QueueUrl), "--sweep", "--sweep-age", "1ms")
			require.NoError(t, err, out)
			return out != "swept: 0 PENDING records older than 1ms, 0 published, 0 failed\n"
		})
		require.Equal(t, "swept: 1 PENDING records older than 1ms, 1 published, 0 failed\n", out)
	})
	t.Run("nothing of the inbox in the application's GSI1", func(t *testing.T) {
		q, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(shop), IndexName: aws.String("GSI1")})
		require.NoError(t, err)
		require.Len(t, q.Items, 2, "the application's two items only")
	})
	t.Run("a flag that disagrees is refused, naming both", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"inbox", "list", "--aggregate", "customer/C-3", "--aggregate-index", "GSI1"},
				"--aggregate-index (DDBWORKER_AGGREGATE_INDEX) is GSI1 but table " + shop + " records ddbworker-aggregate"},
			{[]string{"inbox", "list", "--status", "FAILED_TERMINAL", "--attention-pk-attribute", "GSI2PK"},
				"--attention-pk-attribute (DDBWORKER_ATTENTION_PK_ATTRIBUTE) is GSI2PK but table " + shop + " records ddbwAttnPK"},
			{[]string{"inbox", "get", "order-2", "--attention-index", "GSI2"},
				"--attention-index (DDBWORKER_ATTENTION_INDEX) is GSI2 but table " + shop + " records ddbworker-attention"},
			{[]string{"sweep", "--dry-run", "--ttl-attribute", "ttl"},
				"--ttl-attribute (DDBWORKER_TTL_ATTRIBUTE) is ttl but table " + shop + " records expiresAt"},
			{[]string{"inbox", "list", "--aggregate", "customer/C-3", "--pk-attribute", "pk"},
				"--pk-attribute (DDBWORKER_PK_ATTRIBUTE) is pk but table " + shop + "'s key is (PK, SK)"},
		} {
			out, err := layoutCLI(t, shop, tc.args...)
			require.Error(t, err, "%v: %s", tc.args, out)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, out, "no answer")
		}
		// The environment is a flag too.
		t.Setenv("DDBWORKER_AGGREGATE_INDEX", "GSI1")
		_, err := layoutCLI(t, shop, "inbox", "list", "--aggregate", "customer/C-3")
		require.ErrorContains(t, err, "--aggregate-index (DDBWORKER_AGGREGATE_INDEX) is GSI1 but table "+shop+" records ddbworker-aggregate")
	})
	t.Run("the same flags as recorded are fine", func(t *testing.T) {
		out, err := layoutCLI(t, shop, append([]string{"inbox", "list", "--aggregate", "customer/C-3", "-o", "json"}, shopLayoutFlags...)...)
		require.NoError(t, err, out)
		require.Len(t, keysOfJSON(layoutJSON(t, out)), 3)
	})
}

// An operator command on an index the table lacks — the one the table
// records, or the one a flag names — or on an index that is not the
// inbox's is a typed error naming the fix, never a raw SDK error and never
// "no records" with success.
func TestLayoutIndexMissingIsTypedError(t *testing.T) {
	c := newInboxCLI(t)
	ctx := context.Background()
	c.failed(inbox.StatusFailedTerminal, "k-1", "BOOM", c.now)

	t.Run("flagged index missing", func(t *testing.T) {
		out, err := c.run("inbox", "list", "--status", "FAILED_TERMINAL", "--attention-index", "nope-attention")
		require.Error(t, err, out)
		var ie *inbox.IndexError
		require.ErrorAs(t, err, &ie)
		require.ErrorIs(t, err, inbox.ErrIndex)
		require.Equal(t, c.env.Table, ie.Table)
		require.Equal(t, "nope-attention", ie.Index)
		require.ErrorContains(t, err, "has no index nope-attention")
		require.ErrorContains(t, err, "--attention-index NAME (DDBWORKER_ATTENTION_INDEX)")
		require.ErrorContains(t, err, "tables adopt")
		require.NotContains(t, err.Error(), "ValidationException")
	})
	t.Run("flagged index not the inbox's", func(t *testing.T) {
		// GSI1 and GSI2 exist, each keyed on the other index's attributes.
		out, err := c.run("inbox", "list", "--status", "FAILED_TERMINAL", "--attention-index", "GSI1", "--aggregate-index", "GSI2")
		require.Error(t, err, out)
		var ie *inbox.IndexError
		require.ErrorAs(t, err, &ie)
		require.ErrorContains(t, err, "index GSI1 of table "+c.env.Table+" is keyed on (GSI1PK, GSI1SK), not on the inbox's attention index keys (GSI2PK, GSI2SK)")
		require.ErrorContains(t, err, "not the inbox's")
	})
	t.Run("recorded index missing", func(t *testing.T) {
		l := tables.DefaultLayout()
		l.AttentionIndex = "gone-attention"
		require.NoError(t, inbox.RecordSettings(ctx, c.env.DynamoDB, inbox.Store{Table: c.env.Table, Layout: l}, "test"))
		out, err := c.run("inbox", "list", "--status", "FAILED_TERMINAL")
		require.Error(t, err, out)
		var ie *inbox.IndexError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "gone-attention", ie.Index)
		require.ErrorContains(t, err, "has no index gone-attention")
		require.ErrorContains(t, err, "the table records this layout")
		require.Empty(t, out)
	})
	t.Run("the reader maps DynamoDB's refusal", func(t *testing.T) {
		// A library caller that skips the table check still gets the typed
		// error from the query itself.
		l := tables.DefaultLayout()
		l.AttentionIndex = "gone-attention"
		r, err := inbox.NewReader(c.env.DynamoDB, inbox.ReaderConfig{Store: inbox.Store{Table: c.env.Table, Layout: l}})
		require.NoError(t, err)
		_, err = r.ListAttention(ctx, inbox.StatusFailedTerminal, inbox.AttentionFilter{}, inbox.Page{})
		var ie *inbox.IndexError
		require.ErrorAs(t, err, &ie, "%v", err)
		require.Equal(t, "gone-attention", ie.Index)
		require.Equal(t, inbox.RoleAttention, ie.Role)
		require.ErrorContains(t, err, "Store.Layout.AttentionIndex")
	})
}

// `run` reads the recorded layout at start: with no layout flag its
// startup check passes on the application's table; on a table that
// records none, its refusal shows adopt only with index names of
// ddbworker's own.
func TestRecordedLayoutRunStartup(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	shop := newShopTable(t, env.DynamoDB)
	check := func(table string) (inbox.Store, error) {
		g := &globals{app: App{Name: "ddbworker"}, table: table, layout: tables.DefaultLayout(), shards: inbox.DefaultAttentionShards}
		resolve := func(ctx context.Context) (merged, error) { return g.mergeStore(ctx, env.DynamoDB, true) }
		return checkStartup(ctx, env.DynamoDB, env.SQS, resolve, table, env.Queues.URL, "", worker.PolicyQuarantine, time.Minute, "ddbworker",
			slog.New(slog.DiscardHandler))
	}
	_, err := check(shop)
	require.ErrorContains(t, err, "records no inbox layout")
	require.ErrorContains(t, err, "tables adopt --dry-run --aggregate-index NAME --attention-index NAME")

	out, err := layoutCLI(t, shop, append([]string{"tables", "create"}, shopLayoutFlags...)...)
	require.NoError(t, err, out)
	s, err := check(shop)
	require.NoError(t, err)
	require.Equal(t, shopLayout, s.Layout, "the recorded layout, with no flag")

	// A recorded layout the table no longer fits: no adopt of new names.
	changed := shopLayout
	changed.TTL = "validUntil"
	require.NoError(t, inbox.RecordSettings(ctx, env.DynamoDB, inbox.Store{Table: shop, Layout: changed}, "test"))
	_, err = check(shop)
	require.ErrorContains(t, err, `TTL is on attribute "expiresAt", not "validUntil"`)
	require.ErrorContains(t, err, "The table records this inbox layout")
	require.NotContains(t, err.Error(), "--aggregate-index NAME")
}

// A record written before the layout was recorded holds only the store's
// settings: commands take the layout from the flags (or defaults), checked
// against the table as before, and `tables create` adds it to the record.
func TestLayoutOldRecordReadable(t *testing.T) {
	c := newInboxCLI(t)
	ctx := context.Background()
	_, err := c.env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.env.Table), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"}, "SK": &types.AttributeValueMemberS{Value: "INBOX"},
		string(inbox.SettingAttentionShards): &types.AttributeValueMemberN{Value: "4"},
		string(inbox.SettingIndexProcessing): &types.AttributeValueMemberBOOL{Value: false},
		string(inbox.SettingCompletedTTL):    &types.AttributeValueMemberN{Value: "3024000"},
		string(inbox.SettingFailedTTL):       &types.AttributeValueMemberN{Value: "3024000"},
		string(inbox.SettingProcessingTTL):   &types.AttributeValueMemberN{Value: "604800"},
	}})
	require.NoError(t, err)
	c.failed(inbox.StatusFailedTerminal, "k-old", "BOOM", c.now) // 4 shards, as recorded

	doc := c.runJSON("inbox", "list", "--status", "FAILED_TERMINAL")
	require.Equal(t, []string{"k-old"}, keysOfJSON(doc), "the defaults' layout, and the recorded shards")
	_, err = c.run("inbox", "list", "--status", "FAILED_TERMINAL", "--attention-index", "nope")
	require.ErrorIs(t, err, inbox.ErrIndex, "a flagged layout is checked against the table")

	rec, _, err := inbox.ReadRecorded(ctx, c.env.DynamoDB, inbox.Store{Table: c.env.Table})
	require.NoError(t, err)
	require.False(t, rec.HasLayout())
	out, err := c.run("tables", "create")
	require.NoError(t, err, out)
	require.Contains(t, out, "--attention-shards 4", "the recorded settings kept")
	rec, _, err = inbox.ReadRecorded(ctx, c.env.DynamoDB, inbox.Store{Table: c.env.Table})
	require.NoError(t, err)
	require.True(t, rec.HasLayout(), "tables create records the layout")
	require.Equal(t, "GSI2", rec.Store.Layout.AttentionIndex)
}
