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
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SetQueueAttributes(ctx context.Context, params *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

// The defaults of QueueConfig, applied by CreateQueues.
const (
	// DefaultMaxReceiveCount is QueueConfig.MaxReceiveCount's default.
	DefaultMaxReceiveCount = 10
	// DefaultQueueRetention is QueueConfig.Retention's default: SQS's own.
	DefaultQueueRetention = 4 * 24 * time.Hour
	// DefaultDLQRetention is QueueConfig.DLQRetention's default: SQS's
	// longest.
	DefaultDLQRetention = 14 * 24 * time.Hour
)

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
	// lease. Default: DefaultVisibilityTimeout. Whole seconds, 0..12h.
	VisibilityTimeout time.Duration
	// MaxReceiveCount before SQS moves a message to the DLQ. Default:
	// DefaultMaxReceiveCount.
	MaxReceiveCount int
	// Retention of the work queue. Default: DefaultQueueRetention (4 days).
	Retention time.Duration
	// DLQRetention of the dead-letter queue. Default: DefaultDLQRetention
	// (14 days).
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
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > 12*time.Hour {
		errs = append(errs, fmt.Errorf("worker: QueueConfig.VisibilityTimeout %s must be within 0..12h", c.VisibilityTimeout))
	}
	if c.MaxReceiveCount == 0 {
		c.MaxReceiveCount = DefaultMaxReceiveCount
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		errs = append(errs, fmt.Errorf("worker: QueueConfig.MaxReceiveCount %d must be within 1..1000", c.MaxReceiveCount))
	}
	if c.Retention == 0 {
		c.Retention = DefaultQueueRetention
	}
	if c.DLQRetention == 0 {
		c.DLQRetention = DefaultDLQRetention
	}
	for name, d := range map[string]time.Duration{"Retention": c.Retention, "DLQRetention": c.DLQRetention} {
		if d < time.Minute || d > 14*24*time.Hour {
			errs = append(errs, fmt.Errorf("worker: QueueConfig.%s %s must be within 1m..14d", name, d))
		}
	}
	return errors.Join(errs...)
}

// CreateQueues creates the DLQ, then the work queue with a RedrivePolicy that
// points at it. Running it again is safe: a queue that exists with other
// attributes (SQS refuses CreateQueue then) gets them set instead.
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
	dlqURL, err := ensureQueue(ctx, api, cfg.DLQName, fifo(map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): secs(cfg.DLQRetention),
	}))
	if err != nil {
		return Queues{}, fmt.Errorf("worker: create DLQ %s: %w", cfg.DLQName, err)
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(dlqURL),
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
	url, err := ensureQueue(ctx, api, cfg.Name, fifo(map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout):      secs(cfg.VisibilityTimeout),
		string(types.QueueAttributeNameMessageRetentionPeriod): secs(cfg.Retention),
		string(types.QueueAttributeNameRedrivePolicy):          string(redrive),
	}))
	if err != nil {
		return Queues{}, fmt.Errorf("worker: create queue %s: %w", cfg.Name, err)
	}
	return Queues{URL: url, DLQURL: dlqURL, DLQARN: arn}, nil
}

// ensureQueue creates the queue, or sets attrs on it when it exists with
// other attributes. FifoQueue cannot change; SQS reports that itself.
func ensureQueue(ctx context.Context, api QueueAPI, name string, attrs map[string]string) (string, error) {
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err == nil {
		return aws.ToString(out.QueueUrl), nil
	}
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		return "", err
	}
	got, gerr := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if gerr != nil {
		return "", errors.Join(err, gerr)
	}
	set := make(map[string]string, len(attrs))
	for k, v := range attrs {
		if k != string(types.QueueAttributeNameFifoQueue) {
			set[k] = v
		}
	}
	if _, serr := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: set}); serr != nil {
		return "", fmt.Errorf("queue %s exists with other attributes and they cannot be set: %w", name, serr)
	}
	return aws.ToString(got.QueueUrl), nil
}
