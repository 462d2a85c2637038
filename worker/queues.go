package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// QueueAPI is what CreateQueues needs of SQS.
type QueueAPI interface {
	CreateQueue(ctx context.Context, params *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueConfig describes a work queue and its dead-letter queue.
type QueueConfig struct {
	// Name of the work queue. Required. A FIFO queue's name ends in ".fifo".
	Name string
	// DLQName is the dead-letter queue's name. Default: Name + "-dlq"
	// (before ".fifo" for FIFO queues).
	DLQName string
	// FIFO creates FIFO queues (content-based deduplication off: the
	// producer sets MessageDeduplicationId). Default: false.
	FIFO bool
	// VisibilityTimeout of the work queue; keep it equal to the worker's
	// lease. Default: 30s. Whole seconds, 0..12h.
	VisibilityTimeout time.Duration
	// MaxReceiveCount before SQS moves a message to the DLQ. Default: 10.
	MaxReceiveCount int
	// Retention of the work queue. Default: 4 days (SQS's default).
	Retention time.Duration
	// DLQRetention of the dead-letter queue. Default: 14 days (SQS's maximum).
	DLQRetention time.Duration
}

// Queues are the URLs and ARN CreateQueues produced.
type Queues struct {
	URL    string
	DLQURL string
	DLQARN string
}

func (c *QueueConfig) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("worker: QueueConfig.Name is required"))
	}
	if c.FIFO != strings.HasSuffix(c.Name, ".fifo") && c.Name != "" {
		errs = append(errs, fmt.Errorf("worker: queue %q: a FIFO queue's name must end in .fifo, and only a FIFO queue's", c.Name))
	}
	if c.DLQName == "" {
		base := strings.TrimSuffix(c.Name, ".fifo")
		c.DLQName = base + "-dlq"
		if c.FIFO {
			c.DLQName += ".fifo"
		}
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = 30 * time.Second
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > 12*time.Hour {
		errs = append(errs, fmt.Errorf("worker: QueueConfig.VisibilityTimeout %s must be within 0..12h", c.VisibilityTimeout))
	}
	if c.MaxReceiveCount == 0 {
		c.MaxReceiveCount = 10
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		errs = append(errs, fmt.Errorf("worker: QueueConfig.MaxReceiveCount %d must be within 1..1000", c.MaxReceiveCount))
	}
	if c.Retention == 0 {
		c.Retention = 4 * 24 * time.Hour
	}
	if c.DLQRetention == 0 {
		c.DLQRetention = 14 * 24 * time.Hour
	}
	for name, d := range map[string]time.Duration{"Retention": c.Retention, "DLQRetention": c.DLQRetention} {
		if d < time.Minute || d > 14*24*time.Hour {
			errs = append(errs, fmt.Errorf("worker: QueueConfig.%s %s must be within 1m..14d", name, d))
		}
	}
	return errors.Join(errs...)
}

// CreateQueues creates the DLQ, then the work queue with a RedrivePolicy that
// points at it. Both calls are idempotent when the attributes are unchanged.
func CreateQueues(ctx context.Context, api QueueAPI, cfg QueueConfig) (Queues, error) {
	if err := cfg.validate(); err != nil {
		return Queues{}, err
	}
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	fifo := func(attrs map[string]string) map[string]string {
		if cfg.FIFO {
			attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		}
		return attrs
	}
	dlq, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(cfg.DLQName),
		Attributes: fifo(map[string]string{
			string(types.QueueAttributeNameMessageRetentionPeriod): secs(cfg.DLQRetention),
		}),
	})
	if err != nil {
		return Queues{}, fmt.Errorf("worker: create DLQ %s: %w", cfg.DLQName, err)
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dlq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Queues{}, fmt.Errorf("worker: DLQ %s ARN: %w", cfg.DLQName, err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	redrive, err := json.Marshal(map[string]string{"deadLetterTargetArn": arn, "maxReceiveCount": strconv.Itoa(cfg.MaxReceiveCount)})
	if err != nil {
		return Queues{}, fmt.Errorf("worker: redrive policy: %w", err)
	}
	q, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(cfg.Name),
		Attributes: fifo(map[string]string{
			string(types.QueueAttributeNameVisibilityTimeout):      secs(cfg.VisibilityTimeout),
			string(types.QueueAttributeNameMessageRetentionPeriod): secs(cfg.Retention),
			string(types.QueueAttributeNameRedrivePolicy):          string(redrive),
		}),
	})
	if err != nil {
		return Queues{}, fmt.Errorf("worker: create queue %s: %w", cfg.Name, err)
	}
	return Queues{URL: aws.ToString(q.QueueUrl), DLQURL: aws.ToString(dlq.QueueUrl), DLQARN: arn}, nil
}
