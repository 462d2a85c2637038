package worker

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
)

// deleteAttempts bounds how often one receipt handle is tried. A delete that
// never succeeds is harmless: the redelivery finds the work COMPLETED.
const deleteAttempts = 3

type deletion struct {
	receipt string
	id      string // SQS message id, for logs
	tries   int
	done    func() // called once the delete was tried for the last time
}

// deleter batches deletes: a batch goes when it holds 10 handles or when
// its oldest handle has waited FlushInterval, whichever comes first.
type deleter struct {
	api      SQSAPI
	queueURL string
	interval time.Duration
	in       chan deletion
	stopped  chan struct{}
	log      *slog.Logger
	metrics  *instruments
	fail     func(string) // failpoint hook
}

func newDeleter(api SQSAPI, queueURL string, interval time.Duration, log *slog.Logger, m *instruments, fail func(string)) *deleter {
	return &deleter{api: api, queueURL: queueURL, interval: interval, in: make(chan deletion, 64),
		stopped: make(chan struct{}), log: log, metrics: m, fail: fail}
}

// ack queues m's delete.
func (d *deleter) ack(m types.Message) {
	d.add(deletion{receipt: aws.ToString(m.ReceiptHandle), id: aws.ToString(m.MessageId)})
}

// add queues a delete. It must not be called after close.
func (d *deleter) add(del deletion) { d.in <- del }

// close flushes what is queued and stops; it returns when the last batch
// was sent (bounded by ctx).
func (d *deleter) close(ctx context.Context) {
	close(d.in)
	select {
	case <-d.stopped:
	case <-ctx.Done():
	}
}

func (d *deleter) run(ctx context.Context) {
	defer close(d.stopped)
	var pending []deletion
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// flush sends the oldest (at most) 10 pending deletes — SQS refuses a
	// bigger batch — and keeps the rest and the entries worth a retry.
	flush := func() {
		if len(pending) == 0 {
			return
		}
		n := min(len(pending), sqsbatch.MaxEntries)
		retry := d.send(ctx, pending[:n])
		pending = append(pending[n:], retry...)
		if len(pending) > 0 {
			timer.Reset(d.interval)
		}
	}
	for {
		select {
		case del, ok := <-d.in:
			if !ok {
				for len(pending) > 0 {
					flush()
				}
				return
			}
			if len(pending) == 0 {
				timer.Reset(d.interval)
			}
			pending = append(pending, del)
			for len(pending) >= sqsbatch.MaxEntries {
				before := len(pending)
				flush()
				if len(pending) >= before {
					break // the batch failed; retry when the timer fires
				}
			}
		case <-timer.C:
			flush()
		}
	}
}

// send deletes one batch and returns the entries worth another try.
func (d *deleter) send(ctx context.Context, batch []deletion) []deletion {
	d.fail(hooks.BeforeDelete)
	entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
	for i, del := range batch {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(del.receipt)}
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	out, err := d.api.DeleteMessageBatch(callCtx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.queueURL), Entries: entries})
	cancel()
	var retry []deletion
	again := func(del deletion, reason string) {
		del.tries++
		if del.tries < deleteAttempts {
			retry = append(retry, del)
			return
		}
		d.metrics.Deletes.WithLabelValues("failed").Inc()
		d.log.Warn("delete gave up; the redelivery will be a duplicate", "sqsMessageId", del.id, "reason", reason)
		if del.done != nil {
			del.done()
		}
	}
	if err != nil {
		if failure.IsThrottle(err) {
			d.metrics.Throttles.Inc()
		}
		for _, del := range batch {
			again(del, err.Error())
		}
		return retry
	}
	for _, ok := range out.Successful {
		i, _ := strconv.Atoi(aws.ToString(ok.Id))
		if i >= 0 && i < len(batch) {
			d.metrics.Deletes.WithLabelValues("ok").Inc()
			if batch[i].done != nil {
				batch[i].done()
			}
		}
	}
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		if i < 0 || i >= len(batch) {
			continue
		}
		code := aws.ToString(f.Code)
		if code == "ReceiptHandleIsInvalid" || code == "InvalidParameterValue" {
			// The handle expired and someone else holds the message now;
			// their delivery will see the work COMPLETED.
			d.metrics.Deletes.WithLabelValues("stale_handle").Inc()
			d.log.Info("delete: stale receipt handle", "sqsMessageId", batch[i].id, "code", code)
			if batch[i].done != nil {
				batch[i].done()
			}
			continue
		}
		again(batch[i], code+": "+aws.ToString(f.Message))
	}
	return retry
}
