package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// snsNotification wraps message as SNS delivers it with raw message
// delivery off.
func snsNotification(t *testing.T, message string) string {
	b, err := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:us-east-1:000000000000:orders",
		"Message": message, "Timestamp": "2026-01-02T03:04:05.000Z", "SignatureVersion": "1"})
	require.NoError(t, err)
	return string(b)
}

// dlq peek shows the body a route reads — the SNS notification's Message,
// the EventBridge event's detail — and the type the worker saw, read from
// the copy's attribute or from an envelope inside the wrapper. Old
// behaviour: every SNS row's body was the wrapper ({"Type":"Notification"…)
// and a copy without the type attribute showed "(unreadable)".
func TestDLQPeekUnwraps(t *testing.T) {
	client := sqs.NewFromConfig(testenv.AWSConfig(t))
	ctx := context.Background()
	qs, err := worker.CreateQueues(ctx, client, worker.QueueConfig{Name: testenv.Unique("dlqpeek")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	s := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	event := `{"version":"0","id":"ev-1","detail-type":"Order Placed","source":"com.example.orders","time":"2026-01-02T03:04:05Z","detail":{"orderId":"o-3","amountCents":300}}`
	entries := []types.SendMessageBatchRequestEntry{
		{Id: aws.String("unknown"), MessageBody: aws.String(snsNotification(t, `{"eventType":"OrderCancelled","orderId":"o-1"}`)),
			MessageAttributes: map[string]types.MessageAttributeValue{dlq.AttrFailureCode: s("UNKNOWN_MESSAGE_TYPE"), dlq.AttrMessageType: s("OrderCancelled")}},
		{Id: aws.String("envelope"), MessageBody: aws.String(snsNotification(t, `{"schemaVersion":1,"messageType":"OrderPlaced","idempotencyKey":"order:o-2"}`))},
		{Id: aws.String("event"), MessageBody: aws.String(event)},
	}
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(qs.DLQURL), Entries: entries})
	require.NoError(t, err)
	require.Empty(t, out.Failed)

	text, _, err := runDLQCLI(t, "dlq", "peek", "--dlq-url", qs.DLQURL, "--body-chars", "200")
	require.NoError(t, err)
	require.Regexp(t, `(?m)\s+UNKNOWN_MESSAGE_TYPE\s+OrderCancelled\s+-\s+-\s+\d+\s+sns\s+\{"eventType":"OrderCancelled","orderId":"o-1"\}$`, text)
	require.Regexp(t, `(?m)\s+\(none: redrive policy\)\s+OrderPlaced\s+order:o-2\s+-\s+\d+\s+sns\s+\{"schemaVersion":1,"messageType":"OrderPlaced"`, text)
	require.Regexp(t, `(?m)\s+\(none: redrive policy\)\s+\(unreadable\)\s+-\s+-\s+\d+\s+eventbridge\s+\{"orderId":"o-3","amountCents":300\}$`, text)
	require.Contains(t, text, "BODY is what a route reads")
	require.NotContains(t, text, `"Type":"Notification"`)

	js, _, err := runDLQCLI(t, "dlq", "peek", "--dlq-url", qs.DLQURL, "-o", "json")
	require.NoError(t, err)
	var views []map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &views))
	byWrapper := map[string]map[string]any{}
	for _, v := range views {
		if v["messageType"] != "OrderPlaced" {
			byWrapper[v["wrapper"].(string)] = v
		}
	}
	require.Equal(t, `{"eventType":"OrderCancelled","orderId":"o-1"}`, byWrapper["sns"]["payload"])
	require.Contains(t, byWrapper["sns"]["body"], `"Type":"Notification"`, "JSON keeps the whole body")
	require.Equal(t, `{"orderId":"o-3","amountCents":300}`, byWrapper["eventbridge"]["payload"])
}

// dlq peek without --max shows up to 50, as its help says. Old behaviour:
// its --max shared a variable with redrive's, registered later with
// redrive's default, so peek showed 10 ("--max 10 reached").
func TestDLQPeekDefaultMax(t *testing.T) {
	client := sqs.NewFromConfig(testenv.AWSConfig(t))
	ctx := context.Background()
	qs, err := worker.CreateQueues(ctx, client, worker.QueueConfig{Name: testenv.Unique("dlqpeekmax")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	for batch := range 2 {
		var entries []types.SendMessageBatchRequestEntry
		for i := range 6 {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprintf(`{"n":%d}`, batch*6+i))})
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(qs.DLQURL), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
	text, _, err := runDLQCLI(t, "dlq", "peek", "--dlq-url", qs.DLQURL)
	require.NoError(t, err)
	require.Contains(t, text, "12 messages shown; all of them are still in the DLQ")
}
