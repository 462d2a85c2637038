package worker

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
)

// maxBatchGetKeys is the most keys one BatchGetItem takes.
const maxBatchGetKeys = 100

// The read ahead pays while duplicates arrive: a fused duplicate it finds
// COMPLETED costs a share of one read instead of a cancelled transaction
// (up to 4 write units), but every fresh message it reads costs half a
// read unit and waits for the read. It runs while at least
// readAheadDuplicates of the worker's recent fused deliveries were
// duplicates (an exponentially weighted share, each delivery weighing
// readAheadWeight), and a worker starts as if they all were. (On demand, a
// write unit costs five read units: reading pays for itself from about
// 1 duplicate in 40.)
const (
	readAheadDuplicates = 0.05
	readAheadWeight     = 1.0 / 64
)

// duplicateShare is the weighted share of the recent fused deliveries
// that were duplicates.
type duplicateShare struct {
	mu    sync.Mutex
	share float64
}

func newDuplicateShare() *duplicateShare { return &duplicateShare{share: 1} }

// observe counts one fused delivery's final outcome.
func (s *duplicateShare) observe(duplicate bool) {
	x := 0.0
	if duplicate {
		x = 1
	}
	s.mu.Lock()
	s.share += (x - s.share) * readAheadWeight
	s.mu.Unlock()
}

// high reports whether duplicates arrive often enough to read ahead.
func (s *duplicateShare) high() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.share >= readAheadDuplicates
}

// observeFused counts a finished delivery of fused work for the read ahead.
func (w *Worker) observeFused(r report) {
	if r.work != nil && w.fused(r.work) {
		w.dups.observe(r.outcome.result == OutcomeDuplicate)
	}
}

// readsAhead reports whether readAhead would read for ds: a standard
// queue's batch of at least Config.ReadAhead deliveries, the database
// healthy, duplicates arriving.
func (w *Worker) readsAhead(ds []*delivery) bool {
	return !w.fifo && w.cfg.ReadAhead > 0 && len(ds) >= w.cfg.ReadAhead && w.health.Healthy() && w.dups.high()
}

// readAhead admits a receive batch's deliveries and reads the inbox
// records of their fused work with one eventually consistent BatchGetItem
// per 100 keys, before any of them runs (when readsAhead). A COMPLETED
// record found is where the delivery's claim starts (decide): a duplicate
// is answered without a write. A record in any other state is not used:
// it may be stale, and only COMPLETED never changes. A read that is stale, fails or leaves
// keys unprocessed costs nothing but the read: the fused commit's
// attribute_not_exists, and the gate's conditions on the record as read,
// still decide.
func (w *Worker) readAhead(ctx context.Context, ds []*delivery) {
	if !w.readsAhead(ds) {
		return
	}
	byKey := map[string][]*delivery{}
	keys := map[string]map[string]types.AttributeValue{}
	for _, d := range ds {
		actx, cancel := w.workContext(ctx, d)
		wk, v := w.admitted(actx, d)
		cancel()
		if v != nil || !w.fused(wk) {
			continue
		}
		id := wk.env.MessageType + "\x00" + wk.env.IdempotencyKey
		if _, ok := keys[id]; !ok {
			keys[id] = w.cfg.Store.Key(wk.env.IdempotencyKey, wk.env.MessageType)
		}
		byKey[id] = append(byKey[id], d)
	}
	if len(keys) < w.cfg.ReadAhead {
		return // the admissions are kept: decide uses them
	}
	ids := slices.Sorted(maps.Keys(keys))
	for start := 0; start < len(ids); start += maxBatchGetKeys {
		chunk := ids[start:min(start+maxBatchGetKeys, len(ids))]
		req := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			req[i] = keys[id]
		}
		out, err := w.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			w.cfg.Store.Table: {Keys: req, ConsistentRead: aws.Bool(false)},
		}})
		if err != nil {
			w.readAheadFailed(ctx, err)
			continue // no hints: each delivery claims as without a read ahead
		}
		for _, item := range out.Responses[w.cfg.Store.Table] {
			rec, err := w.cfg.Store.Decode(item)
			if err != nil || rec.Rejection {
				continue
			}
			if rec.Status != inbox.StatusCompleted {
				// Only COMPLETED is final: a read that is eventually
				// consistent may show a record an operator has since
				// changed (FAILED_TERMINAL before `inbox reopen`, a lease
				// since given back), and deciding from it would undo that.
				// The claim's conditional write reads the record as it is.
				continue
			}
			for _, d := range byKey[rec.MessageType+"\x00"+rec.Key] {
				d.known = rec
			}
		}
	}
}

// readAheadFailed notes a read ahead's failed BatchGetItem. A failure
// costs nothing but the read; one DynamoDB refuses for want of permission
// (the role grants no dynamodb:BatchGetItem on the table) would fail every
// batch unseen: each is counted (ddbworker_read_ahead_denied_total), and
// the first is said in one warning.
func (w *Worker) readAheadFailed(ctx context.Context, err error) {
	if !accessDenied(err) {
		return
	}
	w.metrics.ReadAheadDenied.Inc()
	if w.readAheadDenied.CompareAndSwap(false, true) {
		w.log.WarnContext(ctx, "the read ahead of fused routes may not read the inbox: DynamoDB denied dynamodb:BatchGetItem on the table; "+
			"grant it to the worker's role, or turn the read ahead off (--read-ahead 0, DDBWORKER_READ_AHEAD=0). "+
			"The work is unaffected, but until then a duplicate costs a cancelled transaction instead of a read (said once; ddbworker_read_ahead_denied_total counts each)",
			"table", w.cfg.Store.Table, "error", err.Error())
	}
}

// accessDenied reports whether err is DynamoDB refusing the caller an
// action (IAM, a resource policy, an SCP).
func accessDenied(err error) bool {
	switch failure.APICode(err) {
	case "AccessDeniedException", "AccessDenied":
		return true
	}
	return false
}

// admission is a delivery's admit stage, as it came out.
type admission struct {
	work    *work
	verdict verdict
}

// admitted is d's admit stage, run once per delivery — by the read ahead,
// or by decide, whichever comes first — and kept: a delivery decided again
// from its work's record (process) is not admitted twice.
func (w *Worker) admitted(ctx context.Context, d *delivery) (*work, verdict) {
	if d.admission == nil {
		wk, v := w.admit(ctx, d)
		d.admission = &admission{work: wk, verdict: v}
	}
	return d.admission.work, d.admission.verdict
}

// readAheadRecord is the record readAhead found for d's work (nil: none,
// or no read ahead), used once.
func readAheadRecord(d *delivery) *inbox.Record {
	rec := d.known
	d.known = nil
	return rec
}
