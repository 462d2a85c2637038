package testenv

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// SNS returns an SNS client of the emulators: fauxqs serves SNS on its SQS
// endpoint (AWS_ENDPOINT_URL_SNS wins when set), delivering to the SQS
// queues it serves. It skips the test when the emulators are not
// available.
func SNS(t testing.TB) *sns.Client {
	t.Helper()
	cfg := AWSConfig(t)
	_, endpoint := Endpoints(t)
	if v := os.Getenv("AWS_ENDPOINT_URL_SNS"); v != "" {
		endpoint = v
	}
	return sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// Topic creates a topic with a unique name and subscribes the queue at
// queueURL to it, with raw message delivery on or off, and deletes the
// topic when the test ends. It returns the topic's ARN.
func Topic(t testing.TB, c *sns.Client, q *sqs.Client, queueURL string, raw bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	queueARN := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	require.NotEmpty(t, queueARN)
	topic, err := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(Unique("topic"))})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = c.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn})
	})
	_, err = c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(raw)}})
	require.NoError(t, err)
	return aws.ToString(topic.TopicArn)
}
