package bench

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/internal/slots"
)

// loop is the smallest consumer that can carry a per-message function: long
// polls, a bounded pool with the worker's receive policy (internal/slots),
// and deletes — batched, or one
// DeleteMessage per message like a first naive worker. The naive baseline
// and every ceiling run on it.
type loop struct {
	sqs         *sqs.Client
	queueURL    string
	concurrency int
	batch       int
	batchDelete bool
	visibility  int32
	// handle does the message's DynamoDB calls; false keeps the message.
	handle func(ctx context.Context, m types.Message) bool
	// settled is called once per deleted message with its processing time.
	settled func(d time.Duration)
}

func (l *loop) run(ctx context.Context) {
	pool := slots.New(l.concurrency)
	deletes := make(chan string, 256)
	var flushed sync.WaitGroup
	flushed.Go(func() { l.deleter(deletes) })
	var work, pollers sync.WaitGroup
	batch := l.batch
	for range slots.Pollers(l.concurrency, l.batch) {
		pollers.Go(func() {
			for ctx.Err() == nil {
				n, err := pool.AcquireBatch(ctx, batch)
				if err != nil {
					return
				}
				out, err := l.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(l.queueURL),
					MaxNumberOfMessages: int32(n), WaitTimeSeconds: 1, VisibilityTimeout: l.visibility})
				if err != nil {
					pool.Release(n)
					continue
				}
				pool.Release(n - len(out.Messages))
				for _, m := range out.Messages {
					work.Go(func() {
						defer pool.Release(1)
						start := time.Now()
						if !l.handle(context.WithoutCancel(ctx), m) {
							return
						}
						if l.batchDelete {
							deletes <- aws.ToString(m.ReceiptHandle)
						} else {
							_, _ = l.sqs.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(l.queueURL), ReceiptHandle: m.ReceiptHandle})
						}
						l.settled(time.Since(start))
					})
				}
			}
		})
	}
	pollers.Wait()
	work.Wait()
	close(deletes)
	flushed.Wait()
}

// deleter sends DeleteMessageBatch when 10 handles wait or, like the
// worker's default, 250 ms passed.
func (l *loop) deleter(in <-chan string) {
	var batch []string
	flush := func() {
		if len(batch) == 0 {
			return
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
		for i, h := range batch {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
		}
		_, _ = l.sqs.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(l.queueURL), Entries: entries})
		batch = batch[:0]
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case h, ok := <-in:
			if !ok {
				flush()
				return
			}
			batch = append(batch, h)
			if len(batch) == 10 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}
