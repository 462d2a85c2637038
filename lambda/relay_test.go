package lambda_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tracing"
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

// With tracing on, the relay function's invocation is a span — server,
// named after the function, faas.trigger datasource (a DynamoDB stream),
// failed when a record comes back — that parents the relay's send spans,
// and the line the handler logs when a record is not published is written
// inside it: it carries the invocation's trace id (and its request id).
func TestNewRelayTracesItsInvocation(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	recv := newOTLPReceiver(t)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-relay-1",
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:relay-fn"})
	w, err := outbox.New(outbox.Config{Table: env.Table})
	require.NoError(t, err)
	var records []events.DynamoDBEventRecord
	for i, dest := range []string{"", env.Queues.URL + "-missing"} {
		ev := &envelope.Envelope{MessageID: fmt.Sprintf("m-%d", i), SchemaVersion: envelope.SchemaV1, MessageType: "Noted", Producer: "test",
			OccurredAt: time.Now(), IdempotencyKey: fmt.Sprintf("k-%d", i), AggregateType: "Note", AggregateID: fmt.Sprintf("n-%d", i), Payload: []byte(`{}`)}
		put, err := w.Put(context.Background(), outbox.Event{Envelope: ev, Destination: dest})
		require.NoError(t, err)
		_, err = env.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
		require.NoError(t, err)
		img := map[string]events.DynamoDBAttributeValue{}
		for k, v := range put.Put.Item {
			img[k] = events.NewStringAttribute(v.(*types.AttributeValueMemberS).Value)
		}
		records = append(records, events.DynamoDBEventRecord{EventName: "INSERT",
			Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: fmt.Sprint(100 + i)}})
	}
	var resp events.DynamoDBEventResponse
	logs := captureStdout(t, func() {
		h, err := lambda.NewRelay(ctx, lookup(map[string]string{"DDBWORKER_TABLE": env.Table, "DDBWORKER_QUEUE_URL": env.Queues.URL,
			"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL, "AWS_LAMBDA_FUNCTION_NAME": "relay-fn"}))
		require.NoError(t, err)
		resp, err = h(ctx, events.DynamoDBEvent{Records: records})
		require.NoError(t, err)
	})
	require.Equal(t, []events.DynamoDBBatchItemFailure{{ItemIdentifier: "101"}}, resp.BatchItemFailures, "the record for the missing queue")

	var invocation *tracepb.Span
	var sends []*tracepb.Span
	for _, s := range recv.received() {
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			invocation = s
		case strings.HasPrefix(s.Name, "send "):
			sends = append(sends, s)
		}
	}
	require.NotNil(t, invocation, "the invocation's span, flushed before it answered")
	require.Equal(t, "relay-fn", invocation.Name)
	a := otlpAttrs(invocation.Attributes)
	require.Equal(t, "datasource", a["faas.trigger"].GetStringValue())
	require.Equal(t, "req-relay-1", a["faas.invocation_id"].GetStringValue())
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, invocation.GetStatus().GetCode(), "a record came back")
	queues := map[string]bool{}
	for _, s := range sends {
		require.Equal(t, invocation.SpanId, s.ParentSpanId, "the invocation parents the relay's sends")
		queues[s.Name] = true
	}
	require.Len(t, queues, 2, "sends to both queues (the failed one tried again)")

	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if strings.Contains(fmt.Sprint(m["msg"]), "record not published") {
			line = m
		}
	}
	require.NotNil(t, line, "the failure's line:\n%s", logs)
	require.Equal(t, hex.EncodeToString(invocation.TraceId), line[tracing.LogTraceID], "written inside the invocation's span")
	require.Equal(t, "req-relay-1", line["awsRequestId"])
}
