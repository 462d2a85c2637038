package ddbworkertest_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// NewTable makes the inbox layout and NewQueues a work queue that takes
// messages (they were package emulators' Env.NewTable and Env.NewQueues).
func TestNewTableAndQueues(t *testing.T) {
	env := emulators.ForTest(t)
	ctx := t.Context()
	table := ddbworkertest.NewTable(t, env.DynamoDB(), tables.Config{})
	desc, err := env.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.Len(t, desc.Table.GlobalSecondaryIndexes, 2, "the inbox layout: aggregate and attention indexes")

	queues := ddbworkertest.NewQueues(t, env.SQS(), worker.QueueConfig{})
	require.NotEmpty(t, queues.DLQURL)
	_, err = env.SQS().SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queues.URL), MessageBody: aws.String("hello")})
	require.NoError(t, err)
	out, err := env.SQS().ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queues.URL), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
}
