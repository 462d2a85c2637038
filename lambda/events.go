package lambda

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/relay"
)

// The runtime's events become the SDK's types here, so that the worker
// and the relay take what their daemon hosts read from the APIs and carry
// no dependency on aws-lambda-go.

// sqsMessages are an SQS event's records as the SQS API's messages.
func sqsMessages(recs []events.SQSMessage) []sqstypes.Message {
	out := make([]sqstypes.Message, len(recs))
	for i, rec := range recs {
		m := sqstypes.Message{
			MessageId: aws.String(rec.MessageId), ReceiptHandle: aws.String(rec.ReceiptHandle), Body: aws.String(rec.Body),
			MD5OfBody: aws.String(rec.Md5OfBody), Attributes: rec.Attributes,
		}
		if len(rec.MessageAttributes) > 0 {
			m.MessageAttributes = make(map[string]sqstypes.MessageAttributeValue, len(rec.MessageAttributes))
			for k, v := range rec.MessageAttributes {
				m.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue,
					BinaryValue: v.BinaryValue, StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues}
			}
		}
		out[i] = m
	}
	return out
}

// sqsFailures are the batch item failures of the records' message ids.
func sqsFailures(ids []string) []events.SQSBatchItemFailure {
	out := make([]events.SQSBatchItemFailure, len(ids))
	for i, id := range ids {
		out[i] = events.SQSBatchItemFailure{ItemIdentifier: id}
	}
	return out
}

// streamRecords are a DynamoDB stream event's records as the DynamoDB
// Streams API's: their event name, sequence number and new image, whose
// string and number attributes are all an outbox record holds.
func streamRecords(recs []events.DynamoDBEventRecord) []types.Record {
	out := make([]types.Record, len(recs))
	for i, rec := range recs {
		img := make(map[string]types.AttributeValue, len(rec.Change.NewImage))
		for k, v := range rec.Change.NewImage {
			switch v.DataType() {
			case events.DataTypeString:
				img[k] = &types.AttributeValueMemberS{Value: v.String()}
			case events.DataTypeNumber:
				img[k] = &types.AttributeValueMemberN{Value: v.Number()}
			}
		}
		out[i] = types.Record{EventName: types.OperationType(rec.EventName),
			Dynamodb: &types.StreamRecord{NewImage: img, SequenceNumber: aws.String(rec.Change.SequenceNumber)}}
	}
	return out
}

// streamHandler is rl's handler of the runtime's stream events
// (relay.Relay.HandleStreamEvent).
func streamHandler(rl *relay.Relay) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		failed, err := rl.HandleStreamEvent(ctx, streamRecords(ev.Records))
		for _, seq := range failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
		}
		return resp, err
	}
}
