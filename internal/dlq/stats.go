package dlq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Count is how many scanned messages have one failure code and message type.
type Count struct {
	Code  string `json:"code"`
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// Stats is what one scan of the DLQ found.
type Stats struct {
	// DLQURL is the queue scanned.
	DLQURL string `json:"dlqUrl"`
	// Scanned is how many distinct messages the scan received.
	Scanned int `json:"scanned"`
	// Complete is false when the scan stopped at Config.MaxScan.
	Complete bool `json:"complete"`
	// FIFO DLQs show a scan only the oldest message of each group.
	FIFO bool `json:"fifo"`
	// ByCode counts by failure code (CodeNone for the redrive policy's).
	ByCode map[string]int `json:"byCode"`
	// ByType counts by message type (TypeUnreadable when unknown).
	ByType map[string]int `json:"byType"`
	// ByCodeType counts by both, most frequent first.
	ByCodeType []Count `json:"byCodeType"`
	// OldestFailedAt is the earliest AttrFailedAt (zero when none has one).
	OldestFailedAt time.Time `json:"oldestFailedAt,omitzero"`
	// OldestSentAt is the earliest SentTimestamp.
	OldestSentAt time.Time `json:"oldestSentAt,omitzero"`
	// ApproximateVisible, ApproximateNotVisible and ApproximateDelayed are
	// the queue's ApproximateNumberOf* attributes, read before the scan.
	// Messages that another reader holds hidden (NotVisible) are not seen
	// by a scan; the counters themselves lag behind on SQS.
	ApproximateVisible    int `json:"approximateVisible"`
	ApproximateNotVisible int `json:"approximateNotVisible"`
	ApproximateDelayed    int `json:"approximateDelayed"`
}

// Stats scans the whole DLQ (up to Config.MaxScan messages), counts its
// messages by failure code and message type, and leaves every one in it,
// visible again.
func (q *Queue) Stats(ctx context.Context) (st Stats, err error) {
	st = Stats{DLQURL: q.cfg.DLQURL, FIFO: isFIFO(q.cfg.DLQURL), ByCode: map[string]int{}, ByType: map[string]int{}, ByCodeType: []Count{}}
	attrs, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.cfg.DLQURL), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return st, fmt.Errorf("dlq: attributes of %s: %w", q.cfg.DLQURL, err)
	}
	num := func(name types.QueueAttributeName) int {
		n, _ := strconv.Atoi(attrs.Attributes[string(name)])
		return n
	}
	st.ApproximateVisible = num(types.QueueAttributeNameApproximateNumberOfMessages)
	st.ApproximateNotVisible = num(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	st.ApproximateDelayed = num(types.QueueAttributeNameApproximateNumberOfMessagesDelayed)

	type codeType struct{ code, typ string }
	both := map[codeType]int{}
	s := q.newScan()
	defer func() { err = errors.Join(err, s.release(ctx)) }()
	err = s.run(ctx, q.cfg.MaxScan, func(left int) int { return left }, func(_ context.Context, batch []Message) (bool, error) {
		for _, m := range batch {
			st.ByCode[m.FailureCode]++
			st.ByType[m.MessageType]++
			both[codeType{m.FailureCode, m.MessageType}]++
			if !m.FailedAt.IsZero() && (st.OldestFailedAt.IsZero() || m.FailedAt.Before(st.OldestFailedAt)) {
				st.OldestFailedAt = m.FailedAt
			}
			if !m.SentAt.IsZero() && (st.OldestSentAt.IsZero() || m.SentAt.Before(st.OldestSentAt)) {
				st.OldestSentAt = m.SentAt
			}
		}
		return false, nil
	})
	st.Scanned, st.Complete = s.scanned, s.complete
	for k, n := range both {
		st.ByCodeType = append(st.ByCodeType, Count{Code: k.code, Type: k.typ, Count: n})
	}
	slices.SortFunc(st.ByCodeType, func(a, b Count) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code), cmp.Compare(a.Type, b.Type))
	})
	return st, err
}
