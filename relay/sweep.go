package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/outbox"
)

// SweepResult counts what a sweep did.
type SweepResult struct {
	// Found is the number of PENDING records older than SweepAge.
	Found int
	// Published is how many of them this sweep sent and marked.
	Published int
	// Failed is how many could not be published (they stay PENDING).
	Failed int
}

// Sweep publishes the PENDING records created more than SweepAge ago: the
// records a stream could not deliver (the relay was down longer than the
// stream's 24-hour retention, a checkpoint was trimmed, the stream was
// re-enabled). It queries the attention index's OUTBOX#PENDING#<shard>
// partitions (Shards queries, a record appears there only while PENDING),
// reads the records (strongly consistent BatchGetItem) and publishes them
// in sort-key order per aggregate. It is safe beside running relays: every
// record is re-checked before it is sent and the mark is fenced on
// PENDING.
func (r *Relay) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	l := r.cfg.Layout
	cutoff := r.cfg.Now().UTC().Add(-r.cfg.SweepAge).Format(outbox.TimeLayout)
	var errs []error
	blocked := map[string]bool{} // partition keys of aggregates with a failed record
	for shard := range r.cfg.Shards {
		pk := fmt.Sprintf("%s%02d", outbox.PendingPrefix, shard)
		key := expression.Key(l.AttentionPK).Equal(expression.Value(pk)).And(expression.Key(l.AttentionSK).LessThan(expression.Value(cutoff)))
		expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
		if err != nil {
			return res, err
		}
		p := dynamodb.NewQueryPaginator(r.deps.DynamoDB, &dynamodb.QueryInput{TableName: aws.String(r.cfg.Table), IndexName: aws.String(l.AttentionIndex),
			KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				r.m.Failures.WithLabelValues("read").Inc()
				errs = append(errs, fmt.Errorf("relay: sweep %s: %w", pk, err))
				break
			}
			var keys []map[string]types.AttributeValue
			for _, it := range page.Items {
				keys = append(keys, map[string]types.AttributeValue{l.PartitionKey: it[l.PartitionKey], l.SortKey: it[l.SortKey]})
			}
			recs, err := r.getRecords(ctx, keys)
			if err != nil {
				r.m.Failures.WithLabelValues("read").Inc()
				errs = append(errs, fmt.Errorf("relay: sweep %s: %w", pk, err))
				break
			}
			res.Found += len(recs)
			// An aggregate whose record failed on a FIFO queue sends
			// nothing more in this sweep: its later records (in later
			// pages) would overtake the failed one.
			var send []outbox.Record
			for _, rec := range recs {
				if blocked[rec.PK] && r.fifo(rec) {
					res.Failed++
					r.log.Warn("relay: sweep could not publish", "eventId", rec.EventID, "error", ErrBlocked.Error())
					continue
				}
				send = append(send, rec)
			}
			for i, err := range r.Publish(ctx, send) {
				if err != nil {
					res.Failed++
					if r.fifo(send[i]) {
						blocked[send[i].PK] = true
					}
					r.log.Warn("relay: sweep could not publish", "eventId", send[i].EventID, "error", err.Error())
				} else {
					res.Published++
					r.m.Swept.Inc()
				}
			}
		}
	}
	if res.Found > 0 {
		r.log.Info("relay: sweep", "found", res.Found, "published", res.Published, "failed", res.Failed)
	}
	return res, errors.Join(errs...)
}

// fifo reports whether rec goes to a FIFO queue.
func (r *Relay) fifo(rec outbox.Record) bool {
	q := rec.Destination
	if q == "" {
		q = r.cfg.QueueURL
	}
	return strings.HasSuffix(q, ".fifo")
}

// getRecords reads the PENDING outbox records of keys (strongly
// consistent), ordered by partition and sort key.
func (r *Relay) getRecords(ctx context.Context, keys []map[string]types.AttributeValue) ([]outbox.Record, error) {
	var recs []outbox.Record
	for len(keys) > 0 {
		chunk := keys[:min(100, len(keys))]
		keys = keys[len(chunk):]
		req := map[string]types.KeysAndAttributes{r.cfg.Table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 8 {
				return nil, errors.New("BatchGetItem: keys still unprocessed after 8 retries")
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(min(time.Second, 25*time.Millisecond<<attempt)):
				}
			}
			out, err := r.deps.DynamoDB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("BatchGetItem: %w", err)
			}
			for _, it := range out.Responses[r.cfg.Table] {
				if rec, ok := r.decode(it); ok {
					recs = append(recs, rec)
				}
			}
			req = out.UnprocessedKeys
		}
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int {
		if c := strings.Compare(a.PK, b.PK); c != 0 {
			return c
		}
		return strings.Compare(a.SK, b.SK)
	})
	return recs, nil
}

// sweepEvery sweeps every SweepInterval until stop ends.
func (r *Relay) sweepEvery(stop, work context.Context) {
	t := time.NewTicker(r.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		if _, err := r.Sweep(work); err != nil {
			r.log.Warn("relay: sweep", "error", err.Error())
		}
	}
}
