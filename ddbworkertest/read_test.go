package ddbworkertest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
)

// By the new user (issue 24): Before's items were not visible to the
// handler's own reads, so a test faked a reader and kept two copies of the
// state. A handler reading through a Reader reads the Existing items and
// decides on them: an order PAID ships (its ExpectVersion guard, judged
// against the same item, holds), one OPEN ends NOT_PAID, none ends
// ORDER_NOT_FOUND.
func TestHandlerReadsExistingItems(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("ShipOrder", ddbworker.JSON((&shipping{Table: "app", DB: ddbworkertest.Reader{}}).Ship)))
	order := func(status string) ddbworkertest.Existing {
		return ddbworkertest.Existing{Table: "app", Key: ddbworker.Key{"PK": "ORDER#o-1", "SK": "ORDER"}, Item: ddbworker.Item{"orderStatus": status, "v": 7}}
	}
	ship := ddbworkertest.NewMessage("ShipOrder", shipOrder{OrderID: "o-1"})
	kit := ddbworkertest.NewRegistry(reg)

	res := kit.Before(order("PAID")).RequireWork(t, ship)
	res.RequireApplied(t)
	w := res.RequireWrite(t, "app", ddbworker.Key{"PK": "ORDER#o-1", "SK": "ORDER"})
	require.Equal(t, `SET orderStatus = "SHIPPED", v = 8`, w.Update, "the version it read, plus one")
	require.Equal(t, "v = 7", w.Condition)
	require.Equal(t, ddbworkertest.Holds, w.Eval)

	kit.Before(order("OPEN")).RequireWork(t, ship).RequireTerminal(t, "NOT_PAID")
	kit.RequireWork(t, ship).RequireTerminal(t, "ORDER_NOT_FOUND")
	kit.Before(ddbworkertest.Existing{Table: "other", Key: ddbworker.Key{"PK": "ORDER#o-1", "SK": "ORDER"}}).
		RequireWork(t, ship).RequireTerminal(t, "ORDER_NOT_FOUND")
}

// A Reader reads as GetItem and BatchGetItem do, from the Work's items
// only: projected, absent, a key of another schema refused, and nothing
// outside Work.
func TestReader(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	key := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"PK": s(pk), "SK": s("X")}
	}
	existing := []ddbworkertest.Existing{
		{Table: "app", Key: ddbworker.Key{"PK": "A", "SK": "X"}, Item: ddbworker.Item{"status": "OPEN", "n": 1, "meta": map[string]string{"by": "ann"}}},
		{Table: "app", Key: ddbworker.Key{"PK": "B", "SK": "X"}},
		{Table: "keyed", Key: ddbworker.Key{"ID": "A"}},
	}
	type read struct {
		name string
		in   *dynamodb.GetItemInput
		want map[string]types.AttributeValue
		err  string
	}
	reads := []read{
		{"an item", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("A"), ConsistentRead: aws.Bool(true)},
			map[string]types.AttributeValue{"PK": s("A"), "SK": s("X"), "status": s("OPEN"), "n": n("1"), "meta": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"by": s("ann")}}}, ""},
		{"its key only", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("B")}, key("B"), ""},
		{"no item", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("C")}, nil, ""},
		{"a table the test declared nothing in", &dynamodb.GetItemInput{TableName: aws.String("empty"), Key: key("A")}, nil, ""},
		{"projected", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("A"), ProjectionExpression: aws.String("#s, n, missing"),
			ExpressionAttributeNames: map[string]string{"#s": "status"}}, map[string]types.AttributeValue{"status": s("OPEN"), "n": n("1")}, ""},
		{"a nested projection", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("A"), ProjectionExpression: aws.String("meta.by")}, nil, "top-level attributes only"},
		{"an unnamed placeholder", &dynamodb.GetItemInput{TableName: aws.String("app"), Key: key("A"), ProjectionExpression: aws.String("#s")}, nil, "not in ExpressionAttributeNames"},
		{"another key schema", &dynamodb.GetItemInput{TableName: aws.String("keyed"), Key: key("A")}, nil, "does not match the schema of keyed, whose items are keyed by ID"},
		{"no key", &dynamodb.GetItemInput{TableName: aws.String("app")}, nil, "needs a table and a key"},
	}
	type got struct {
		item  map[string]types.AttributeValue
		err   error
		batch *dynamodb.BatchGetItemOutput
	}
	var results []got
	kit := ddbworkertest.New(ddbworker.HandlerFunc(func(ctx context.Context, _ *ddbworker.Message) (ddbworker.Result, error) {
		for _, r := range reads {
			out, err := ddbworkertest.Reader{}.GetItem(ctx, r.in)
			g := got{err: err}
			if err == nil {
				g.item = out.Item
			}
			results = append(results, g)
		}
		b, err := ddbworkertest.Reader{}.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			"app":   {Keys: []map[string]types.AttributeValue{key("A"), key("C"), key("B")}, ProjectionExpression: aws.String("PK")},
			"empty": {Keys: []map[string]types.AttributeValue{key("A")}},
		}})
		require.NoError(t, err)
		results = append(results, got{batch: b})
		return ddbworker.Result{}, nil
	})).Before(existing...)
	kit.RequireWork(t, msg()).RequireApplied(t)
	require.Len(t, results, len(reads)+1)
	for i, r := range reads {
		if r.err != "" {
			require.ErrorContains(t, results[i].err, r.err, r.name)
			continue
		}
		require.NoError(t, results[i].err, r.name)
		require.Equal(t, r.want, results[i].item, r.name)
	}
	require.Equal(t, map[string][]map[string]types.AttributeValue{
		"app":   {{"PK": s("A")}, {"PK": s("B")}},
		"empty": {},
	}, results[len(reads)].batch.Responses)

	_, err := ddbworkertest.Reader{}.GetItem(context.Background(), reads[0].in)
	require.ErrorIs(t, err, ddbworkertest.ErrNoWork, "outside Work")
	_, err = ddbworkertest.Reader{}.BatchGetItem(context.Background(), &dynamodb.BatchGetItemInput{})
	require.ErrorIs(t, err, ddbworkertest.ErrNoWork)
}

// One Reader serves concurrent Works, each its own items.
func TestReaderConcurrentWorks(t *testing.T) {
	kit := ddbworkertest.New(ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		out, err := ddbworkertest.Reader{}.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"),
			Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "P"}}})
		if err != nil {
			return ddbworker.Result{}, err
		}
		if got := out.Item["owner"].(*types.AttributeValueMemberS).Value; got != m.Key() {
			return ddbworker.Result{}, ddbworker.Terminal("OTHER_ITEMS", got)
		}
		return ddbworker.Result{}, nil
	}))
	var wg sync.WaitGroup
	results := make([]*ddbworkertest.Result, 8)
	for i := range results {
		wg.Go(func() {
			k := fmt.Sprintf("k-%d", i)
			results[i] = kit.Before(ddbworkertest.Existing{Table: "t", Key: ddbworker.Key{"PK": "P"}, Item: ddbworker.Item{"owner": k}}).
				RequireWork(t, msg(ddbworkertest.Key(k)))
		})
	}
	wg.Wait()
	for _, r := range results {
		r.RequireApplied(t)
	}
}
