package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// `tables adopt` on an application's table with its own keys, indexes,
// TTL attribute (expiresAt) and 300 items: without the layout that fits,
// the plan is refused naming each flag; a dry run prints the plan (table
// and JSON) and changes nothing; adopting prints the same plan, then its
// progress, adds the two indexes and the settings item and leaves every
// item as it was; adopting again changes nothing; `tables create` and
// run's startup check accept the table; and a worker runs on it, its
// records under the table's key names, expiring by the application's TTL
// attribute, listed through the new aggregate index.
func TestTablesAdopt(t *testing.T) {
	for _, kv := range os.Environ() { // no stray DDBWORKER_* flag values
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{VisibilityTimeout: 5 * time.Second}}) // its queues; its table stays unused
	ctx := context.Background()
	ddb := env.DynamoDB
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{TTL: "expiresAt"})
	items := app.Items(t, ddb)
	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd(App{})
		root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", app.Name}, args...))
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		err := root.ExecuteContext(ctx)
		require.Empty(t, errOut.String(), "nothing on stderr (errors are returned)")
		return out.String(), err
	}
	described := func() string {
		d, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(app.Name)})
		require.NoError(t, err)
		ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(app.Name)})
		require.NoError(t, err)
		b, err := json.Marshal([]any{d.Table, ttl.TimeToLiveDescription})
		require.NoError(t, err)
		return string(b)
	}
	before := described()
	layout := []string{"--pk-attribute", "pk", "--sk-attribute", "sk", "--ttl-attribute", "expiresAt"}

	// The key attributes come from the table's key schema, as for every
	// command; one given otherwise is refused.
	_, err := run("tables", "adopt", "--dry-run", "--pk-attribute", "PK")
	require.ErrorContains(t, err, "--pk-attribute (DDBWORKER_PK_ATTRIBUTE) is PK but table "+app.Name+"'s key is (pk, sk): leave the flag unset, the table's key schema names them")
	out, err := run("tables", "adopt", "--dry-run")
	require.Error(t, err)
	for _, want := range []string{
		"TTL: TTL is ENABLED on expiresAt, and DynamoDB allows one TTL attribute per table and forbids changing it while enabled: the inbox must use it too — its records then carry expiresAt (epoch seconds) and expire by it; your items keep expiring as before, nothing of yours changes: pass --ttl-attribute expiresAt (DDBWORKER_TTL_ATTRIBUTE)",
	} {
		require.Contains(t, err.Error(), want)
		require.Contains(t, out, "BLOCKED "+want)
	}
	require.ErrorContains(t, err, "table "+app.Name+" cannot be adopted; nothing was changed")
	var ae *tables.AdoptError
	require.ErrorAs(t, err, &ae)

	_, err = run(append([]string{"tables", "create"}, layout...)...)
	require.ErrorContains(t, err, "it has no index GSI1")
	require.ErrorContains(t, err, " tables adopt --dry-run` shows what adding the indexes and TTL to this table takes")

	dry, err := run(append([]string{"tables", "adopt", "--dry-run"}, layout...)...)
	require.NoError(t, err, dry)
	require.Contains(t, dry, "tables adopt plan (dry run: nothing is changed) for table "+app.Name+
		", layout key (pk, sk), aggregate index GSI1 (GSI1PK, GSI1SK), attention index GSI2 (GSI2PK, GSI2SK), TTL expiresAt")
	require.Equal(t, []string{
		"STEP  CHANGE           TARGET                  DETAIL",
		"1     create-index     GSI1                    (GSI1PK S, GSI1SK S) KEYS_ONLY, on-demand, as the table; waits for its backfill",
		"2     create-index     GSI2                    (GSI2PK S, GSI2SK S) KEYS_ONLY, on-demand, as the table; waits for its backfill",
		"3     record-settings  DDBWORKER#CONFIG/INBOX  PutItem --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s --request-hash-version v3 (none recorded yet)",
	}, section(dry, "STEP"))
	require.Equal(t, []string{
		"LEFT ALONE      DETAIL",
		"key             (pk S, sk S): the layout's",
		"index byEmail   yours, (email) ALL, ACTIVE: untouched",
		"index byStatus  yours, (status, placedAt) INCLUDE, ACTIVE: untouched",
		"TTL             ENABLED on expiresAt: the inbox records expire by it too (epoch seconds); yours as before",
	}, section(dry, "LEFT ALONE")[:5])
	require.NotContains(t, dry, "BLOCKED")

	js, err := run(append([]string{"tables", "adopt", "--dry-run", "-o", "json"}, layout...)...)
	require.NoError(t, err, js)
	var doc adoptDoc
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&doc), js)
	require.True(t, doc.DryRun)
	require.Equal(t, "expiresAt", doc.Layout["ttl-attribute"])
	var kinds []string
	for _, c := range doc.Changes {
		kinds = append(kinds, fmt.Sprintf("%d %s %s", c.Step, c.Kind, c.Target))
	}
	require.Equal(t, []string{"1 create-index GSI1", "2 create-index GSI2", "3 record-settings DDBWORKER#CONFIG/INBOX"}, kinds)
	require.Empty(t, doc.Blockers)
	require.Equal(t, before, described(), "a dry run changes nothing")
	_, recorded, err := inbox.ReadRecorded(ctx, ddb, inbox.Store{Table: app.Name, Layout: tables.Layout{PartitionKey: "pk", SortKey: "sk"}})
	require.NoError(t, err)
	require.False(t, recorded, "a dry run records nothing")

	applied, err := run(append([]string{"tables", "adopt", "--yes"}, layout...)...)
	require.NoError(t, err, applied)
	require.Equal(t, strings.Replace(dry, "plan (dry run: nothing is changed)", "plan", 1), applied[:len(dry)-len(" (dry run: nothing is changed)")],
		"the same plan, then its progress")
	progress := applied[len(dry)-len(" (dry run: nothing is changed)"):]
	require.Regexp(t, `(?m)^  \[1/3\] create-index GSI1: ACTIVE, 0 items, 0 bytes — done in \d+s$`, progress)
	require.Regexp(t, `(?m)^  \[2/3\] create-index GSI2: ACTIVE, 0 items, 0 bytes — done in \d+s$`, progress)
	require.Contains(t, progress, "  [3/3] record-settings DDBWORKER#CONFIG/INBOX — done\n")
	require.Contains(t, progress, "table "+app.Name+" adopted: indexes GSI1 and GSI2, TTL on \"expiresAt\"\n")
	require.Contains(t, progress, "inbox layout recorded in the table: --aggregate-index GSI1 --aggregate-pk-attribute GSI1PK --aggregate-sk-attribute GSI1SK"+
		" --attention-index GSI2 --attention-pk-attribute GSI2PK --attention-sk-attribute GSI2SK --ttl-attribute expiresAt\n")
	require.Contains(t, progress, "every command on it (run, sweep, inbox, relay, the Lambda function) reads the layout from the table")
	require.Equal(t, items, app.Items(t, ddb), "every application item as it was")

	again, err := run(append([]string{"tables", "adopt", "--yes"}, layout...)...)
	require.NoError(t, err, again)
	require.Contains(t, again, "nothing to change: the table fits the layout")
	require.Contains(t, again, "inbox settings  --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s --request-hash-version v3: recorded in the table")
	require.NotContains(t, again, "[1/")
	adopted := described()
	created, err := run(append([]string{"tables", "create"}, layout...)...)
	require.NoError(t, err, created)
	require.Contains(t, created, "table "+app.Name+" is ACTIVE with indexes GSI1, GSI2 and TTL on \"expiresAt\"")
	require.Equal(t, adopted, described(), "tables create finds nothing to do")

	store, err := inbox.Store{Table: app.Name, Layout: tables.Layout{PartitionKey: "pk", SortKey: "sk", TTL: "expiresAt"}}.WithDefaults()
	require.NoError(t, err)
	require.NoError(t, checkDependencies(ctx, ddb, env.SQS, store, env.Queues.URL, env.Queues.DLQURL, worker.PolicyDLQ, time.Minute, "svc",
		slog.New(slog.DiscardHandler)), "run's startup check accepts the adopted table")

	// A worker on it: two orders shipped, each sent twice.
	type shipped struct {
		Customer string `json:"customer"`
		Order    string `json:"order"`
	}
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderShipped", ddbworker.JSON(func(_ context.Context, msg *ddbworker.Message, p shipped) (ddbworker.Result, error) {
		return ddbworker.Apply(
			ddbworker.Put(app.Name, ddbworker.Key{"pk": p.Customer, "sk": "SHIPMENT#" + p.Order}, ddbworker.Item{"shippedBy": msg.Key()}).
				Guard(ddbworker.CreateOnly()),
			ddbworker.Update(app.Name, ddbworker.Key{"pk": p.Customer, "sk": "ORDER#" + p.Order}).Set("status", "SHIPPED").
				Guard(ddbworker.MustExist()),
		), nil
	})))
	events := make(chan worker.Event, 16)
	w, err := worker.New(worker.Deps{DynamoDB: ddb, SQS: env.SQS, Handlers: reg, OnEvent: func(ev worker.Event) { events <- ev }},
		worker.Config{Store: store, QueueURL: env.Queues.URL, DLQURL: env.Queues.DLQURL, Concurrency: 2, WaitTime: time.Second,
			VisibilityTimeout: 5 * time.Second, DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 5 * time.Second})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	orders := []string{"0001", "0002"}
	for i := range 4 {
		order := orders[i%2]
		payload, err := json.Marshal(shipped{Customer: "CUSTOMER#0000", Order: order})
		require.NoError(t, err)
		body, err := envelope.Encode(&envelope.Envelope{MessageID: fmt.Sprintf("m-%d", i), SchemaVersion: envelope.SchemaV1, MessageType: "OrderShipped",
			Producer: "test", OccurredAt: time.Now(), IdempotencyKey: "ship-" + order, AggregateType: "Order", AggregateID: order, Payload: payload})
		require.NoError(t, err)
		_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL), MessageBody: aws.String(string(body))})
		require.NoError(t, err)
	}
	outcomes := map[string]int{}
	for final := 0; final < 4; {
		select {
		case ev := <-events:
			if ev.Final {
				final++
				outcomes[ev.Outcome]++
			}
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the worker did not settle 4 messages", "%v", outcomes)
		}
	}
	require.Equal(t, map[string]int{worker.OutcomeApplied: 2, worker.OutcomeDuplicate: 2}, outcomes)

	for _, order := range orders {
		out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(app.Name), Key: store.Key("ship-"+order, "OrderShipped"), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Contains(t, out.Item, "pk", "the inbox record under the table's key names")
		require.Contains(t, out.Item, "expiresAt", "the inbox record expires by the application's TTL attribute")
		require.NotContains(t, out.Item, "ttl")
		rec, err := store.Decode(out.Item)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
	}
	listed, err := run(append([]string{"inbox", "list", "--aggregate", "Order/0001"}, layout...)...)
	require.NoError(t, err, listed)
	require.Contains(t, listed, "ship-0001", "listed through the aggregate index adopt added")

	after := map[string]map[string]types.AttributeValue{}
	for _, it := range app.Items(t, ddb) {
		after[itemKey(it)] = it
	}
	require.Len(t, after, len(items)+2, "two shipments added")
	for _, it := range items {
		got := after[itemKey(it)]
		if sk := it["sk"].(*types.AttributeValueMemberS).Value; it["pk"].(*types.AttributeValueMemberS).Value == "CUSTOMER#0000" && (sk == "ORDER#0001" || sk == "ORDER#0002") {
			require.Equal(t, &types.AttributeValueMemberS{Value: "SHIPPED"}, got["status"])
			delete(got, "status")
			it = maps.Clone(it)
			delete(it, "status")
		}
		require.Equal(t, it, got, "an application item the handler did not write is as it was")
	}
}

func itemKey(it map[string]types.AttributeValue) string {
	return it["pk"].(*types.AttributeValueMemberS).Value + "\x00" + it["sk"].(*types.AttributeValueMemberS).Value
}

// section returns the lines of out from the one starting with header to
// the next blank line.
func section(out, header string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case len(lines) == 0 && strings.HasPrefix(l, header):
			lines = append(lines, strings.TrimRight(l, " "))
		case len(lines) > 0 && l == "":
			return lines
		case len(lines) > 0:
			lines = append(lines, strings.TrimRight(l, " "))
		}
	}
	return lines
}

// layoutFlags names each Layout field once, with the root flag that sets
// it: the flag exists, its default is the field's default, and the value
// shown is the field's.
func TestLayoutFlagsAreTheRootFlags(t *testing.T) {
	root := newRootCmd(App{})
	distinct := tables.Layout{PartitionKey: "a", SortKey: "b", AggregateIndex: "c", AggregatePK: "d", AggregateSK: "e",
		AttentionIndex: "f", AttentionPK: "g", AttentionSK: "h", TTL: "i"}
	fields := reflect.TypeFor[tables.Layout]().NumField()
	require.Len(t, layoutFlags(distinct), fields, "every field")
	defaults := layoutFlags(tables.DefaultLayout())
	for i, lf := range layoutFlags(distinct) {
		f := root.PersistentFlags().Lookup(lf.flag)
		require.NotNil(t, f, lf.flag)
		require.Equal(t, defaults[i].value, f.DefValue, lf.flag)
		require.Equal(t, reflect.ValueOf(distinct).FieldByName(lf.field).String(), lf.value, lf.field)
		require.Equal(t, lf.flag, layoutFlag(lf.field))
	}
	require.Empty(t, layoutFlag(""))
}

// clearLayoutEnv unsets every DDBWORKER_* variable for the test: no stray
// flag value.
func clearLayoutEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

// tty is a terminal's stdin for the test: answers, and a character device.
type tty struct{ *strings.Reader }

func (tty) Stat() (os.FileInfo, error) { return ttyInfo{}, nil }

type ttyInfo struct{ os.FileInfo }

func (ttyInfo) Mode() os.FileMode { return os.ModeDevice | os.ModeCharDevice | 0o620 }

// adoptCLI runs the command line on table, with stdin in, and returns its
// stdout, its stderr and its error.
func adoptCLI(t *testing.T, table string, in io.Reader, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd(App{})
	root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", table}, args...))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(in)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// newShop is the measured application table: key PK/SK, its own GSI1 on
// GSI1PK/GSI1SK (projection ALL, the single-table convention) besides the
// testenv indexes, TTL off, and customers and orders that carry GSI1PK and
// GSI1SK; extra items are added as given.
func newShop(t *testing.T, ddb *dynamodb.Client, extra ...map[string]types.AttributeValue) *testenv.AppTable {
	t.Helper()
	app := testenv.NewAppTable(t, ddb, testenv.AppTableOptions{PK: "PK", SK: "SK", Items: 20,
		Indexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("GSI1"), KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("GSI1PK"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("GSI1SK"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
		Attributes: []types.AttributeDefinition{{AttributeName: aws.String("GSI1PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("GSI1SK"), AttributeType: types.ScalarAttributeTypeS}}})
	items := extra
	for c := range 5 {
		customer := fmt.Sprintf("SHOPPER#%02d", c)
		items = append(items, map[string]types.AttributeValue{"PK": str(customer), "SK": str("PROFILE"), "GSI1PK": str(fmt.Sprintf("EMAIL#s%02d@example.com", c)),
			"GSI1SK": str(customer), "name": str(fmt.Sprintf("Shopper %d", c))})
		for o := range 3 {
			order := fmt.Sprintf("ORDER#%02d-%d", c, o)
			items = append(items, map[string]types.AttributeValue{"PK": str(customer), "SK": str(order), "GSI1PK": str(order), "GSI1SK": str(customer),
				"status": str("OPEN"), "placedAt": str("2024-05-01T10:00:00Z"), "total": num(int64(10*c + o))})
		}
	}
	for _, it := range items {
		_, err := ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(app.Name), Item: it})
		require.NoError(t, err)
	}
	return app
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }

// shopState is what must not change of the shop table: its indexes' key
// schema, projection and status, and its TTL.
func shopState(t *testing.T, ddb *dynamodb.Client, table string) string {
	t.Helper()
	d, err := ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	ttl, err := ddb.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	require.NoError(t, err)
	var b strings.Builder
	for _, g := range d.Table.GlobalSecondaryIndexes {
		fmt.Fprintf(&b, "%s %s %s %v %s\n", aws.ToString(g.IndexName), describeKeySchema(g.KeySchema), g.Projection.ProjectionType, g.Projection.NonKeyAttributes, g.IndexStatus)
	}
	fmt.Fprintf(&b, "TTL %s %s", ttl.TimeToLiveDescription.TimeToLiveStatus, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	return b.String()
}

func describeKeySchema(ks []types.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return strings.Join(parts, ",")
}

// Measured case 1: on a table with its own GSI1 on GSI1PK/GSI1SK
// (projection ALL), adopting with the default layout is refused — the
// index is the application's — naming --share-index and a layout of names
// the table does not use; that layout is planned, refused without --yes
// when stdin is no terminal, not applied when the answer is no, applied on
// yes; then a worker with it runs messages, and the application's GSI1
// holds none of the inbox records, its indexes are as they were and every
// item of its reads back attribute by attribute unchanged.
func TestAdoptKeepsTheApplicationsIndex(t *testing.T) {
	clearLayoutEnv(t)
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{VisibilityTimeout: 5 * time.Second}})
	ctx := context.Background()
	ddb := env.DynamoDB
	app := newShop(t, ddb)
	items := app.Items(t, ddb)
	before := shopState(t, ddb, app.Name)
	beforeIndexes := before[:strings.LastIndex(before, "TTL")]

	out, errOut, err := adoptCLI(t, app.Name, strings.NewReader(""), "tables", "adopt")
	t.Logf("tables adopt (defaults):\n%s%s\nerror: %v", out, errOut, err)
	require.ErrorContains(t, err, "cannot be adopted; nothing was changed")
	require.Regexp(t, `BLOCKED index GSI1: an index of that name and keys exists, \(GSI1PK, GSI1SK\) ALL, ACTIVE, and nothing shows it is ddbworker's: 20 of the first 20 items in it are not inbox records \(one: PK=SHOPPER#\d+ SK=[^)]+\)\. `+
		`The inbox records would enter it beside your items, projected ALL, and the index's key attributes are yours too: pass --aggregate-index ddbworker-aggregate \(DDBWORKER_AGGREGATE_INDEX\), or --share-index GSI1 to share it`, out)
	proposed := "--aggregate-index ddbworker-aggregate --aggregate-pk-attribute ddbworkerGSI1PK --aggregate-sk-attribute ddbworkerGSI1SK"
	require.Contains(t, out, "names your table does not use (adopting records them in the table, for every command on it): "+proposed+"\n")
	require.ErrorContains(t, err, " tables adopt --dry-run "+proposed+"`")
	require.Equal(t, before, shopState(t, ddb, app.Name), "nothing changed")
	layout := strings.Fields(proposed)

	dry, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt", "--dry-run"}, layout...)...)
	t.Logf("tables adopt --dry-run %s:\n%s", proposed, dry)
	require.NoError(t, err, dry)
	require.Equal(t, []string{
		"STEP  CHANGE           TARGET                  DETAIL",
		"1     create-index     ddbworker-aggregate     (ddbworkerGSI1PK S, ddbworkerGSI1SK S) KEYS_ONLY, on-demand, as the table; waits for its backfill",
		"2     create-index     GSI2                    (GSI2PK S, GSI2SK S) KEYS_ONLY, on-demand, as the table; waits for its backfill",
		"3     enable-ttl       ttl                     UpdateTimeToLive: TTL on ttl (epoch seconds); no item of yours carries it (all 40 items read, the whole table)",
		"4     record-settings  DDBWORKER#CONFIG/INBOX  PutItem --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s --request-hash-version v3 (none recorded yet)",
	}, section(dry, "STEP"))
	require.Contains(t, dry, "index GSI1      yours, (GSI1PK, GSI1SK) ALL, ACTIVE: untouched")

	for _, tc := range []struct {
		name string
		in   io.Reader
		want string // the error
	}{
		{"stdin not a terminal", strings.NewReader("y\n"), "tables adopt: not confirmed; nothing was changed: stdin is not a terminal to ask on — pass --yes to apply the 4 changes as printed, or --dry-run to only plan"},
		{"answered no", tty{strings.NewReader("n\n")}, `tables adopt: not confirmed; nothing was changed (answered "n")`},
		{"no answer", tty{strings.NewReader("")}, "tables adopt: not confirmed; nothing was changed: no answer (EOF) — pass --yes to apply the 4 changes as printed, or --dry-run to only plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := adoptCLI(t, app.Name, tc.in, append([]string{"tables", "adopt"}, layout...)...)
			require.EqualError(t, err, tc.want)
			require.True(t, strings.HasPrefix(out, strings.Replace(dry, "plan (dry run: nothing is changed)", "plan", 1)), "the plan, printed first:\n%s", out)
			require.Equal(t, before, shopState(t, ddb, app.Name), "nothing applied")
		})
	}

	applied, _, err := adoptCLI(t, app.Name, tty{strings.NewReader("y\n")}, append([]string{"tables", "adopt"}, layout...)...)
	t.Logf("tables adopt %s, answered y:\n%s", proposed, applied)
	require.NoError(t, err, applied)
	require.Contains(t, applied, "Apply these 4 changes to table "+app.Name+"? Only y or yes applies them. [y/N] ")
	require.Contains(t, applied, "  [4/4] record-settings DDBWORKER#CONFIG/INBOX — done\n")
	require.Contains(t, applied, "table "+app.Name+" adopted: indexes ddbworker-aggregate and GSI2, TTL on \"ttl\"\n")
	after := shopState(t, ddb, app.Name)
	for _, ix := range strings.Split(strings.TrimSpace(beforeIndexes), "\n") {
		require.Contains(t, after, ix+"\n", "the application's index as it was")
	}
	require.Contains(t, after, "ddbworker-aggregate ddbworkerGSI1PK:HASH,ddbworkerGSI1SK:RANGE KEYS_ONLY [] ACTIVE")
	again, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt"}, layout...)...)
	require.NoError(t, err, again)
	require.Contains(t, again, "nothing to change: the table fits the layout")
	require.Contains(t, again, "index ddbworker-aggregate  ddbworker's (named as ddbworker's)")

	// A worker with that layout: two orders paid, each sent twice.
	store, err := inbox.Store{Table: app.Name, Layout: tables.Layout{AggregateIndex: tables.AdoptAggregateIndex, AggregatePK: tables.AdoptAggregatePK,
		AggregateSK: tables.AdoptAggregateSK}}.WithDefaults()
	require.NoError(t, err)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPaid", ddbworker.JSON(func(_ context.Context, msg *ddbworker.Message, p struct{ Order string }) (ddbworker.Result, error) {
		return ddbworker.Apply(ddbworker.Put(app.Name, ddbworker.Key{"PK": "PAYMENT#" + p.Order, "SK": "PAYMENT"}, ddbworker.Item{"paidBy": msg.Key()}).
			Guard(ddbworker.CreateOnly())), nil
	})))
	events := make(chan worker.Event, 16)
	w, err := worker.New(worker.Deps{DynamoDB: ddb, SQS: env.SQS, Handlers: reg, OnEvent: func(ev worker.Event) { events <- ev }},
		worker.Config{Store: store, QueueURL: env.Queues.URL, DLQURL: env.Queues.DLQURL, Concurrency: 2, WaitTime: time.Second,
			VisibilityTimeout: 5 * time.Second, DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 5 * time.Second})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	for i := range 4 {
		order := fmt.Sprintf("ORDER#%02d-0", i%2)
		body, err := envelope.Encode(&envelope.Envelope{MessageID: fmt.Sprintf("m-%d", i), SchemaVersion: envelope.SchemaV1, MessageType: "OrderPaid",
			Producer: "test", OccurredAt: time.Now(), IdempotencyKey: "pay-" + order, AggregateType: "Order", AggregateID: order,
			Payload: json.RawMessage(fmt.Sprintf(`{"Order":%q}`, order))})
		require.NoError(t, err)
		_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL), MessageBody: aws.String(string(body))})
		require.NoError(t, err)
	}
	outcomes := map[string]int{}
	for final := 0; final < 4; {
		select {
		case ev := <-events:
			if ev.Final {
				final++
				outcomes[ev.Outcome]++
			}
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the worker did not settle 4 messages", "%v", outcomes)
		}
	}
	require.Equal(t, map[string]int{worker.OutcomeApplied: 2, worker.OutcomeDuplicate: 2}, outcomes)

	indexed := func(index string) (records, others int) {
		p := dynamodb.NewScanPaginator(ddb, &dynamodb.ScanInput{TableName: aws.String(app.Name), IndexName: aws.String(index)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			require.NoError(t, err)
			for _, it := range page.Items {
				if strings.HasPrefix(it["PK"].(*types.AttributeValueMemberS).Value, "IDEMP#") {
					records++
				} else {
					others++
				}
			}
		}
		return records, others
	}
	records, others := indexed("GSI1")
	require.Zero(t, records, "no inbox record in the application's GSI1")
	require.Equal(t, 20, others, "the application's items in it, as before")
	records, others = indexed(tables.AdoptAggregateIndex)
	require.Equal(t, []int{2, 0}, []int{records, others}, "the inbox records in the inbox's own index, and nothing of the application's")

	got := map[string]map[string]types.AttributeValue{}
	for _, it := range app.Items(t, ddb) {
		got[it["PK"].(*types.AttributeValueMemberS).Value+"\x00"+it["SK"].(*types.AttributeValueMemberS).Value] = it
	}
	require.Len(t, got, len(items)+2, "two payments added")
	for _, it := range items {
		k := it["PK"].(*types.AttributeValueMemberS).Value + "\x00" + it["SK"].(*types.AttributeValueMemberS).Value
		require.Equal(t, it, got[k], "the application's item %q attribute by attribute as it was", k)
	}
	require.Equal(t, after, shopState(t, ddb, app.Name))
}

// Measured cases 2 and 3, through the command: items carrying GSI2SK as a
// Number, and TTL off with items carrying ttl in the past, block adopting
// with the default layout (GSI1 shared as told), naming the counts, an
// example key and the flags; nothing is created, TTL stays off, and the
// application's write of a Number GSI2SK still succeeds.
func TestAdoptRefusesToChangeTheApplicationsItems(t *testing.T) {
	clearLayoutEnv(t)
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	past := time.Now().Add(-2 * time.Hour).Unix()
	for _, tc := range []struct {
		name  string
		extra []map[string]types.AttributeValue
		want  []string // regexps of the output
		fix   []string // the flags that let adoption go ahead, and its steps
		steps []string
	}{{
		name: "2: GSI2SK a number",
		extra: []map[string]types.AttributeValue{
			{"PK": str("LEADERBOARD"), "SK": str("PLAYER#01"), "GSI2PK": str("SCORES"), "GSI2SK": num(120)},
			{"PK": str("LEADERBOARD"), "SK": str("PLAYER#02"), "GSI2PK": str("SCORES"), "GSI2SK": num(95)},
		},
		want: []string{`BLOCKED attribute GSI2SK: 2 items of yours \(all 42 items read, the whole table\) carry it with another type than a string, e\.g\. PK=LEADERBOARD SK=PLAYER#0[12]: ` +
			`the new index GSI2 would be keyed on it as a string, and DynamoDB would then refuse every write of such an item \("Type mismatch for Index Key"\): ` +
			`pass --attention-sk-attribute ddbworkerGSI2SK \(DDBWORKER_ATTENTION_SK_ATTRIBUTE\)`,
			`names your table does not use \(adopting records them in the table, for every command on it\): --attention-index ddbworker-attention --attention-pk-attribute ddbworkerGSI2PK --attention-sk-attribute ddbworkerGSI2SK\n`},
		fix:   []string{"--attention-index", "ddbworker-attention", "--attention-pk-attribute", "ddbworkerGSI2PK", "--attention-sk-attribute", "ddbworkerGSI2SK"},
		steps: []string{"1 create-index ddbworker-attention", "2 enable-ttl ttl", "3 record-settings DDBWORKER#CONFIG/INBOX"},
	}, {
		name: "3: ttl in the past",
		extra: []map[string]types.AttributeValue{
			{"PK": str("CART#01"), "SK": str("CART"), "ttl": num(past)},
			{"PK": str("CART#02"), "SK": str("CART"), "ttl": num(past)},
			{"PK": str("CART#03"), "SK": str("CART"), "ttl": num(time.Now().Add(time.Hour).Unix())},
		},
		want: []string{`BLOCKED TTL: 3 items of yours \(all 43 items read, the whole table\) carry ttl: 2 a number of epoch seconds in the past, which DynamoDB would delete within about two days of TTL being enabled; ` +
			`1 a later one, deleted when it comes; 0 not a number \(TTL ignores them\); e\.g\. PK=CART#0[12] SK=CART\. TTL is enabled on an attribute items of yours carry only when told to: ` +
			`pass --ttl-attribute ddbworkerTTL \(DDBWORKER_TTL_ATTRIBUTE\), or --ttl-existing-items to enable TTL on it anyway`,
			`names your table does not use \(adopting records them in the table, for every command on it\): --ttl-attribute ddbworkerTTL\n`},
		fix:   []string{"--ttl-attribute", "ddbworkerTTL"},
		steps: []string{"1 create-index GSI2", "2 enable-ttl ddbworkerTTL", "3 record-settings DDBWORKER#CONFIG/INBOX"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			app := newShop(t, ddb, tc.extra...)
			items := app.Items(t, ddb)
			before := shopState(t, ddb, app.Name)
			var err error
			for _, args := range [][]string{{"--dry-run"}, {"--yes"}} {
				var out string
				out, _, err = adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt", "--share-index", "GSI1"}, args...)...)
				t.Logf("tables adopt --share-index GSI1 %s:\n%s\nerror: %v", strings.Join(args, " "), out, err)
				require.ErrorContains(t, err, "cannot be adopted; nothing was changed")
				for _, want := range tc.want {
					require.Regexp(t, want, out)
				}
				require.Contains(t, out, "index GSI1      yours (20 of the first 20 items in it are not inbox records")
				require.Equal(t, before, shopState(t, ddb, app.Name), "nothing created, TTL as it was")
				require.Equal(t, items, app.Items(t, ddb))
			}
			js, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt", "--share-index", "GSI1", "--dry-run", "-o", "json"}, tc.fix...)...)
			require.NoError(t, err, js)
			var doc adoptDoc
			require.NoError(t, json.Unmarshal([]byte(js), &doc))
			var steps []string
			for _, c := range doc.Changes {
				steps = append(steps, fmt.Sprintf("%d %s %s", c.Step, c.Kind, c.Target))
			}
			require.Equal(t, tc.steps, steps, "the names the plan proposed fit")

			_, err = ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(app.Name),
				Item: map[string]types.AttributeValue{"PK": str("LEADERBOARD"), "SK": str("PLAYER#03"), "GSI2PK": str("SCORES"), "GSI2SK": num(80)}})
			require.NoError(t, err, "the application's own write of a number GSI2SK still succeeds")
		})
	}
}
