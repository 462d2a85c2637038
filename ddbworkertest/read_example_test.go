package ddbworkertest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
)

// shipping reads the order before it ships it: a handler that decides on
// what it reads, through an interface a *dynamodb.Client satisfies in
// production and a ddbworkertest.Reader in a test.
type shipping struct {
	Table string
	DB    interface {
		GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}
}

type shipOrder struct {
	OrderID string `json:"orderId"`
}

func (h *shipping) Ship(ctx context.Context, _ *ddbworker.Message, p shipOrder) (ddbworker.Result, error) {
	key := ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "ORDER"}
	k, err := attributevalue.MarshalMap(map[string]any(key))
	if err != nil {
		return ddbworker.Result{}, err
	}
	out, err := h.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(h.Table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ddbworker.Result{}, err
	}
	var order struct {
		Status  string `dynamodbav:"orderStatus"`
		Version int64  `dynamodbav:"v"`
	}
	if out.Item == nil {
		return ddbworker.Result{}, ddbworker.Terminal("ORDER_NOT_FOUND", "no order "+p.OrderID)
	}
	if err := attributevalue.UnmarshalMap(out.Item, &order); err != nil {
		return ddbworker.Result{}, err
	}
	if order.Status != "PAID" {
		return ddbworker.Result{}, ddbworker.Terminal("NOT_PAID", "order "+p.OrderID+" is "+order.Status)
	}
	return ddbworker.Apply(ddbworker.Update(h.Table, key).Set("orderStatus", "SHIPPED").Set("v", order.Version+1).
		Guard(ddbworker.ExpectVersion("v", order.Version))), nil
}

// A handler that reads reads the items the test declares (Before), through
// a Reader: the same items its commit is judged against — one statement of
// the tables, no fake of the test's own.
func ExampleReader() {
	reg := ddbworker.NewRegistry()
	if err := reg.Register("ShipOrder", ddbworker.JSON((&shipping{Table: "app", DB: ddbworkertest.Reader{}}).Ship)); err != nil {
		log.Fatal(err)
	}
	kit := ddbworkertest.NewRegistry(reg)
	for _, status := range []string{"PAID", "OPEN"} {
		res, err := kit.Before(ddbworkertest.Existing{
			Table: "app", Key: ddbworker.Key{"PK": "ORDER#o-1", "SK": "ORDER"}, Item: ddbworker.Item{"orderStatus": status, "v": 3},
		}).Work(context.Background(), ddbworkertest.NewMessage("ShipOrder", shipOrder{OrderID: "o-1"}))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res)
	}
	// Output:
	// applied APPLIED
	//   0 Update app {PK: "ORDER#o-1", SK: "ORDER"} SET orderStatus = "SHIPPED", v = 4 IF v = 3  [holds]
	// terminal NOT_PAID: order o-1 is OPEN
}
