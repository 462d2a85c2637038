package daemon

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
)

// `ddbworker relay`: its flags are checked, a table without a stream is
// refused with the command that fixes it, `tables create --stream` turns
// the stream on, `relay --sweep` publishes old PENDING records once, and
// `relay` publishes from the stream until its context ends.
func TestRelayCommand(t *testing.T) {
	c := newInboxCLI(t)
	ctx := context.Background()
	q, err := c.env.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Unique("relay"))})
	require.NoError(t, err)
	queueURL := aws.ToString(q.QueueUrl)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))

	_, err = c.run("relay", "--lease-duration", "1ms")
	require.ErrorContains(t, err, "--queue-url (DDBWORKER_QUEUE_URL) is required")
	require.ErrorContains(t, err, "--lease-duration (DDBWORKER_LEASE_DURATION) 1ms must be at least 300ms")

	_, err = c.run("relay", "--queue-url", queueURL, "--metrics-addr", "")
	require.ErrorContains(t, err, "has no stream")
	require.ErrorContains(t, err, "tables create --stream")

	out, err := c.run("tables", "create", "--stream")
	require.NoError(t, err)
	require.Contains(t, out, "stream on (NEW_IMAGE) for the outbox relay: arn:aws:dynamodb:")
	again, err := c.run("tables", "create", "--stream")
	require.NoError(t, err)
	require.Equal(t, out, again, "a no-op the second time")

	w, err := outbox.New(outbox.Config{Table: c.env.Table})
	require.NoError(t, err)
	write := func(id string) {
		put, err := w.Put(context.Background(), outbox.Event{Envelope: &envelope.Envelope{MessageID: id, SchemaVersion: envelope.SchemaV1, MessageType: "Noted",
			Producer: "test", OccurredAt: time.Now(), IdempotencyKey: "k-" + id, AggregateType: "Note", AggregateID: "n-1", Payload: []byte(`{}`)}})
		require.NoError(t, err)
		_, err = c.env.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
		require.NoError(t, err)
	}
	received := func() int {
		out, err := c.env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		for _, m := range out.Messages {
			_, err := c.env.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
		return len(out.Messages)
	}

	write("m-1")
	testenv.Eventually(t, 5*time.Second, func() bool {
		out, err = c.run("relay", "--queue-url", queueURL, "--sweep", "--sweep-age", "1ms")
		require.NoError(t, err)
		return out != "swept: 0 PENDING records older than 1ms, 0 published, 0 failed\n"
	})
	require.Equal(t, "swept: 1 PENDING records older than 1ms, 1 published, 0 failed\n", out)
	require.Equal(t, 1, received())

	// The stream relay: m-1 is skipped (PUBLISHED), m-2 goes; cancelling
	// the context drains and returns nil.
	write("m-2")
	root := newRootCmd(App{})
	root.SetArgs([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", c.env.Table, "--log-level", "error",
		"relay", "--queue-url", queueURL, "--metrics-addr", "", "--poll-interval", "50ms", "--discovery-interval", "100ms"})
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(rctx) }()
	n := 0
	testenv.Eventually(t, 20*time.Second, func() bool { n += received(); return n >= 1 })
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 1, n)
	require.Zero(t, received(), "m-1 was not sent again")
}
