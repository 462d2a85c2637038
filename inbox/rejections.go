package inbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"
)

// Rejections returns the rejection records filed for deliveries of key
// (every message type, or messageType's only), oldest first. A delivery
// refused after its envelope named a key — IDEMPOTENCY_HASH_MISMATCH, a
// field over its limit — is filed under its SQS message id (REJECT#<id>),
// not under the key it could not claim, with the key in idempotencyKey:
// Get does not see it.
//
// known are the key's records (Get's answer; none when the key has none).
// Rejections reads two indexes, never the table: the aggregate index under
// each aggregate the known records name (a rejection carries its
// envelope's aggregate), and the attention index's FAILED_TERMINAL
// partitions from the earliest known firstSeenAt on (less five minutes for
// the workers' clocks) — from the beginning when there is none — for a
// rejection that named another aggregate. Both
// queries keep only rejection entries (a filter on the table key, which the
// KEYS_ONLY indexes project), whose records are then read with
// BatchGetItem and kept when their key matches. So the cost is the
// aggregates' histories plus the terminal failures since the key was first
// seen. A rejection that named another aggregate and came before the key's
// first record is not found: `inbox list --status FAILED_TERMINAL` lists
// it.
func (r *Reader) Rejections(ctx context.Context, key, messageType string, known []*Record) ([]*Record, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrBadQuery)
	}
	l := r.cfg.Store.Layout
	type aggregate struct{ typ, id string }
	var aggregates []aggregate
	var since string
	for _, rec := range known {
		if a := (aggregate{rec.AggregateType, rec.AggregateID}); a.typ != "" && a.id != "" && !slices.Contains(aggregates, a) {
			aggregates = append(aggregates, a)
		}
		if rec.FirstSeenAt != "" && (since == "" || rec.FirstSeenAt < since) {
			since = rec.FirstSeenAt
		}
	}
	if since != "" {
		if t, err := time.Parse(TimeLayout, since); err == nil {
			since = FormatTime(t.Add(-rejectionClockMargin))
		}
	}
	var queries []*dynamodb.QueryInput
	for _, a := range aggregates {
		in, err := r.rejectionQuery(l.AggregateIndex, expression.Key(l.AggregatePK).Equal(expression.Value(AggregatePK(a.typ, a.id))))
		if err != nil {
			return nil, err
		}
		queries = append(queries, in)
	}
	for i := range r.cfg.Store.AttentionShards {
		kc := expression.Key(l.AttentionPK).Equal(expression.Value(AttentionPK(StatusFailedTerminal, i)))
		if since != "" {
			kc = kc.And(expression.Key(l.AttentionSK).GreaterThanEqual(expression.Value(since)))
		}
		in, err := r.rejectionQuery(l.AttentionIndex, kc)
		if err != nil {
			return nil, err
		}
		queries = append(queries, in)
	}

	found := make([][]map[string]types.AttributeValue, len(queries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, in := range queries {
		g.Go(func() error {
			for {
				out, err := r.api.Query(gctx, in)
				if err != nil {
					index := aws.ToString(in.IndexName)
					role, want := RoleAttention, []string{l.AttentionPK, l.AttentionSK}
					if index == l.AggregateIndex {
						role, want = RoleAggregate, []string{l.AggregatePK, l.AggregateSK}
					}
					return fmt.Errorf("inbox: rejections of %q: query index %s: %w", key, index, r.cfg.Store.indexQueryError(err, role, index, want))
				}
				for _, item := range out.Items {
					found[i] = append(found[i], map[string]types.AttributeValue{l.PartitionKey: item[l.PartitionKey], l.SortKey: item[l.SortKey]})
				}
				if len(out.LastEvaluatedKey) == 0 {
					return nil
				}
				in.ExclusiveStartKey = out.LastEvaluatedKey
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var keys []map[string]types.AttributeValue
	seen := map[string]bool{}
	for _, items := range found {
		for _, k := range items {
			if ik := itemKey(attrString(k, l.PartitionKey), attrString(k, l.SortKey)); !seen[ik] {
				seen[ik] = true
				keys = append(keys, k)
			}
		}
	}
	items, err := r.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	var recs []*Record
	for _, item := range items {
		rec, err := r.cfg.Store.Decode(item)
		if err != nil {
			return nil, err
		}
		if rec.Rejection && rec.Key == key && (messageType == "" || rec.MessageType == messageType) {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *Record) int {
		return cmp.Or(cmp.Compare(a.FailedAt, b.FailedAt), cmp.Compare(a.SQSMessageID, b.SQSMessageID))
	})
	return recs, nil
}

// rejectionClockMargin widens the attention index read before the key's
// first record: the worker that refused a delivery may run on a clock
// behind the one that claimed the key.
const rejectionClockMargin = 5 * time.Minute

// rejectionQuery queries index under kc for rejection entries only: those
// whose table partition key is a rejection's.
func (r *Reader) rejectionQuery(index string, kc expression.KeyConditionBuilder) (*dynamodb.QueryInput, error) {
	filter := expression.Name(r.cfg.Store.Layout.PartitionKey).BeginsWith(prefixRejection)
	ex, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(filter).Build()
	if err != nil {
		return nil, fmt.Errorf("inbox: build query: %w", err)
	}
	return &dynamodb.QueryInput{
		TableName: aws.String(r.cfg.Store.Table), IndexName: aws.String(index),
		KeyConditionExpression: ex.KeyCondition(), FilterExpression: ex.Filter(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}, nil
}
