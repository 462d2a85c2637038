package outbox_test

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/outbox"
)

// A producer ships an order and publishes OrderShipped in one transaction:
// the order's update and the outbox record commit together or not at all.
// A relay (ddbworker relay, or the Lambda stream handler) sends it later.
func ExampleWriter_Put() {
	ctx := context.Background()
	var ddb *dynamodb.Client // the producer's client
	w, err := outbox.New(outbox.Config{Table: "orders"})
	if err != nil {
		panic(err)
	}
	version := int64(7)
	put, err := w.Put(context.Background(), outbox.Event{Envelope: &envelope.Envelope{
		MessageID: "9b1f6c1e-4c1d-4c53-a3a4-5f0e6f1d2a10", SchemaVersion: envelope.SchemaV1,
		MessageType: "OrderShipped", Producer: "orders", OccurredAt: time.Now(),
		IdempotencyKey: "order-o-42-shipped", AggregateType: "Order", AggregateID: "o-42", AggregateVersion: &version,
		Payload: []byte(`{"orderId":"o-42","carrier":"DHL"}`),
	}})
	if err != nil {
		panic(err)
	}
	upd := expression.Set(expression.Name("state"), expression.Value("SHIPPED")).Set(expression.Name("version"), expression.Value(version))
	cond := expression.Name("version").Equal(expression.Value(version - 1))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		panic(err)
	}
	_, err = ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("orders"),
			Key:              map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "ORDER#o-42"}, "SK": &types.AttributeValueMemberS{Value: "ORDER"}},
			UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}},
		put, // the outbox record
	}})
	if err != nil {
		panic(err) // neither the order nor the outbox record changed
	}
}
