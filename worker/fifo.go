package worker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
)

// groupKeeper keeps the waiting messages of a FIFO group hidden while the
// messages before them run: one receive may return several messages of a
// group, which run one after another, and without this the later ones
// reappear (to another consumer, out of order) once the earlier ones take
// longer than the visibility timeout.
type groupKeeper struct {
	next   atomic.Int32 // index of the first message not yet started
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// keepGroupHidden starts a keeper for group: every third of the visibility
// timeout it renews the visibility of the group's messages that have not
// started, in batches of 10 (SQS's limit).
func (w *Worker) keepGroupHidden(ctx context.Context, group []*delivery) *groupKeeper {
	ctx, cancel := context.WithCancel(ctx)
	k := &groupKeeper{cancel: cancel}
	every := max(w.cfg.VisibilityTimeout/3, 300*time.Millisecond)
	k.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			waiting := group[min(int(k.next.Load())+1, len(group)):]
			for _, batch := range sqsbatch.Split(waiting, func(*delivery) int { return 0 }, sqsbatch.Limits{}) {
				w.extendWaiting(ctx, batch)
			}
		}
	})
	return k
}

// started records that message i of the group is starting (its own
// heartbeat takes over).
func (k *groupKeeper) started(i int) { k.next.Store(int32(i)) }

// stop ends the keeper and waits for it.
func (k *groupKeeper) stop() {
	k.cancel()
	k.done.Wait()
}

func (w *Worker) extendWaiting(ctx context.Context, batch []*delivery) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, 0, len(batch))
	for i, d := range batch {
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: d.m.ReceiptHandle,
			VisibilityTimeout: visibilitySeconds(w.cappedHide(w.cfg.VisibilityTimeout, d.receivedAt))})
	}
	w.changeVisibilityBatch(ctx, batch, entries, "waiting in a FIFO group")
}

// changeVisibilityBatch keeps batch hidden as entries say (entry i is
// batch[i]'s); what says why they wait, for the log.
func (w *Worker) changeVisibilityBatch(ctx context.Context, batch []*delivery, entries []types.ChangeMessageVisibilityBatchRequestEntry, what string) {
	callCtx, cancel := context.WithTimeout(ctx, sqsCallTimeout)
	defer cancel()
	out, err := w.deps.SQS.ChangeMessageVisibilityBatch(callCtx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(w.cfg.QueueURL), Entries: entries})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not keep messages hidden", "waiting", what, "error", err.Error())
		}
		return
	}
	w.metrics.Extensions.Add(float64(len(out.Successful)))
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		if i >= 0 && i < len(batch) {
			w.log.Warn("could not keep a message hidden", "waiting", what, "sqsMessageId", batch[i].id, "code", aws.ToString(f.Code))
		}
	}
}
