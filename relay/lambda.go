package relay

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

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
// The records are the event's, as the DynamoDB Streams API's (package
// lambda converts the runtime's event); failed holds that one sequence
// number, or nothing. The returned error is always nil: failures are
// reported per record.
func (r *Relay) HandleStreamEvent(ctx context.Context, records []types.Record) (failed []string, err error) {
	var recs []outbox.Record
	var seqs []string
	for _, rec := range records {
		if o, ok := r.fromStream(rec); ok {
			recs = append(recs, o)
			seqs = append(seqs, aws.ToString(rec.Dynamodb.SequenceNumber))
		}
	}
	for i, err := range r.Publish(ctx, recs) {
		if err != nil {
			r.log.WarnContext(ctx, "relay: record not published; reporting it as the batch's first failure", "eventId", recs[i].EventID,
				"sequenceNumber", seqs[i], "error", err.Error())
			return []string{seqs[i]}, nil
		}
	}
	return nil, nil
}
