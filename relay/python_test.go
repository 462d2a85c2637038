package relay_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tables"
)

// The outbox record as docs/outbox.md tells a Python producer to write it
// (outbox/testdata/producer.py, boto3): it commits with the producer's
// state change, decodes as the Go helper's records do (same PENDING index
// partition), and the relay publishes an envelope the worker accepts.
func TestPythonProducer(t *testing.T) {
	python := testenv.Python(t)
	w := newWorld(t, true)
	ctx := context.Background()
	_, err := w.env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.env.Table), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "ORDER#o-7"}, "SK": &types.AttributeValueMemberS{Value: "ORDER"},
		"version": &types.AttributeValueMemberN{Value: "0"}}})
	require.NoError(t, err)
	py := func(version, msgID string) ([]byte, error) {
		cmd := exec.Command(python, "../outbox/testdata/producer.py", w.env.Table, "o-7", version, msgID)
		cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION="+os.Getenv("AWS_REGION")) // boto3 reads this one
		return cmd.CombinedOutput()
	}
	out, err := py("1", "py-m-1")
	require.NoError(t, err, string(out))
	out, err = py("5", "py-m-2") // the order is at version 1: the transaction is cancelled
	require.Error(t, err)
	require.Contains(t, string(out), "TransactionCanceledException")

	recs := w.pendingRecords()
	require.Len(t, recs, 1)
	require.Equal(t, "OUTBOX#Order#o-7", recs[0].PK)
	require.Equal(t, "EVENT#V00000000000000000001#py-m-1", recs[0].SK)
	it, err := w.env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: recs[0].PK}, "SK": &types.AttributeValueMemberS{Value: recs[0].SK}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: outbox.PendingPK(recs[0].PK, outbox.DefaultShards)}, it.Item[tables.DefaultLayout().AttentionPK])

	w.run(w.relay(nil))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished([]string{"py-m-1"}) })
	msgs, err := w.env.SQS.ReceiveMessage(ctx, receiveAll(w.env.Queues.URL))
	require.NoError(t, err)
	require.Len(t, msgs.Messages, 1)
	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	e, err := dec.Decode([]byte(aws.ToString(msgs.Messages[0].Body)))
	require.NoError(t, err, "the worker accepts the Python producer's envelope")
	require.Equal(t, "order-o-7-shipped-v1", e.IdempotencyKey)
}
