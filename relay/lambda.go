package relay

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/outbox"
)

// HandleStreamEvent is the Lambda handler of the table's stream (an event
// source mapping with FunctionResponseTypes ReportBatchItemFailures): it
// publishes the batch's INSERTed outbox records like Run does a page, and
// reports the first record, in stream order, that was not published as
// the one batch item failure — by its sequence number, as AWS requires for
// streams: the mapping checkpoints before it and retries from it, so
// everything after it comes again (and is skipped if it went: the status
// check sees PUBLISHED). Records other than outbox INSERTs are ignored.
// The returned error is always nil: failures are reported per record.
func (r *Relay) HandleStreamEvent(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var recs []outbox.Record
	var seqs []string
	for _, rec := range ev.Records {
		if rec.EventName != "INSERT" {
			continue
		}
		item := make(map[string]ddbtypes.AttributeValue, len(rec.Change.NewImage))
		for k, v := range rec.Change.NewImage {
			switch v.DataType() {
			case events.DataTypeString:
				item[k] = &ddbtypes.AttributeValueMemberS{Value: v.String()}
			case events.DataTypeNumber:
				item[k] = &ddbtypes.AttributeValueMemberN{Value: v.Number()}
			}
		}
		if o, ok := r.decode(item); ok {
			recs = append(recs, o)
			seqs = append(seqs, rec.Change.SequenceNumber)
		}
	}
	var resp events.DynamoDBEventResponse
	for i, err := range r.Publish(ctx, recs) {
		if err != nil {
			r.log.WarnContext(ctx, "relay: record not published; reporting it as the batch's first failure", "eventId", recs[i].EventID,
				"sequenceNumber", seqs[i], "error", err.Error())
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: seqs[i]}}
			break
		}
	}
	return resp, nil
}
