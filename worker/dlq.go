package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// ReceiveAPI is what PeekDLQ needs of SQS.
type ReceiveAPI interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// DLQMessage is a message found in a DLQ, with the failure the worker
// attached to it (empty fields when another sender put it there).
type DLQMessage struct {
	SQSMessageID    string
	SourceMessageID string // the work queue's SQS message id (AttrSourceMessageID)
	FailureCode     string
	IdempotencyKey  string
	MessageType     string
	Body            string
}

// PeekDLQ receives every message of the DLQ at url without deleting any —
// each stays hidden for hide, then returns to the DLQ — until two receives
// in a row come back empty.
func PeekDLQ(ctx context.Context, api ReceiveAPI, url string, hide time.Duration) ([]DLQMessage, error) {
	var out []DLQMessage
	for empty := 0; empty < 2; {
		res, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: visibilitySeconds(hide), MessageAttributeNames: []string{"All"}})
		if err != nil {
			return nil, fmt.Errorf("worker: read DLQ %s: %w", url, err)
		}
		if len(res.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range res.Messages {
			attr := func(name string) string {
				if a, ok := m.MessageAttributes[name]; ok {
					return aws.ToString(a.StringValue)
				}
				return ""
			}
			out = append(out, DLQMessage{SQSMessageID: aws.ToString(m.MessageId), SourceMessageID: attr(AttrSourceMessageID),
				FailureCode: attr(AttrFailureCode), IdempotencyKey: attr(AttrIdempotencyKey), MessageType: attr(AttrMessageType),
				Body: aws.ToString(m.Body)})
		}
	}
	return out, nil
}
