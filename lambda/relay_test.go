package lambda_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/outbox"
)

func TestNewRelayConfigurationErrors(t *testing.T) {
	_, err := lambda.NewRelay(context.Background(), lookup(map[string]string{"DDBWORKER_QUEUE_URL": "not-a-url",
		"DDBWORKER_OUTBOX_SHARDS": "500", "DDBWORKER_PUBLISHED_TTL": "1s", "DDBWORKER_LOG_LEVEL": "loud"}))
	require.Error(t, err)
	for _, want := range []string{"DDBWORKER_TABLE is required", `DDBWORKER_QUEUE_URL="not-a-url": not a queue URL`,
		`DDBWORKER_OUTBOX_SHARDS="500": must be within 1..100`, `DDBWORKER_PUBLISHED_TTL="1s": must be at least 1m0s`,
		`DDBWORKER_LOG_LEVEL="loud"`} {
		require.ErrorContains(t, err, want)
	}
}

// The relay function's handler, configured from the environment,
// publishes the outbox record of a stream event and marks it.
func TestNewRelayPublishes(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	h, err := lambda.NewRelay(ctx, lookup(map[string]string{"DDBWORKER_TABLE": env.Table, "DDBWORKER_QUEUE_URL": env.Queues.URL}))
	require.NoError(t, err)
	w, err := outbox.New(outbox.Config{Table: env.Table})
	require.NoError(t, err)
	ev := &envelope.Envelope{MessageID: "m-1", SchemaVersion: envelope.SchemaV1, MessageType: "Noted", Producer: "test",
		OccurredAt: time.Now(), IdempotencyKey: "k-1", AggregateType: "Note", AggregateID: "n-1", Payload: []byte(`{}`)}
	put, err := w.Put(context.Background(), outbox.Event{Envelope: ev})
	require.NoError(t, err)
	_, err = env.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
	require.NoError(t, err)
	img := map[string]events.DynamoDBAttributeValue{}
	for k, v := range put.Put.Item {
		img[k] = events.NewStringAttribute(v.(*types.AttributeValueMemberS).Value)
	}
	resp, err := h(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT",
		Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: "100"}}}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	out, err := env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.Queues.URL), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	body, err := envelope.Encode(ev)
	require.NoError(t, err)
	require.Equal(t, string(body), aws.ToString(out.Messages[0].Body))
}
