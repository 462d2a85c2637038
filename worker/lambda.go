package worker

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// maxBatchingWindow is the longest an event source mapping holds records
// before it invokes the function.
const maxBatchingWindow = 5 * time.Minute

// lambdaSettleMargin is the time kept back from an invocation's deadline
// to record a failure and answer before Lambda ends the invocation.
const lambdaSettleMargin = 2 * time.Second

// noAck: under Lambda, the event source mapping deletes every record the
// invocation does not report as failed.
type noAck struct{}

func (noAck) ack(types.Message) {}

// HandleSQSEvent runs the protocol — gate, handler, commit — for each
// record of one Lambda invocation by an SQS event source mapping with
// ReportBatchItemFailures, and reports the records that must come back:
//
//   - applied work, duplicates, and terminal work its policy settled (a DLQ
//     copy sent, or quarantined) are successes: the mapping deletes them;
//   - a retryable failure (and work in flight elsewhere, or deferred) is
//     hidden for its backoff with ChangeMessageVisibility on the record's
//     receipt handle, then reported, so the retry is not instant;
//   - under the redrive terminal policy, terminal work is reported and the
//     queue's redrive policy moves it to the DLQ;
//   - on a FIFO queue, records of a group run in order and the first that
//     does not succeed reports itself and the rest of its group;
//   - the lease of each record ends with the invocation's deadline (no
//     heartbeat: the invocation cannot outlive it), and each record must
//     finish 2s before it;
//   - records run concurrently up to the adaptive concurrency limit;
//   - while the database is unhealthy (the health gate, which lives as long
//     as the execution environment), the invocation touches no table: it
//     probes at most on the probe schedule and, until the probes succeed,
//     hides every record for Config.Health.ParkVisibility and reports the
//     whole batch.
//
// It never returns an error: a failed record is reported, not the batch.
// Config.QueueURL must be the queue the mapping reads (visibility changes
// go there).
func (w *Worker) HandleSQSEvent(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	w.lambdaInit.Do(func() { w.readQueue(ctx) })
	now := w.cfg.Now()
	var lease, timeout time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		lease = deadline.Sub(now)
		timeout = max(100*time.Millisecond, lease-lambdaSettleMargin)
	}
	msgs := make([]received, len(ev.Records))
	for i, rec := range ev.Records {
		// The mapping received the records before the invocation, up to
		// its batching window (at most 5 minutes) earlier: SQS's 12-hour
		// visibility cap counts from then.
		msgs[i] = received{m: sqsMessage(rec), at: now.Add(-maxBatchingWindow), lease: lease, timeout: timeout}
	}
	var mu sync.Mutex
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	failed := func(m types.Message) {
		mu.Lock()
		defer mu.Unlock()
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: aws.ToString(m.MessageId)})
	}
	if !w.lambdaHealthy(ctx) {
		w.hideAll(ctx, msgs)
		for _, r := range msgs {
			failed(r.m)
		}
		w.log.Warn("database unhealthy: the batch is reported and hidden without touching the table", "records", len(msgs),
			"visibility", w.health.cfg.ParkVisibility.String())
		return resp, nil
	}
	w.releases.flush(ctx, true) // refunds earlier invocations could not write

	var work sync.WaitGroup
	for _, group := range w.groups(msgs) {
		if _, err := w.pool.AcquireBatch(ctx, 1); err != nil {
			for _, r := range group {
				failed(r.m)
			}
			continue
		}
		work.Go(func() {
			defer w.pool.Release(1)
			ok := true
			for _, r := range group {
				if !ok {
					failed(r.m) // after a failure in its FIFO group: back, in order
					continue
				}
				result, pm := w.process(ctx, r, noAck{})
				if result != settledFinal {
					failed(r.m)
					ok = !w.fifo
				}
				if pm != nil && pm.release != nil {
					w.releases.add(*pm.release) // written by a later invocation
				}
			}
		})
	}
	work.Wait()
	return resp, nil
}

// groups splits msgs: by MessageGroupId, in order, on a FIFO queue; one
// each otherwise.
func (w *Worker) groups(msgs []received) [][]received {
	var out [][]received
	if !w.fifo {
		for _, r := range msgs {
			out = append(out, []received{r})
		}
		return out
	}
	index := map[string]int{}
	for _, r := range msgs {
		g := r.m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		i, ok := index[g]
		if !ok {
			i = len(out)
			index[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// lambdaHealthy is the health gate between invocations: there is no
// background prober, so an invocation that finds the database unhealthy
// probes once when the schedule says a probe is due.
func (w *Worker) lambdaHealthy(ctx context.Context) bool {
	h := w.health
	if h.Healthy() {
		return true
	}
	h.mu.Lock()
	due := !w.cfg.Now().Before(h.nextProbe)
	if due {
		h.nextProbe = w.cfg.Now().Add(h.probes.Wait(h.failedProbes+1, rand.Float64()))
	}
	h.mu.Unlock()
	if !due {
		return false
	}
	if err := h.probe(ctx); err != nil {
		w.metrics.Probes.WithLabelValues("failed").Inc()
		h.mu.Lock()
		h.failedProbes++
		h.okProbes = 0
		h.mu.Unlock()
		return false
	}
	w.metrics.Probes.WithLabelValues("ok").Inc()
	h.mu.Lock()
	h.okProbes++
	recovered := h.okProbes >= h.cfg.RecoverProbes
	if !recovered {
		h.nextProbe = w.cfg.Now() // confirm on the next invocation
	}
	h.mu.Unlock()
	if recovered {
		h.recover()
	}
	return recovered
}

// hideAll hides the records for ParkVisibility, in batches of 10.
func (w *Worker) hideAll(ctx context.Context, msgs []received) {
	for start := 0; start < len(msgs); start += 10 {
		batch := msgs[start:min(start+10, len(msgs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, r := range batch {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: r.m.ReceiptHandle,
				VisibilityTimeout: visibilitySeconds(w.health.cfg.ParkVisibility)}
		}
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
		_, err := w.deps.SQS.ChangeMessageVisibilityBatch(callCtx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(w.cfg.QueueURL), Entries: entries})
		cancel()
		if err != nil {
			w.log.Warn("could not hide the batch while the database is unhealthy; the mapping retries it after its visibility timeout", "error", err.Error())
		}
	}
	for _, r := range msgs {
		w.emit(Event{SQSMessageID: aws.ToString(r.m.MessageId), Outcome: OutcomeParked, Infrastructure: true, Visibility: w.health.cfg.ParkVisibility})
	}
	w.metrics.Outcomes.WithLabelValues("", OutcomeParked).Add(float64(len(msgs)))
}

// sqsMessage is a Lambda SQS record as the SQS API's message.
func sqsMessage(rec events.SQSMessage) types.Message {
	m := types.Message{
		MessageId: aws.String(rec.MessageId), ReceiptHandle: aws.String(rec.ReceiptHandle), Body: aws.String(rec.Body),
		MD5OfBody: aws.String(rec.Md5OfBody), Attributes: rec.Attributes,
	}
	if len(rec.MessageAttributes) > 0 {
		m.MessageAttributes = make(map[string]types.MessageAttributeValue, len(rec.MessageAttributes))
		for k, v := range rec.MessageAttributes {
			m.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue,
				BinaryValue: v.BinaryValue, StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues}
		}
	}
	return m
}

// QueueURLFromARN is the queue URL of an SQS queue ARN
// (arn:aws:sqs:REGION:ACCOUNT:NAME), as AWS serves it; "" for another ARN.
// A Lambda handler can take the URL from its records' eventSourceARN.
func QueueURLFromARN(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return ""
	}
	host := "sqs." + parts[3] + ".amazonaws.com"
	if strings.HasPrefix(parts[1], "aws-cn") {
		host += ".cn"
	}
	return "https://" + host + "/" + parts[4] + "/" + parts[5]
}
