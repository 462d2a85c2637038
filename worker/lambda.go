package worker

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/tracing"
)

// maxBatchingWindow is the longest an event source mapping holds records
// before it invokes the function.
const maxBatchingWindow = 5 * time.Minute

// HandleSQSEvent runs the pipeline — admit, claim, run, record, apply, as
// the daemon does — for each record of one Lambda invocation by an SQS
// event source mapping with ReportBatchItemFailures, and reports the
// records that must come back:
//
//   - applied work, duplicates, terminal work its policy settled (a DLQ
//     copy sent, or quarantined) and work deferred by a re-sent copy are
//     successes: the mapping deletes them;
//   - a retryable failure (and work in flight elsewhere, or deferred by
//     visibility) is hidden for its backoff with ChangeMessageVisibility
//     on the record's receipt handle, then reported, so the retry is not
//     instant;
//   - under the redrive terminal policy, terminal work is reported and the
//     queue's redrive policy moves it to the DLQ;
//   - on a FIFO queue, records of a group run in order and the first that
//     does not succeed reports itself and the rest of its group;
//   - every record's lease ends with the invocation's deadline (no
//     heartbeat: the invocation cannot outlive it), and its work must end
//     LambdaSettleMargin before that deadline — measured from the
//     invocation, not from the record's start, so a record that waited for
//     a slot has less time, and one with too little left is not started;
//   - records run concurrently up to the adaptive concurrency limit;
//   - while the database is unhealthy (the health gate, which lives as long
//     as the execution environment) an invocation touches no table: it
//     probes at most on the probe schedule and, until the probes succeed,
//     parks every record: hidden longer the more often it was received
//     (HealthConfig.ParkVisibility, growing to ParkMaxVisibility) and
//     reported, so that each poll of the mapping costs the least of the
//     redrive policy's maxReceiveCount — and, on a standard queue, on the
//     last receive the policy allows, re-sent as a new message whose
//     receive count starts afresh, and not reported (see
//     HealthConfig.OutageCover).
//
// It never returns an error: a failed record is reported, not the batch.
// Config.QueueURL must be the queue the mapping reads (visibility changes
// go there).
func (w *Worker) HandleSQSEvent(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	w.Prepare(ctx)
	now := w.cfg.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(lambdaLease)
	}
	until := deadline.Add(-LambdaSettleMargin)
	ds := make([]*delivery, len(ev.Records))
	for i, rec := range ev.Records {
		// The mapping received the records before the invocation, up to
		// its batching window (at most 5 minutes) earlier: SQS's 12-hour
		// visibility cap counts from then.
		ds[i] = newDelivery(sqsMessage(rec), now.Add(-maxBatchingWindow))
		ds[i].until, ds[i].deadline = until, deadline
	}
	// Tracing on: the batch's span parents the records' consumer spans.
	ctx, span := w.batch(ctx, ds)
	defer endSpan(span)
	var mu sync.Mutex
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	report := func(d *delivery) {
		mu.Lock()
		defer mu.Unlock()
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: d.id})
	}
	h := lambdaHost{w: w}
	if !w.lambdaHealthy(ctx) {
		// The health gate said so (once) when the database turned
		// unhealthy; each invocation's parking is a debug line.
		w.log.DebugContext(ctx, "database unhealthy: the batch is parked and reported without touching the table", "records", len(ds))
		return w.park(ctx, ds), nil
	}
	slotCtx, cancel := context.WithDeadline(ctx, until.Add(-minRecordTime))
	defer cancel()
	w.readAhead(ctx, ds)
	var work sync.WaitGroup
	for _, group := range w.groups(ds) {
		if _, err := w.pool.AcquireBatch(slotCtx, 1); err != nil {
			// No time left to start the group: back at once, untouched.
			for _, d := range group {
				w.skip(ctx, d, notStarted{}, h)
				report(d)
			}
			continue
		}
		work.Go(func() {
			defer w.pool.Release(1)
			ok := true
			for _, d := range group {
				var s settled
				switch {
				case !ok, w.cfg.Now().After(until.Add(-minRecordTime)):
					// After a failure in its FIFO group, or with too
					// little time left: back, in order, untouched.
					s = w.skip(ctx, d, notStarted{}, h)
				default:
					s = w.handle(ctx, d, h)
				}
				if s != settledFinal {
					report(d)
					ok = !w.fifo
				}
			}
		})
	}
	work.Wait()
	return resp, nil
}

// ParkSQSEvent parks every record of ev as HandleSQSEvent does while the
// database is unhealthy — hidden by its receive count, reported, no table
// touched — for a caller that knows the table cannot be used yet (the
// Lambda adapter, until it could check the table after a cold start in
// an outage).
func (w *Worker) ParkSQSEvent(ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	w.Prepare(ctx)
	now := w.cfg.Now()
	ds := make([]*delivery, len(ev.Records))
	for i, rec := range ev.Records {
		ds[i] = newDelivery(sqsMessage(rec), now.Add(-maxBatchingWindow))
	}
	ctx, span := w.batch(ctx, ds)
	defer endSpan(span)
	return w.park(ctx, ds)
}

// park parks ds and reports them, but for those re-sent on their last
// receive (Worker.parkByResend), which the mapping must delete.
func (w *Worker) park(ctx context.Context, ds []*delivery) events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: make([]events.SQSBatchItemFailure, 0, len(ds))}
	for _, d := range ds {
		if w.skip(ctx, d, notStarted{park: true}, lambdaHost{w: w}) != settledFinal {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: d.id})
		}
	}
	return resp
}

// LambdaSettleMargin is the time kept back from an invocation's deadline
// to record a record's outcome and answer before Lambda ends the
// invocation: a record's work (handler and commit) ends this long before
// the deadline.
const LambdaSettleMargin = 2 * time.Second

// minRecordTime is the least time before its work must end for a record
// to be started.
const minRecordTime = 250 * time.Millisecond

// lambdaLease is the lease of records of an invocation without a deadline
// (not under Lambda: tests).
const lambdaLease = 30 * time.Second

// lambdaHost is a Lambda invocation's host: the event source mapping
// deletes every record the invocation does not report; a record parked
// while the database is unhealthy is hidden by its receive count.
type lambdaHost struct{ w *Worker }

func (lambdaHost) ack(*delivery) {}

func (h lambdaHost) park(ctx context.Context, d *delivery) time.Duration {
	vis := h.w.cfg.Health.lambdaHide(d.receives, h.w.cfg.Now().Sub(d.receivedAt))
	h.w.changeVisibility(ctx, d.m, vis)
	return vis
}

// lambdaHide is how long the adapter hides a record received for the
// receives-th time while the database is unhealthy, since after the
// mapping received it: lambdaPark, capped by SQS's 12-hour limit
// (capHide). A record's receipt is taken to be maxBatchingWindow before
// its invocation, so a hide at ParkMaxVisibility (12h) is at most
// 12h - hideMargin - maxBatchingWindow = 11h54m. OutageCover adds up the
// same hides.
func (c HealthConfig) lambdaHide(receives int, since time.Duration) time.Duration {
	return capHide(c.lambdaPark(receives), since)
}

// lambdaPark is how long a record received for the receives-th time is
// hidden while the database is unhealthy under Lambda, where nothing can
// keep a message hidden between invocations and every poll of the event
// source mapping counts a receive: ParkVisibility on the first receive,
// four times longer on each later one, up to ParkMaxVisibility. (On the
// last receive the redrive policy allows, a standard queue's record is
// re-sent instead: Worker.parkByResend.)
func (c HealthConfig) lambdaPark(receives int) time.Duration {
	d := c.ParkVisibility
	for i := 1; i < receives && d < c.ParkMaxVisibility; i++ {
		d *= 4
	}
	return min(d, c.ParkMaxVisibility)
}

// OutageCover is the longest DynamoDB outage a Lambda function survives
// without a healthy message reaching the DLQ through a redrive policy of
// maxReceiveCount.
//
// On a standard queue any outage, up to the inbox's replay window (the
// TTL of COMPLETED records, 35 days by default): a record parked on the
// last receive the policy allows is re-sent as a new message, whose
// receive count starts afresh (Worker.parkByResend). The copy costs one
// SendMessage; the hidings before it grow fourfold from ParkVisibility, so
// a record is received about five times in the first 100 minutes of an
// outage with the defaults, then once every 1h40m or so.
//
// A FIFO queue's record cannot be re-sent without leaving its group's
// order, and a record hidden on its last receive is moved to the DLQ at
// the next: its cover is the sum of the hidings of the receives before
// the last, as the adapter gives them (lambdaHide, the same function: each
// capped 12 hours after its receipt less a minute, the receipt taken to be
// the 5-minute batching window before the invocation), each received again
// as soon as it ends; its last receive must find the database healthy.
// With the defaults (1 minute, growing fourfold, up to 11h54m)
// maxReceiveCount 5 covers 1h25m (1m + 4m + 16m + 64m), 10 covers 53h17m
// (1m + 4m + 16m + 64m + 256m + 4 × 11h54m), and 1 covers none.
//
// No redrive policy (0) covers any outage (up to the queue's retention).
// The cover is a lower bound: a record comes back later than its hiding
// when the mapping polls less often.
func (c HealthConfig) OutageCover(maxReceiveCount int, fifo bool) time.Duration {
	if maxReceiveCount <= 0 || !fifo {
		return math.MaxInt64
	}
	var total time.Duration
	for k := 1; k < maxReceiveCount; k++ {
		total += c.lambdaHide(k, maxBatchingWindow)
	}
	return total
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

// QueueName is the name of the queue a queue URL (or ARN) names
// (tracing.QueueName): the log line's queue field and the spans'
// messaging.destination.name.
func QueueName(queueURL string) string { return tracing.QueueName(queueURL) }
