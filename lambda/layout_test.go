package lambda_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/tables"
)

// At cold start the function reads the layout the table records, as it
// reads the other settings: with no layout variable it writes its records
// under the recorded names; a layout variable that disagrees fails the
// init, naming the variable and both values.
func TestNewReadsTheRecordedLayout(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	layout := tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: "inbox-aggregate", AggregatePK: "inboxAggPK", AggregateSK: "inboxAggSK",
		AttentionIndex: "inbox-attention", AttentionPK: "inboxAttnPK", AttentionSK: "inboxAttnSK", TTL: "expiresAt"}
	table := testenv.Unique("t")
	require.NoError(t, tables.Ensure(ctx, w.env.DynamoDB, tables.Config{Name: table, Layout: layout}))
	t.Cleanup(func() {
		_, _ = w.env.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	store, err := inbox.Store{Table: table, Layout: layout}.WithDefaults()
	require.NoError(t, err)
	require.NoError(t, inbox.RecordSettings(ctx, w.env.DynamoDB, store, "ops"))

	env := w.functionEnv(true)
	env["DDBWORKER_TABLE"] = table
	var registered tables.Layout
	handle, err := lambda.New(ctx, func(reg *lambda.Registry, e lambda.Env) error {
		registered = e.Store.Layout
		return registerInvoices(reg, e)
	}, lookup(env))
	require.NoError(t, err, "no layout variable: the recorded layout")
	require.Equal(t, layout, registered, "the handlers see the recorded layout (an effects log writes under it)")

	const key = "k-layout-1"
	w.send(request(t, key, invoices.InvoiceRequested{OrderID: "o-none", AmountCents: 1, Currency: "EUR"}))
	_, err = handle(ctx, w.receive(1, time.Minute))
	require.NoError(t, err)
	out, err := w.env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: store.Key(key, invoices.TypeInvoiceRequested)})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item)
	for _, name := range []string{"inboxAggPK", "inboxAttnPK", "expiresAt"} {
		require.Contains(t, out.Item, name, "written under the recorded layout")
	}
	for _, name := range []string{"GSI1PK", "GSI2PK", "ttl"} {
		require.NotContains(t, out.Item, name, "nothing under the default names")
	}

	env["DDBWORKER_ATTENTION_INDEX"] = "GSI2"
	_, err = lambda.New(ctx, registerInvoices, lookup(env))
	require.ErrorContains(t, err, "DDBWORKER_ATTENTION_INDEX is GSI2 but table "+table+" records inbox-attention")
}
