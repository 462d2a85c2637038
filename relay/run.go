package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/outbox"
)

// ErrNoStream reports a table without a stream (tables create --stream,
// or tables.EnableStream, turns it on).
var ErrNoStream = errors.New("relay: the table has no stream")

// StreamARN returns the stream Run reads: Config.StreamARN, or the
// table's latest stream.
func (r *Relay) StreamARN(ctx context.Context) (string, error) {
	if r.cfg.StreamARN != "" {
		return r.cfg.StreamARN, nil
	}
	out, err := r.deps.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.cfg.Table)})
	if err != nil {
		return "", fmt.Errorf("relay: describe %s: %w", r.cfg.Table, err)
	}
	s := out.Table.StreamSpecification
	if s == nil || !aws.ToBool(s.StreamEnabled) || out.Table.LatestStreamArn == nil {
		return "", fmt.Errorf("%w: %s", ErrNoStream, r.cfg.Table)
	}
	if s.StreamViewType != ddbtypes.StreamViewTypeNewImage && s.StreamViewType != ddbtypes.StreamViewTypeNewAndOldImages {
		return "", fmt.Errorf("%w: %s's stream has view type %s, the relay needs NEW_IMAGE or NEW_AND_OLD_IMAGES", ErrNoStream, r.cfg.Table, s.StreamViewType)
	}
	return aws.ToString(out.Table.LatestStreamArn), nil
}

// Run reads the table's stream until ctx ends: every DiscoveryInterval it
// lists the shards and takes the lease of each free shard whose parent is
// finished (parents before children), and reads each leased shard from its
// checkpoint (TRIM_HORIZON on the first start), publishing the INSERTed
// outbox records page by page — send, mark, then checkpoint — so a crash
// re-sends and never loses. When ctx ends, the page in hand is finished
// (within DrainTimeout) and the leases are released, so another instance
// continues at once. With SweepInterval set, it also sweeps.
func (r *Relay) Run(ctx context.Context) error {
	if r.deps.Streams == nil {
		return errors.New("relay: Deps.Streams is required by Run")
	}
	arn, err := r.StreamARN(ctx)
	if err != nil {
		return err
	}
	// Work outlives ctx by the drain: a page in hand is finished.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopDrain := context.AfterFunc(ctx, func() {
		t := time.NewTimer(r.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-work.Done():
		}
	})
	defer stopDrain()
	work = hooks.With(work, hooks.From(ctx))

	r.log.Info("relay started", "table", r.cfg.Table, "stream", arn, "queueUrl", r.cfg.QueueURL, "name", r.cfg.Name, "owner", r.cfg.Owner)
	var (
		mu      sync.Mutex
		running = map[string]bool{}
		lag     = map[string]time.Duration{}
		wg      sync.WaitGroup
	)
	setLag := func(shard string, d time.Duration, done bool) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			delete(running, shard)
			delete(lag, shard)
		} else {
			lag[shard] = d
		}
		var worst time.Duration
		for _, v := range lag {
			worst = max(worst, v)
		}
		r.m.Lag.Set(worst.Seconds())
		r.m.Shards.Set(float64(len(running)))
	}
	if r.cfg.SweepInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sweepEvery(ctx, work)
		}()
	}
	tick := time.NewTicker(r.cfg.DiscoveryInterval)
	defer tick.Stop()
	for {
		shards, err := r.shards(ctx, arn)
		if err != nil && ctx.Err() == nil {
			r.m.Failures.WithLabelValues("stream").Inc()
			r.log.Warn("relay: list the stream's shards", "error", err.Error())
		}
		var st leaseState
		if err == nil {
			st, err = r.leases(ctx, arn)
			if err != nil && ctx.Err() == nil {
				r.m.Failures.WithLabelValues("checkpoint").Inc()
				r.log.Warn("relay: read the shard leases", "error", err.Error())
			}
		}
		if err == nil {
			mu.Lock()
			ids := claimable(shards, st.ended, running)
			mu.Unlock()
			for _, s := range ids {
				id, parent := aws.ToString(s.ShardId), aws.ToString(s.ParentShardId)
				if _, held := st.held[id]; held {
					continue // another instance's lease, not expired: no write
				}
				ls, err := r.acquire(ctx, arn, id)
				if err != nil {
					if ctx.Err() == nil {
						r.m.Failures.WithLabelValues("checkpoint").Inc()
						r.log.Warn("relay: take a shard lease", "shard", id, "error", err.Error())
					}
					continue
				}
				if ls == nil {
					continue
				}
				mu.Lock()
				running[id] = true
				mu.Unlock()
				setLag(id, 0, false)
				r.log.Info("relay: shard leased", "shard", id, "parent", parent, "checkpoint", ls.checkpoint)
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := r.readShard(ctx, work, arn, ls, func(d time.Duration) { setLag(id, d, false) })
					setLag(id, 0, true)
					switch {
					case err == nil:
						r.log.Info("relay: shard finished", "shard", id)
					case errors.Is(err, ErrLeaseLost):
						r.log.Warn("relay: shard lease lost to another instance", "shard", id)
					case ctx.Err() != nil:
						r.log.Info("relay: shard released", "shard", id)
					default:
						r.log.Error("relay: shard stopped", "shard", id, "error", err.Error())
					}
					// A finished shard may free its children: look now.
					tick.Reset(time.Millisecond)
				}()
			}
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			r.log.Info("relay stopped")
			return nil
		case <-tick.C:
			tick.Reset(r.cfg.DiscoveryInterval)
		}
	}
}

// claimable returns the shards worth trying to lease, in the stream's
// order: not finished, not read here already, and whose parent is finished
// or gone from the stream (trimmed) — a parent still in the stream must be
// read to its end before its children, or an aggregate's older records
// (in the parent) could be sent after its newer ones (in a child).
func claimable(shards []types.Shard, ended, running map[string]bool) []types.Shard {
	inStream := map[string]bool{}
	for _, s := range shards {
		inStream[aws.ToString(s.ShardId)] = true
	}
	var out []types.Shard
	for _, s := range shards {
		id, parent := aws.ToString(s.ShardId), aws.ToString(s.ParentShardId)
		if running[id] || ended[id] || (parent != "" && inStream[parent] && !ended[parent]) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// shards lists every shard of the stream.
func (r *Relay) shards(ctx context.Context, arn string) ([]types.Shard, error) {
	var out []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		res, err := r.deps.Streams.DescribeStream(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("DescribeStream: %w", err)
		}
		if res.StreamDescription == nil {
			return out, nil
		}
		out = append(out, res.StreamDescription.Shards...)
		if res.StreamDescription.LastEvaluatedShardId == nil {
			return out, nil
		}
		in.ExclusiveStartShardId = res.StreamDescription.LastEvaluatedShardId
	}
}

// iterator returns a shard iterator after the lease's checkpoint, or at
// TRIM_HORIZON without one (or when trimmed is set: the checkpoint is
// older than the stream's retention).
func (r *Relay) iterator(ctx context.Context, arn string, ls *lease, trimmed bool) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(ls.shardID),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if ls.checkpoint != "" && !trimmed {
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(ls.checkpoint)
	}
	out, err := r.deps.Streams.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("GetShardIterator %s: %w", ls.shardID, err)
	}
	return out.ShardIterator, nil
}

// readShard reads one leased shard until its end (nil), the lease is lost
// (ErrLeaseLost) or stop ends (the lease is released). Calls run under
// work, which outlives stop by the drain. A heartbeat renews the lease
// every third of LeaseDuration while the shard is held, so a long page
// (a hot aggregate on a FIFO queue sends one record per call) keeps it.
func (r *Relay) readShard(stop, work context.Context, arn string, ls *lease, reportLag func(time.Duration)) error {
	held, lost := context.WithCancelCause(work)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		t := time.NewTicker(r.cfg.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			// The write may not outlive the lease it renews.
			wctx, cancel := context.WithDeadline(held, ls.renewedAt().Add(r.cfg.LeaseDuration))
			err := r.renew(wctx, arn, ls, "", false, false)
			cancel()
			if err != nil {
				if errors.Is(err, ErrLeaseLost) {
					lost(err)
					return
				}
				if held.Err() == nil {
					r.m.Failures.WithLabelValues("checkpoint").Inc()
					r.log.Warn("relay: renew the lease", "shard", ls.shardID, "error", err.Error())
				}
				// Unrenewed, the lease expires at renewedAt + LeaseDuration
				// and another instance may take the shard; its fence (a
				// conditional write) does not run while writes fail. Stop
				// reading while a third of the lease is left: the next
				// tick would come at the expiry.
				if left := ls.renewedAt().Add(r.cfg.LeaseDuration).Sub(r.cfg.Now()); left < r.cfg.LeaseDuration/2 {
					lost(fmt.Errorf("%w: shard %s: not renewed for %s (%w)", ErrLeaseLost, ls.shardID, r.cfg.LeaseDuration-left, err))
					return
				}
			}
		}
	}()
	// finish stops the heartbeat, then writes the lease's last state: the
	// heartbeat must not renew a lease after it was released.
	finish := func(ended bool) error {
		if cause := context.Cause(held); errors.Is(cause, ErrLeaseLost) {
			<-beat
			return cause
		}
		lost(nil)
		<-beat
		if err := r.renew(work, arn, ls, "", ended, true); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return err
			}
			r.log.Warn("relay: release the lease", "shard", ls.shardID, "error", err.Error())
			if ended {
				return err
			}
		}
		if ended {
			return nil
		}
		return stop.Err()
	}
	// wait sleeps d unless reading stops; false when it should stop.
	wait := func(d time.Duration) bool {
		select {
		case <-stop.Done():
			return false
		case <-held.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	var iter *string
	backoff := 100 * time.Millisecond
	fail := func(step string, err error) bool {
		if held.Err() == nil {
			r.m.Failures.WithLabelValues(step).Inc()
			r.log.Warn("relay: "+step, "shard", ls.shardID, "error", err.Error())
		}
		ok := wait(backoff)
		backoff = min(2*backoff, 5*time.Second)
		return ok
	}
	trimmed, swept := false, true
	for {
		if stop.Err() != nil || held.Err() != nil {
			return finish(false)
		}
		if !swept {
			// The records between a trimmed checkpoint and the oldest one
			// left are only in the table: they go before the aggregates'
			// later records in the stream, which would overtake them.
			res, err := r.Sweep(held)
			if err == nil && res.Failed > 0 {
				err = fmt.Errorf("%d records not published", res.Failed)
			}
			if err != nil {
				fail("read", fmt.Errorf("sweep before reading past a trimmed checkpoint: %w", err))
				continue
			}
			swept = true
		}
		if iter == nil {
			var err error
			if iter, err = r.iterator(held, arn, ls, trimmed); err != nil {
				var trim *types.TrimmedDataAccessException
				if errors.As(err, &trim) {
					r.log.Error("relay: the checkpoint is older than the stream's retention: sweeping the records in between, then reading from TRIM_HORIZON",
						"shard", ls.shardID, "checkpoint", ls.checkpoint)
					trimmed, swept = true, false
					continue
				}
				var nf *types.ResourceNotFoundException
				if errors.As(err, &nf) {
					// The shard is gone from the stream: nothing left to read.
					return finish(true)
				}
				fail("stream", err)
				continue
			}
			if iter == nil {
				return finish(true)
			}
		}
		out, err := r.deps.Streams.GetRecords(held, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			var expired *types.ExpiredIteratorException
			var trim *types.TrimmedDataAccessException
			switch {
			case errors.As(err, &expired):
				iter = nil // a new one from the checkpoint
				continue
			case errors.As(err, &trim):
				r.log.Error("relay: records past the checkpoint are older than the stream's retention: sweeping them, then reading from TRIM_HORIZON",
					"shard", ls.shardID, "checkpoint", ls.checkpoint)
				iter, trimmed, swept = nil, true, false
				continue
			}
			fail("stream", err)
			continue
		}
		backoff = 100 * time.Millisecond
		trimmed = false
		var recs []outbox.Record
		var newest time.Time
		for _, rec := range out.Records {
			if rec.Dynamodb != nil && rec.Dynamodb.ApproximateCreationDateTime != nil {
				newest = *rec.Dynamodb.ApproximateCreationDateTime
			}
			if o, ok := r.fromStream(rec); ok {
				recs = append(recs, o)
			}
		}
		// Publish the page's records; a failure retries the page (records
		// already published are skipped by the status check) until it
		// goes, the lease is lost, or the drain ends.
		for len(recs) > 0 {
			var failed []outbox.Record
			for i, err := range r.Publish(held, recs) {
				if err != nil {
					failed = append(failed, recs[i])
				}
			}
			if len(failed) == 0 {
				break
			}
			if held.Err() != nil {
				return finish(false)
			}
			r.log.Warn("relay: records not published; retrying the page", "shard", ls.shardID, "failed", len(failed))
			if !wait(backoff) && held.Err() != nil {
				return finish(false)
			}
			backoff = min(2*backoff, 5*time.Second)
			recs = failed
		}
		// The page's last sequence number (a record without one is not
		// checkpointed on: renew with "" only renews).
		last := ""
		for _, rec := range out.Records {
			if rec.Dynamodb != nil && aws.ToString(rec.Dynamodb.SequenceNumber) != "" {
				last = aws.ToString(rec.Dynamodb.SequenceNumber)
			}
		}
		if len(out.Records) > 0 {
			failpoint(held, hooks.RelayBeforeCheckpoint)
			if err := r.renew(held, arn, ls, last, false, false); err != nil {
				if errors.Is(err, ErrLeaseLost) {
					lost(err)
					return finish(false)
				}
				r.m.Failures.WithLabelValues("checkpoint").Inc()
				r.log.Warn("relay: checkpoint", "shard", ls.shardID, "error", err.Error())
			}
			if !newest.IsZero() {
				reportLag(max(0, r.cfg.Now().Sub(newest)))
			}
		} else {
			reportLag(0)
		}
		if out.NextShardIterator == nil {
			// The shard is closed and read to its end: its children may go.
			return finish(true)
		}
		iter = out.NextShardIterator
		if len(out.Records) == 0 && !wait(r.cfg.PollInterval) {
			return finish(false)
		}
	}
}

// fromStream returns the outbox record a stream record INSERTed.
func (r *Relay) fromStream(rec types.Record) (outbox.Record, bool) {
	if rec.EventName != types.OperationTypeInsert || rec.Dynamodb == nil || rec.Dynamodb.NewImage == nil {
		return outbox.Record{}, false
	}
	item := make(map[string]ddbtypes.AttributeValue, len(rec.Dynamodb.NewImage))
	for k, v := range rec.Dynamodb.NewImage {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			item[k] = &ddbtypes.AttributeValueMemberS{Value: v.Value}
		case *types.AttributeValueMemberN:
			item[k] = &ddbtypes.AttributeValueMemberN{Value: v.Value}
		}
	}
	return r.decode(item)
}

// decode reads an outbox record that is PENDING.
func (r *Relay) decode(item map[string]ddbtypes.AttributeValue) (outbox.Record, bool) {
	o, err := outbox.Decode(item, r.cfg.Layout)
	if err != nil {
		// Items of other kinds share the table and its stream; an item
		// under the outbox's key that cannot be read is a producer's
		// mistake the relay cannot publish: say so instead of skipping it
		// silently (the sweep skips it too).
		if pk, ok := item[r.cfg.Layout.PartitionKey].(*ddbtypes.AttributeValueMemberS); ok && outbox.IsKey(pk.Value) {
			r.m.Failures.WithLabelValues("decode").Inc()
			r.log.Error("outbox record cannot be read; not published", "pk", pk.Value, "error", err.Error())
		}
		return outbox.Record{}, false
	}
	if o.Status != outbox.StatusPending {
		return outbox.Record{}, false
	}
	return o, true
}
