package worker

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/gate"
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
//   - concurrent invocations (Lambda Managed Instances run many at once in
//     one execution environment) share the worker: one health gate, one
//     adaptive concurrency limit and one write budget for all their
//     records; each holds its leases under its own name (WithInvocation);
//   - while the database is unhealthy (the health gate, which lives as long
//     as the execution environment) an invocation touches no table: it
//     probes at most on the probe schedule and, until the probes succeed,
//     parks every record: hidden and reported. On a standard queue a
//     record is hidden as long as the database has been unhealthy so far
//     (HealthConfig.ParkVisibility at least, ParkMaxVisibility at most),
//     so the polls grow fewer as the outage goes on and the backlog
//     drains within about one outage length of the recovery
//     (HealthConfig.outagePark); on the last receive the redrive policy
//     allows it is re-sent as a new message whose receive count starts
//     afresh, and not reported. On a FIFO queue, which cannot re-send, a
//     record is hidden longer the more often it was received
//     (ParkVisibility, four times longer each receive, up to
//     ParkMaxVisibility), so each poll costs the least of the redrive
//     policy's maxReceiveCount (see HealthConfig.OutageCover).
//
// The records are the event's, as the SQS API's messages (package lambda
// converts the runtime's event); the answer is the message ids of the
// records to report as batch item failures. It never returns an error: a
// failed record is reported, not the batch. Config.QueueURL must be the
// queue the mapping reads (visibility changes go there).
func (w *Worker) HandleSQSEvent(ctx context.Context, records []types.Message) (failed []string, err error) {
	w.Prepare(ctx)
	now := w.cfg.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(lambdaLease)
	}
	until := deadline.Add(-LambdaSettleMargin)
	owner := w.invocationOwner(ctx)
	ds := make([]*delivery, len(records))
	for i, rec := range records {
		// The mapping received the records before the invocation, up to
		// its batching window (at most 5 minutes) earlier: SQS's 12-hour
		// visibility cap counts from then.
		ds[i] = newDelivery(rec, now.Add(-maxBatchingWindow))
		ds[i].until, ds[i].deadline, ds[i].owner = until, deadline, owner
	}
	// Tracing on: the batch's span parents the records' consumer spans.
	ctx, span := w.batch(ctx, ds)
	defer endSpan(span)
	var mu sync.Mutex
	failed = []string{}
	report := func(d *delivery) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, d.id)
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
	var work sync.WaitGroup
	for _, group := range w.fairOrder(w.groups(ds)) {
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
	return failed, nil
}

type invocationKey struct{}

// WithInvocation returns ctx naming the Lambda invocation whose records
// HandleSQSEvent runs with it (the runtime's request id): the leases they
// take name their holder Config.Owner + "/" + id. Lambda Managed Instances
// run many invocations at once in one execution environment; they share
// its worker — one health gate, one concurrency limit, one write budget —
// but not a lease owner: a record's leaseOwner names the one invocation
// that holds it (its log lines carry the same awsRequestId), never one of
// several running at once. Without it HandleSQSEvent names the invocation
// at random.
func WithInvocation(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, invocationKey{}, id)
}

// invocationOwner is the lease owner of the invocation HandleSQSEvent runs
// with ctx: the worker's owner (the execution environment's) and the
// invocation's id, WithInvocation's or a random one.
func (w *Worker) invocationOwner(ctx context.Context) string {
	id, _ := ctx.Value(invocationKey{}).(string)
	if id == "" {
		id = "invocation-" + gate.NewToken()[:12]
	}
	return w.owner + "/" + id
}

// ParkSQSEvent parks every record of ev as HandleSQSEvent does while the
// database is unhealthy — hidden, reported, no table touched — for a
// caller that knows the table cannot be used yet (the Lambda adapter,
// until it could check the table after a cold start in an outage). On a
// standard queue the outage's age, which sets the hide, counts from the
// worker's first ParkSQSEvent.
func (w *Worker) ParkSQSEvent(ctx context.Context, records []types.Message) (failed []string) {
	w.Prepare(ctx)
	now := w.cfg.Now()
	ds := make([]*delivery, len(records))
	for i, rec := range records {
		ds[i] = newDelivery(rec, now.Add(-maxBatchingWindow))
	}
	w.health.parkingCold(now)
	ctx, span := w.batch(ctx, ds)
	defer endSpan(span)
	return w.park(ctx, ds)
}

// park parks ds and reports them, but for those re-sent on their last
// receive (Worker.parkByResend), which the mapping must delete.
func (w *Worker) park(ctx context.Context, ds []*delivery) []string {
	failed := make([]string, 0, len(ds))
	for _, d := range ds {
		if w.skip(ctx, d, notStarted{park: true}, lambdaHost{w: w}) != settledFinal {
			failed = append(failed, d.id)
		}
	}
	return failed
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
// while the database is unhealthy is hidden (Worker.lambdaParkHide).
type lambdaHost struct{ w *Worker }

func (lambdaHost) ack(*delivery) {}

func (h lambdaHost) park(ctx context.Context, d *delivery) time.Duration {
	vis := h.w.lambdaParkHide(d)
	h.w.changeVisibility(ctx, d.m, vis)
	return vis
}

// lambdaParkHide is how long the adapter hides a record parked while the
// database is unhealthy: on a standard queue by the outage's age as this
// execution environment's gate knows it (HealthConfig.outagePark), on a
// FIFO queue by its receive count (HealthConfig.fifoHide, which
// OutageCover adds up); either capped by SQS's 12-hour limit (capHide).
func (w *Worker) lambdaParkHide(d *delivery) time.Duration {
	now := w.cfg.Now()
	if w.fifo {
		return w.cfg.Health.fifoHide(d.receives, now.Sub(d.receivedAt))
	}
	age, confirming := w.health.parkAge(now)
	return capHide(w.cfg.Health.outagePark(age, confirming, rand.Float64()), now.Sub(d.receivedAt))
}

// parkJitter is the most a standard queue's parked record's hide is
// shortened at random (a fraction of it), so the records parked together
// come back spread out; never lengthened, which would break the bound
// outagePark states.
const parkJitter = 0.2

// confirmPark is the hide of a record parked while a probe's success
// waits for the next invocation to confirm it (RecoverProbes): long
// enough to end the invocation, short because the database is likely
// back.
const confirmPark = minParkVisibility

// outagePark is how long a standard queue's record is hidden under Lambda
// (and a copy re-sent on its last receive is delayed, within SQS's 15
// minutes: Worker.parkByResend) while the database has been unhealthy for
// age, as the execution environment's health gate knows it
// (dbHealth.parkAge): age, at least ParkVisibility and at most
// ParkMaxVisibility, shortened by up to parkJitter at random (u in
// [0, 1)), never below ParkVisibility; confirmPark while a probe's
// success waits for its confirmation. A cold start in an outage knows no
// start: its age starts at its first park, so its hides start from
// ParkVisibility.
//
// Why the age: an event source mapping cannot be paused from inside and
// polls the whole outage, each poll an invocation, a receive and a
// ChangeMessageVisibility per record, and a probe when one is due. Hiding
// as long as the outage has lasted at most doubles each hide, so a record
// is received about log2(outage / ParkVisibility) + 3 times in an outage
// (7 in 30 minutes, 13 in 12 hours, with the defaults); and since no hide
// is longer than the outage so far, every record comes back within one
// outage length of the recovery. The bound, for an outage of length L
// that the gate tripped on: a record parked before the gate's first
// successful probe after the recovery is hidden at most
// max(ParkVisibility, min(L, ParkMaxVisibility)) — its age ends at the
// last failed probe, before the recovery — and it was parked within P =
// ProbeMaxInterval × 1.2 (the probes' longest wait, jitter included) of
// the recovery, as a probe is due by then; so the backlog drains within
// max(ParkVisibility, min(L, ParkMaxVisibility)) + P + (RecoverProbes-1)
// × confirmPark of the recovery — 6m19s after a 6-minute outage with the
// defaults — plus the mapping's polling and batching window. A cold start
// in an outage, whose age runs to now and whose table check (the Lambda
// adapter's) waits up to ProbeMaxInterval, drains within
// max(ParkVisibility, min(L, ParkMaxVisibility)) + 2 × ProbeMaxInterval
// (6m30s). Receives no longer threaten the DLQ: on the last
// receive the redrive policy allows the record is re-sent with a fresh
// receive count (Worker.parkByResend), one SendMessage per
// maxReceiveCount receives.
//
// The trade-off, simulated for 48 messages arriving during the outage
// with maxReceiveCount 5 (TestOutageScheduleFigures): after 6 minutes the
// backlog drains in 5m21s, at 4 receives of a message at most and 82
// invocations, where the fourfold schedule before (fifoPark, re-sending
// on the last receive with a 15-minute delay) took 16m15s at 3 receives
// and 48 invocations; after 30 minutes, 28m against 1h4m. After 12 hours
// it drains in 11h26m at 13 receives (the fourfold one: 1h, at 38 receives
// and 159 re-sends, its hides restarting at every re-send).
// Capped at an hour (maxOutagePark), the drain is bounded by an hour
// after any outage, at a receive per record per hour once the outage is
// older than that (12 hours: 54m, 22 receives, 57 re-sends).
func (c HealthConfig) outagePark(age time.Duration, confirming bool, u float64) time.Duration {
	if confirming {
		return min(confirmPark, c.ParkVisibility)
	}
	d := min(max(age, c.ParkVisibility), c.ParkMaxVisibility, maxOutagePark)
	return max(c.ParkVisibility, d-time.Duration(parkJitter*u*float64(d)))
}

// maxOutagePark caps a standard queue's parking (outagePark) whatever
// ParkMaxVisibility allows (which also sets a FIFO queue's cover): every
// minute a record stays hidden after the database recovers is a minute
// its customer waits, and past an hour a longer hide saves little — one
// receive per record per hour (a 12-hour outage: 22 receives of a record
// and 57 re-sends for 48 records, against 13 and 5 uncapped) — while it
// bounds the drain after any outage by an hour and the probe wait.
const maxOutagePark = time.Hour

// fifoHide is how long the adapter hides a FIFO queue's record received
// for the receives-th time while the database is unhealthy, since after
// the mapping received it: fifoPark, capped by SQS's 12-hour limit
// (capHide). A record's receipt is taken to be maxBatchingWindow before
// its invocation, so a hide at ParkMaxVisibility (12h) is at most
// 12h - hideMargin - maxBatchingWindow = 11h54m. OutageCover adds up the
// same hides.
func (c HealthConfig) fifoHide(receives int, since time.Duration) time.Duration {
	return capHide(c.fifoPark(receives), since)
}

// fifoPark is how long a FIFO queue's record received for the
// receives-th time is hidden while the database is unhealthy under
// Lambda, where nothing can keep a message hidden between invocations
// and every poll of the event source mapping counts a receive:
// ParkVisibility on the first receive, four times longer on each later
// one, up to ParkMaxVisibility. A FIFO record cannot be re-sent (the copy
// would leave its group's order), so its hides must make the most of the
// redrive budget: their sum is its OutageCover.
func (c HealthConfig) fifoPark(receives int) time.Duration {
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
// SendMessage; the hides follow the outage's age (outagePark), so a
// record is received about log2(outage / ParkVisibility) + 2 times (11
// in 12 hours with the defaults), and the backlog drains within about one
// outage length of the recovery.
//
// A FIFO queue's record cannot be re-sent without leaving its group's
// order, and a record hidden on its last receive is moved to the DLQ at
// the next: its cover is the sum of the hidings of the receives before
// the last, as the adapter gives them (fifoHide, the same function: each
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
		total += c.fifoHide(k, maxBatchingWindow)
	}
	return total
}

// lambdaHealthy is the health gate between invocations: there is no
// background prober, so an invocation that finds the database unhealthy
// probes once when the schedule says a probe is due. The execution
// environment's invocations share the gate — Lambda Managed Instances run
// many at once — and its probes: one at a time (probeDue), whatever the
// number of invocations polling, and the gate recovers once.
func (w *Worker) lambdaHealthy(ctx context.Context) bool {
	h := w.health
	if h.Healthy() {
		return true
	}
	if !h.probeDue(w.cfg.Now()) {
		return false
	}
	err := h.probe(ctx)
	if err != nil {
		w.metrics.Probes.WithLabelValues("failed").Inc()
	} else {
		w.metrics.Probes.WithLabelValues("ok").Inc()
	}
	if !h.probed(w.cfg.Now(), err, rand.Float64()) {
		return false
	}
	h.recover()
	return true
}

// probeInFlight is nextProbe while an invocation's probe is under way: no
// other is due until it ends (probed schedules the next).
var probeInFlight = time.Unix(1<<62, 0)

// probeDue reports whether a probe is due at now; if so the caller probes
// and no other invocation does until it reports (probed). A probe that
// outlasts the wait — a database that hangs, each attempt until the call
// timeout — would otherwise be joined by another at every wait, and the
// probes answered together when the database comes back would each
// recover the gate.
func (h *dbHealth) probeDue(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy || now.Before(h.nextProbe) {
		return false
	}
	h.nextProbe = probeInFlight
	return true
}

// probed counts a probe's outcome at now, schedules the next probe from
// its end (u in [0, 1): the probes' jitter) and reports whether the
// database has recovered (RecoverProbes successes in a row); the caller
// recovers the gate.
func (h *dbHealth) probed(now time.Time, err error, u float64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy {
		return false
	}
	if err != nil {
		h.failedProbes++
		h.okProbes = 0
		h.lastFailed = now
		h.nextProbe = now.Add(h.probes.Wait(h.failedProbes, u))
		return false
	}
	h.okProbes++
	if h.okProbes < h.cfg.RecoverProbes {
		h.nextProbe = now // confirm on the next invocation
		return false
	}
	return true
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
