package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
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

	out, err := run("tables", "adopt", "--dry-run")
	require.Error(t, err)
	for _, want := range []string{
		"key: the table's partition key is pk, not PK, and a key schema cannot change: pass --pk-attribute pk (DDBWORKER_PK_ATTRIBUTE)",
		"key: the table's sort key is sk, not SK, and a key schema cannot change: pass --sk-attribute sk (DDBWORKER_SK_ATTRIBUTE)",
		"TTL: TTL is ENABLED on expiresAt, and DynamoDB allows one TTL attribute per table and forbids changing it while enabled: the inbox must use it too (your items keep expiring as before): pass --ttl-attribute expiresAt (DDBWORKER_TTL_ATTRIBUTE)",
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
		"3     record-settings  DDBWORKER#CONFIG/INBOX  PutItem --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s (none recorded yet)",
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

	applied, err := run(append([]string{"tables", "adopt"}, layout...)...)
	require.NoError(t, err, applied)
	require.Equal(t, strings.Replace(dry, "plan (dry run: nothing is changed)", "plan", 1), applied[:len(dry)-len(" (dry run: nothing is changed)")],
		"the same plan, then its progress")
	progress := applied[len(dry)-len(" (dry run: nothing is changed)"):]
	require.Regexp(t, `(?m)^  \[1/3\] create-index GSI1: ACTIVE, 0 items, 0 bytes — done in \d+s$`, progress)
	require.Regexp(t, `(?m)^  \[2/3\] create-index GSI2: ACTIVE, 0 items, 0 bytes — done in \d+s$`, progress)
	require.Contains(t, progress, "  [3/3] record-settings DDBWORKER#CONFIG/INBOX — done\n")
	require.Contains(t, progress, "table "+app.Name+" adopted: indexes GSI1 and GSI2, TTL on \"expiresAt\"\n")
	require.Contains(t, progress, "every command on this table needs the same layout (it is not recorded in the table): --pk-attribute pk --sk-attribute sk --ttl-attribute expiresAt")
	require.Equal(t, items, app.Items(t, ddb), "every application item as it was")

	again, err := run(append([]string{"tables", "adopt"}, layout...)...)
	require.NoError(t, err, again)
	require.Contains(t, again, "nothing to change: the table fits the layout")
	require.Contains(t, again, "inbox settings  --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s: recorded in the table")
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
