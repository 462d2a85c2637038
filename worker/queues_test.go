package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// CreateQueues twice, the second time with other settings: the existing
// queues get the new attributes.
func TestCreateQueuesAgainUpdatesAttributes(t *testing.T) {
	ctx := context.Background()
	q := sqs.NewFromConfig(testenv.AWSConfig(t))
	name := testenv.Unique("cq")
	first, err := worker.CreateQueues(ctx, q, worker.QueueConfig{Name: name, VisibilityTimeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{first.URL, first.DLQURL} {
			_, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	again, err := worker.CreateQueues(ctx, q, worker.QueueConfig{Name: name, VisibilityTimeout: 45 * time.Second, MaxReceiveCount: 3})
	require.NoError(t, err)
	require.Equal(t, first, again)
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(again.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "45", attrs.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	require.Contains(t, attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)], `"maxReceiveCount":"3"`)
}

func TestQueueConfigValidation(t *testing.T) {
	_, err := worker.CreateQueues(context.Background(), nil, worker.QueueConfig{Name: "x.fifo", VisibilityTimeout: 13 * time.Hour, MaxReceiveCount: -1})
	require.ErrorContains(t, err, "FIFO")
	require.ErrorContains(t, err, "VisibilityTimeout")
	require.ErrorContains(t, err, "MaxReceiveCount")
}
