package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// After `tables adopt` under the names it proposed, the layout lives in
// the table: adopting again with no layout flag plans for the recorded
// layout and changes nothing; `inbox list` and run's startup check need no
// layout flag; and adopting with a layout flag that disagrees with the
// record is refused, naming both values, changing nothing.
func TestAdoptRecordsTheLayoutForEveryCommand(t *testing.T) {
	clearLayoutEnv(t)
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ddb := env.DynamoDB
	app := newShop(t, ddb)
	proposed := []string{"--aggregate-index", tables.AdoptAggregateIndex, "--aggregate-pk-attribute", tables.AdoptAggregatePK,
		"--aggregate-sk-attribute", tables.AdoptAggregateSK}
	layout, err := inbox.Store{Table: app.Name, Layout: tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: tables.AdoptAggregateIndex,
		AggregatePK: tables.AdoptAggregatePK, AggregateSK: tables.AdoptAggregateSK}}.WithDefaults()
	require.NoError(t, err)

	applied, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt", "--yes"}, proposed...)...)
	t.Logf("tables adopt --yes %s:\n%s", strings.Join(proposed, " "), applied)
	require.NoError(t, err, applied)
	require.Contains(t, applied, "table "+app.Name+" adopted: indexes ddbworker-aggregate and GSI2, TTL on \"ttl\"\n"+
		"inbox layout recorded in the table: --aggregate-index ddbworker-aggregate --aggregate-pk-attribute ddbworkerGSI1PK --aggregate-sk-attribute ddbworkerGSI1SK"+
		" --attention-index GSI2 --attention-pk-attribute GSI2PK --attention-sk-attribute GSI2SK --ttl-attribute ttl\n"+
		"every command on it (run, sweep, inbox, relay, the Lambda function) reads the layout from the table: give them no layout flag or DDBWORKER_* layout variable (one that disagrees with the record is refused)\n")
	require.NotContains(t, applied, "not recorded")
	rec, ok, err := inbox.ReadRecorded(ctx, ddb, inbox.Store{Table: app.Name, Layout: tables.Layout{PartitionKey: "PK", SortKey: "SK"}})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, rec.HasLayout())
	adopted := shopState(t, ddb, app.Name)

	t.Run("adopting again with no layout flag changes nothing", func(t *testing.T) {
		for _, args := range [][]string{{"--dry-run"}, {}, {"--yes"}} {
			out, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt"}, args...)...)
			require.NoError(t, err, "tables adopt %v:\n%s", args, out)
			require.Contains(t, out, "layout key (PK, SK), aggregate index ddbworker-aggregate (ddbworkerGSI1PK, ddbworkerGSI1SK), attention index GSI2 (GSI2PK, GSI2SK), TTL ttl")
			require.Contains(t, out, "nothing to change: the table fits the layout")
			require.NotContains(t, out, "BLOCKED")
			require.Equal(t, adopted, shopState(t, ddb, app.Name))
		}
	})

	t.Run("operator commands and run need no layout flag", func(t *testing.T) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		failedAt := inbox.FormatTime(now.Add(-time.Minute))
		r := inbox.NewRecord(&inbox.Work{Key: "order-9", MessageType: "OrderPaid", RequestHash: "h", SchemaVersion: 1,
			AggregateType: "Order", AggregateID: "ORDER#00-0", Producer: "shop"}, now.Add(-2*time.Minute))
		r.Status, r.FailureCode, r.FailureMessage, r.FailedAt = inbox.StatusFailedTerminal, "OUT_OF_STOCK", "no stock", failedAt
		r.GSI2PK, r.GSI2SK = inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard("order-9", layout.AttentionShards)), failedAt
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(app.Name), Item: layout.Encode(r)})
		require.NoError(t, err)

		out, err := layoutCLI(t, app.Name, "inbox", "list", "--status", "FAILED_TERMINAL", "-o", "json")
		require.NoError(t, err, out)
		require.Equal(t, []string{"order-9"}, keysOfJSON(layoutJSON(t, out)))
		out, err = layoutCLI(t, app.Name, "inbox", "list", "--aggregate", "Order/ORDER#00-0", "-o", "json")
		require.NoError(t, err, out)
		require.Equal(t, []string{"order-9"}, keysOfJSON(layoutJSON(t, out)), "through the adopted aggregate index, not the application's GSI1")

		g := &globals{app: App{Name: "ddbworker"}, table: app.Name, layout: tables.DefaultLayout(), shards: inbox.DefaultAttentionShards}
		resolve := func(ctx context.Context) (merged, error) { return g.mergeStore(ctx, ddb, true) }
		s, err := checkStartup(ctx, ddb, env.SQS, resolve, app.Name, env.Queues.URL, "", worker.PolicyQuarantine, time.Minute, "ddbworker",
			slog.New(slog.DiscardHandler))
		require.NoError(t, err, "run's startup check with no layout flag")
		require.Equal(t, layout.Layout, s.Layout, "the recorded layout")
	})

	t.Run("a layout flag that disagrees with the record is refused", func(t *testing.T) {
		for _, args := range [][]string{{"--dry-run"}, {"--yes"}} {
			out, _, err := adoptCLI(t, app.Name, strings.NewReader(""), append([]string{"tables", "adopt", "--aggregate-index", "GSI1"}, args...)...)
			require.ErrorContains(t, err, "--aggregate-index (DDBWORKER_AGGREGATE_INDEX) is GSI1 but table "+app.Name+" records ddbworker-aggregate")
			require.Empty(t, out, "no plan for a layout the table does not record")
			require.Equal(t, adopted, shopState(t, ddb, app.Name))
		}
	})
}
