package inbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
)

// indexOnly is a ReadAPI that records the queries it forwards.
type indexOnly struct {
	inbox.ReadAPI
	mu      sync.Mutex
	queries []string // the index of each query ("" for the table)
}

func (a *indexOnly) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	a.mu.Lock()
	a.queries = append(a.queries, aws.ToString(in.IndexName))
	a.mu.Unlock()
	return a.ReadAPI.Query(ctx, in, optFns...)
}

// Rejections finds the rejection records filed under SQS message ids for
// deliveries of a key — through the aggregate index (same aggregate) and
// the attention index (another aggregate, or a key with no record) — and
// nothing else: not other keys' rejections, not rejections without a key,
// not the key's own records. Rejections are written as the worker writes
// them (mutation.Committer.Reject). Old behaviour: there was no way to see
// them from the key (`inbox get KEY` read IDEMP#KEY only).
func TestReaderRejections(t *testing.T) {
	s := newReadSeeder(t, 4)
	store := inbox.Store{Table: s.env.Table, AttentionShards: 4}
	now := seedTime
	var mu sync.Mutex
	committer, err := mutation.New(s.env.DynamoDB, mutation.Config{Store: store, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	require.NoError(t, err)
	reject := func(at time.Time, r mutation.Rejection) {
		t.Helper()
		mu.Lock()
		now = at
		mu.Unlock()
		require.NoError(t, committer.Reject(context.Background(), &r))
	}

	rec := s.completed("order-7:invoice", "OrderInvoiceRequested", "ORDER", "o-7", seedTime)
	reject(seedTime.Add(2*time.Minute), mutation.Rejection{SQSMessageID: "m-other-aggregate", Code: "IDEMPOTENCY_HASH_MISMATCH",
		Key: "order-7:invoice", MessageType: "OrderInvoiceRequested", RequestHash: "v2:b", AggregateType: "ORDER", AggregateID: "o-8"})
	reject(seedTime.Add(time.Minute), mutation.Rejection{SQSMessageID: "m-same-aggregate", Code: "IDEMPOTENCY_HASH_MISMATCH",
		Key: "order-7:invoice", MessageType: "OrderInvoiceRequested", RequestHash: "v2:a", AggregateType: "ORDER", AggregateID: "o-7"})
	reject(seedTime.Add(3*time.Minute), mutation.Rejection{SQSMessageID: "m-other-type", Code: "FIELD_TOO_LONG",
		Key: "order-7:invoice", MessageType: "OrderCancelled", AggregateType: "ORDER", AggregateID: "o-7"})
	reject(seedTime.Add(time.Minute), mutation.Rejection{SQSMessageID: "m-other-key", Code: "IDEMPOTENCY_HASH_MISMATCH",
		Key: "order-7:refund", MessageType: "OrderInvoiceRequested", AggregateType: "ORDER", AggregateID: "o-7"})
	reject(seedTime.Add(time.Minute), mutation.Rejection{SQSMessageID: "m-no-key", Code: "INVALID_ENVELOPE"})
	reject(seedTime.Add(-time.Hour), mutation.Rejection{SQSMessageID: "m-never-claimed", Code: "FIELD_TOO_LONG",
		Key: "order-9:invoice", MessageType: "OrderInvoiceRequested", AggregateType: "ORDER", AggregateID: "o-9"})
	s.failed(inbox.StatusFailedTerminal, "order-7:invoice-x", "ORDER_NOT_FOUND", seedTime.Add(time.Minute))

	api := &indexOnly{ReadAPI: s.env.DynamoDB}
	r := s.readerWith(api)
	got, err := r.Rejections(context.Background(), "order-7:invoice", "", []*inbox.Record{rec})
	require.NoError(t, err)
	require.Equal(t, []string{"reject:m-same-aggregate", "reject:m-other-aggregate", "reject:m-other-type"}, recIDs(got), "oldest first")
	require.Equal(t, "IDEMPOTENCY_HASH_MISMATCH", got[0].FailureCode)
	require.Equal(t, "order-7:invoice", got[0].Key)
	require.Equal(t, "o-8", got[1].AggregateID, "found through the attention index")
	for _, idx := range api.queries {
		require.NotEmpty(t, idx, "indexes only, never the table")
	}
	require.Len(t, api.queries, 1+4, "the aggregate's partition and the four attention shards")

	got, err = r.Rejections(context.Background(), "order-7:invoice", "OrderInvoiceRequested", []*inbox.Record{rec})
	require.NoError(t, err)
	require.Equal(t, []string{"reject:m-same-aggregate", "reject:m-other-aggregate"}, recIDs(got), "one message type")

	got, err = r.Rejections(context.Background(), "order-9:invoice", "", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"reject:m-never-claimed"}, recIDs(got), "a key with no record: every delivery rejected")

	got, err = r.Rejections(context.Background(), "order-404", "", nil)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = r.Rejections(context.Background(), "", "", nil)
	require.ErrorIs(t, err, inbox.ErrBadQuery)
}
