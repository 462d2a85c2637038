package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/health"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
)

// The defaults of HealthConfig.
const (
	DefaultHealthWindow        = health.DefaultWindow
	DefaultHealthMinFailures   = health.DefaultMinFailures
	DefaultConsecutiveFailures = health.DefaultConsecutive
	DefaultProbeInterval       = health.DefaultProbeInitial
	DefaultProbeMaxInterval    = health.DefaultProbeMax
	DefaultRecoverProbes       = 2
	DefaultParkVisibility      = time.Minute
	DefaultParkMaxVisibility   = maxVisibility
	minParkVisibility          = time.Second
	maxParkVisibilityRenewStep = time.Hour
)

// HealthConfig configures the database health gate. While DynamoDB is
// unhealthy the worker stops receiving, parks the messages it holds
// (hidden, their visibility kept up, so their receive count does not climb
// toward the redrive policy's maxReceiveCount), and probes the database
// gently; when probes succeed it resumes with a concurrency limit of 1 that
// grows back. Zero fields take the defaults above.
type HealthConfig struct {
	// Window is how far back the detector counts the outcomes of the
	// worker's DynamoDB calls. Default: DefaultHealthWindow.
	Window time.Duration
	// MinFailures is the fewest infrastructure failures (throttling, 5xx,
	// timeouts, connection errors) in the window that make the database
	// unhealthy, when they are at least half of the window's calls.
	// Default: DefaultHealthMinFailures.
	MinFailures int
	// ConsecutiveFailures in a row, with no success between, also make the
	// database unhealthy while the window is sparse (it holds fewer than
	// twice MinFailures calls): calls that hang are few — each waits for
	// CallTimeout — and would never fill the window. A busy window is
	// judged by its counts alone. Default: DefaultConsecutiveFailures.
	ConsecutiveFailures int
	// ProbeInterval is the wait before the first probe; later probes wait
	// 1.5 times longer each, up to ProbeMaxInterval. Default:
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeMaxInterval caps the wait between probes. Default:
	// DefaultProbeMaxInterval.
	ProbeMaxInterval time.Duration
	// RecoverProbes is how many probes in a row must succeed before the
	// worker resumes. Default: DefaultRecoverProbes.
	RecoverProbes int
	// ParkVisibility is the visibility a parked message is kept at; the
	// daemon renews it every third of that while the pause lasts, so a
	// worker that dies while paused leaves its parked messages hidden this
	// long. Under Lambda, which cannot hold a message between
	// invocations, it is the shortest hiding of a record received while
	// the database is unhealthy: on a standard queue a record is hidden as
	// long as the database has been unhealthy so far, as the execution
	// environment's gate knows it — at least ParkVisibility, at most
	// ParkMaxVisibility, up to a fifth less at random — so the backlog
	// drains within about one outage length (at least ParkVisibility) of
	// the recovery; on a FIFO queue ParkVisibility on the first receive,
	// four times longer on each later one, up to ParkMaxVisibility (see
	// OutageCover). Default: DefaultParkVisibility; at least 1s.
	ParkVisibility time.Duration
	// ParkMaxVisibility caps the hiding of a record parked under Lambda,
	// and the delay of a parked message re-sent on the last receive its
	// queue's redrive policy allows (which follows the same schedule,
	// within SQS's 15 minutes). On a standard queue it is the trade-off
	// between the drain after a long outage and what the polls during it
	// cost (each an invocation, a receive, a ChangeMessageVisibility per
	// record, and a probe when one is due): the backlog drains within
	// max(ParkVisibility, min(outage, ParkMaxVisibility)) +
	// ProbeMaxInterval × 1.2 + 1s of the recovery, and a record is received
	// about log2(min(outage, ParkMaxVisibility) / ParkVisibility) + 3
	// times, then once per ParkMaxVisibility. Simulated for 48 messages
	// and a 12-hour outage: 12h drains in 11h26m at 13 receives of a
	// message; 1h in 54m at 22. On a FIFO queue it also caps the hides
	// OutageCover adds up. Default: DefaultParkMaxVisibility (12h, SQS's
	// limit).
	ParkMaxVisibility time.Duration
}

// WithDefaults returns c with every zero field set to its default, and
// every problem with the result, joined.
func (c HealthConfig) WithDefaults() (HealthConfig, error) {
	c.Window = cmp.Or(c.Window, DefaultHealthWindow)
	c.MinFailures = cmp.Or(c.MinFailures, DefaultHealthMinFailures)
	c.ConsecutiveFailures = cmp.Or(c.ConsecutiveFailures, DefaultConsecutiveFailures)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.ProbeMaxInterval = cmp.Or(c.ProbeMaxInterval, DefaultProbeMaxInterval)
	c.RecoverProbes = cmp.Or(c.RecoverProbes, DefaultRecoverProbes)
	c.ParkVisibility = cmp.Or(c.ParkVisibility, DefaultParkVisibility)
	c.ParkMaxVisibility = cmp.Or(c.ParkMaxVisibility, DefaultParkMaxVisibility)
	var errs []error
	if _, err := (health.Config{Window: c.Window, MinFailures: c.MinFailures, Consecutive: c.ConsecutiveFailures}).WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("worker: Config.Health: %w", err))
	}
	if _, err := (health.Probes{Initial: c.ProbeInterval, Max: c.ProbeMaxInterval}).WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("worker: Config.Health: %w", err))
	}
	if c.RecoverProbes < 1 {
		errs = append(errs, fmt.Errorf("worker: Config.Health.RecoverProbes %d must be at least 1", c.RecoverProbes))
	}
	if c.ParkVisibility < minParkVisibility || c.ParkVisibility > maxParkVisibilityRenewStep {
		errs = append(errs, fmt.Errorf("worker: Config.Health.ParkVisibility %s must be within 1s..1h", c.ParkVisibility))
	}
	if c.ParkMaxVisibility < c.ParkVisibility || c.ParkMaxVisibility > maxVisibility {
		errs = append(errs, fmt.Errorf("worker: Config.Health.ParkMaxVisibility %s must be within ParkVisibility (%s)..12h", c.ParkMaxVisibility, c.ParkVisibility))
	}
	return c, errors.Join(errs...)
}

// healthItemPK is the partition of the probe items: one item per worker
// (sort key PROBE#<owner>), in the inbox table.
const healthItemPK = "DDBWORKER#HEALTH"

// dbHealth is the database health gate of one Run.
type dbHealth struct {
	w        *Worker
	detector *health.Detector
	probes   health.Probes
	cfg      HealthConfig
	trip     chan struct{} // wakes the prober (buffered 1)

	mu       sync.Mutex
	healthy  bool
	since    time.Time     // of the last transition
	resumed  chan struct{} // closed when the database is healthy again
	lastErr  string
	disabled bool // internal: a benchmark's "without the gate" baseline
	// lastFailed is the last time the gate found the database unhealthy:
	// the trip or a failed probe. The outage's age as the gate knows it
	// (parkAge) ends there, not at the clock: under Lambda an invocation
	// probes only when a probe is due, and may come long after the
	// database recovered.
	lastFailed time.Time
	// Under Lambda (no background prober): when the next probe is due and
	// how the probes went since the trip.
	nextProbe              time.Time
	failedProbes, okProbes int
	// letGo are the leases of parked messages let go while the database
	// was unhealthy (their visibility could not be renewed: the message is
	// back in the queue): given back when it recovers (releaseLetGo).
	letGo []inbox.Lease
	// coldSince is when a caller that knew the table could not be used
	// yet first parked through a gate that never tripped
	// (Worker.ParkSQSEvent: a cold start in an outage).
	coldSince time.Time
}

func newDBHealth(w *Worker, cfg HealthConfig) (*dbHealth, error) {
	d, err := health.New(health.Config{Window: cfg.Window, MinFailures: cfg.MinFailures, Consecutive: cfg.ConsecutiveFailures})
	if err != nil {
		return nil, fmt.Errorf("worker: Config.Health: %w", err)
	}
	p, err := health.Probes{Initial: cfg.ProbeInterval, Max: cfg.ProbeMaxInterval}.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("worker: Config.Health: %w", err)
	}
	resumed := make(chan struct{})
	close(resumed)
	return &dbHealth{w: w, detector: d, probes: p, cfg: cfg, trip: make(chan struct{}, 1), healthy: true, resumed: resumed}, nil
}

// Healthy reports whether the database is healthy (receiving goes on).
func (h *dbHealth) Healthy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healthy
}

// parkAge is how long the database has been unhealthy as the gate knows
// it, for the hide of a record parked under Lambda at now (and the delay
// of a copy re-sent on its last receive): from the trip to the last time
// the gate found the database unhealthy (lastFailed); for a gate that
// never tripped but parks for a caller that knew the table could not be
// used (a cold start in an outage), from that caller's first park to now.
// confirming reports that a probe has succeeded since the last failure
// and the next invocation confirms it (RecoverProbes): the database is
// likely back.
func (h *dbHealth) parkAge(now time.Time) (age time.Duration, confirming bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.healthy:
		return h.lastFailed.Sub(h.since), h.okProbes > 0
	case !h.coldSince.IsZero():
		return now.Sub(h.coldSince), false
	}
	return 0, false
}

// parkingCold marks the start of a cold start's outage (parkAge): the
// first park of a caller that knew the table could not be used yet.
func (h *dbHealth) parkingCold(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.coldSince.IsZero() {
		h.coldSince = now
	}
}

// wait blocks while the database is unhealthy.
func (h *dbHealth) wait(ctx context.Context) error {
	h.mu.Lock()
	ch := h.resumed
	h.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// record feeds one call's outcome to the detector; the call that trips it
// pauses the worker. A key-range throttle (dbKeyThrottled) is not fed:
// one hot key is parked alone (hotkey.go) and says nothing of the
// database — neither a failure nor a success.
func (h *dbHealth) record(now time.Time, r dbResult, err error) {
	if r == dbCancelled || r == dbCleanupOK || r == dbKeyThrottled || h.disabled {
		return
	}
	if !h.detector.Record(now, r.unhealthy()) {
		return
	}
	h.mu.Lock()
	if !h.healthy {
		h.mu.Unlock()
		return
	}
	h.healthy = false
	h.since, h.lastFailed = now, now
	h.resumed = make(chan struct{})
	h.nextProbe = now.Add(h.probes.Wait(1, rand.Float64()))
	h.failedProbes, h.okProbes = 0, 0
	if err != nil {
		h.lastErr = err.Error()
	}
	h.mu.Unlock()
	calls, failures := h.detector.Counts(now)
	h.w.metrics.DatabaseHealthy.Set(0)
	h.w.updateCapacity()
	h.w.metrics.HealthTransitions.WithLabelValues("unhealthy").Inc()
	h.w.log.Warn("database unhealthy: receiving paused; held messages parked; probing",
		"calls", calls, "failures", failures, "window", h.detector.Config().Window.String(), "lastError", truncateRunes(h.lastErr, 512))
	select {
	case h.trip <- struct{}{}:
	default:
	}
}

// run probes while the database is unhealthy and resumes the worker when
// RecoverProbes probes in a row succeed. It returns when ctx ends.
func (h *dbHealth) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.trip:
		}
		if h.probeUntilHealthy(ctx) {
			h.recover()
		}
	}
}

// stillPausedEvery is how often a long pause is logged again.
const stillPausedEvery = 5 * time.Minute

func (h *dbHealth) probeUntilHealthy(ctx context.Context) bool {
	failed, ok := 0, 0
	lastLog := h.w.cfg.Now()
	for {
		wait := h.probes.Wait(failed+1, rand.Float64())
		if ok > 0 {
			wait = min(wait, time.Second) // confirm a first success quickly
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		err := h.probe(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			h.w.metrics.Probes.WithLabelValues("ok").Inc()
			if ok++; ok >= h.cfg.RecoverProbes {
				return true
			}
			continue
		}
		h.w.metrics.Probes.WithLabelValues("failed").Inc()
		failed++
		ok = 0
		now := h.w.cfg.Now()
		h.mu.Lock()
		h.lastFailed = now
		since := h.since
		h.mu.Unlock()
		if now.Sub(lastLog) >= stillPausedEvery {
			lastLog = now
			h.w.log.Warn("database still unhealthy; receiving paused (messages waiting in the queue age toward its retention period)",
				"pausedFor", now.Sub(since).Round(time.Second).String(), "probes", failed, "lastError", truncateRunes(err.Error(), 512),
				"parked", h.w.parked.len())
		}
	}
}

// probe is one cheap write to this worker's health item in the inbox
// table, under the same retry policy as the calls whose failures tripped
// the gate (so the gate does not recover more slowly than it trips), bounded
// by the call timeout; its outcome does not feed the detector.
func (h *dbHealth) probe(ctx context.Context) error {
	now := h.w.cfg.Now()
	l := h.w.cfg.Store.Layout
	callCtx, cancel := context.WithTimeout(ctx, h.w.cfg.CallTimeout)
	defer cancel()
	_, err := h.w.deps.DynamoDB.PutItem(callCtx, &dynamodb.PutItemInput{
		TableName: aws.String(h.w.cfg.Store.Table),
		Item: map[string]ddbtypes.AttributeValue{
			l.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: healthItemPK},
			l.SortKey:      &ddbtypes.AttributeValueMemberS{Value: "PROBE#" + h.w.owner},
			"probedAt":     &ddbtypes.AttributeValueMemberS{Value: inbox.FormatTime(now)},
			l.TTL:          &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(24*time.Hour).Unix(), 10)},
		},
	}, h.w.db.opt)
	return err
}

func (h *dbHealth) recover() {
	h.releaseLetGo()
	now := h.w.cfg.Now()
	h.detector.Reset()
	limit := h.w.limiter.Restart(now)
	h.w.setLimit(limit)
	h.mu.Lock()
	paused := now.Sub(h.since)
	h.healthy = true
	h.since = now
	close(h.resumed)
	h.mu.Unlock()
	h.w.metrics.DatabaseHealthy.Set(1)
	h.w.updateCapacity()
	h.w.metrics.HealthTransitions.WithLabelValues("healthy").Inc()
	h.w.log.Info("database healthy: receiving resumed, concurrency ramping up from 1",
		"pausedFor", paused.Round(time.Millisecond).String(), "parked", h.w.parked.len(), "concurrencyLimit", limit)
}

// keepLease keeps the lease of a parked message let go while the database
// is unhealthy, to give it back when it recovers.
func (h *dbHealth) keepLease(l inbox.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.letGo = append(h.letGo, l)
}

// releaseLetGo gives back the leases of the parked messages let go during
// the outage, before receiving resumes, so that their next deliveries take
// the work over at once and count no takeover. Best effort, each fenced on
// its token: a lease another delivery took over already is not touched,
// and one not given back expires, costing one takeover.
func (h *dbHealth) releaseLetGo() {
	h.mu.Lock()
	leases := h.letGo
	h.letGo = nil
	h.mu.Unlock()
	for _, l := range leases {
		ctx, cancel := context.WithTimeout(asCleanup(context.Background()), h.w.cfg.CallTimeout)
		err := h.w.committer.Release(ctx, l, failure.NewRetryable(failure.CodeServiceUnavailable, "parked during a database outage and let go"))
		cancel()
		var lost *inbox.LeaseLostError
		if err != nil && !errors.As(err, &lost) {
			h.w.log.Warn("could not give back the lease of a parked message let go during the outage; it expires", "idempotencyKey", l.Key,
				"error", truncateRunes(err.Error(), maxLoggedMessage))
		}
	}
}

// parkedMsg is a message held while the database is unhealthy. It carries
// nothing but its delivery: when it runs again it goes through the gate
// like any delivery (nothing was charged that would need undoing).
type parkedMsg struct {
	d      *delivery
	hidden time.Time // when its visibility ends
}

// parkingLot holds parked messages until the database is healthy again, in
// units: one message, or the rest of a FIFO group in order, which must run
// again together and in order.
type parkingLot struct {
	mu    sync.Mutex
	units [][]parkedMsg
}

func (p *parkingLot) add(unit []parkedMsg) {
	if len(unit) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.units = append(p.units, unit)
}

func (p *parkingLot) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, u := range p.units {
		n += len(u)
	}
	return n
}

// take removes whole units, oldest first, holding at most n messages — but
// always the first unit, however long.
func (p *parkingLot) take(n int) []parkedMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []parkedMsg
	for len(p.units) > 0 && (len(out) == 0 || len(out)+len(p.units[0]) <= n) {
		out = append(out, p.units[0]...)
		p.units = p.units[1:]
	}
	return out
}

// due returns the parked messages whose visibility ends before horizon.
func (p *parkingLot) due(horizon time.Time) []parkedMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []parkedMsg
	for _, u := range p.units {
		for _, pm := range u {
			if pm.hidden.Before(horizon) {
				out = append(out, pm)
			}
		}
	}
	return out
}

// update applies f to the parked message with the receipt handle, and drops
// it when f returns false.
func (p *parkingLot) update(receipt string, f func(*parkedMsg) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ui, u := range p.units {
		for i := range u {
			if aws.ToString(u[i].d.m.ReceiptHandle) != receipt {
				continue
			}
			if !f(&u[i]) {
				u = append(u[:i], u[i+1:]...)
				if len(u) == 0 {
					p.units = append(p.units[:ui], p.units[ui+1:]...)
				} else {
					p.units[ui] = u
				}
			}
			return
		}
	}
}

// keepParked renews the visibility of parked messages until ctx ends: every
// third of ParkVisibility, in batches of 10. A message SQS will not hide any
// longer (12 hours after its receipt) is handed over with its lease
// (handOver), or let go: it comes back by itself. At shutdown the parked
// messages stay hidden (unpark); a lease one holds while the database is
// unhealthy is taken over when it expires (one takeover) — handing it over
// by re-send at shutdown was tried and left the original's delivery with
// no final outcome in the log, which the chaos run's tally cannot follow
// (TestChaosOutageShort); see issue 21's note.
func (w *Worker) keepParked(ctx context.Context) {
	every := w.health.cfg.ParkVisibility / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := w.parked.due(w.cfg.Now().Add(w.health.cfg.ParkVisibility / 2))
		for _, batch := range sqsbatch.Split(due, func(parkedMsg) int { return 0 }, sqsbatch.Limits{}) {
			w.extendParked(ctx, batch)
		}
		w.metrics.Parked.Set(float64(w.parked.len()))
	}
}

func (w *Worker) extendParked(ctx context.Context, batch []parkedMsg) {
	now := w.cfg.Now()
	var entries []types.ChangeMessageVisibilityBatchRequestEntry
	hides := map[string]time.Duration{}
	for i, pm := range batch {
		hide := w.cappedHide(w.health.cfg.ParkVisibility, pm.d.receivedAt)
		receipt := aws.ToString(pm.d.m.ReceiptHandle)
		if hide < w.health.cfg.ParkVisibility/2 {
			w.parked.update(receipt, func(*parkedMsg) bool { return false })
			if w.handOver(ctx, pm.d, w.health.cfg.ParkVisibility) {
				w.log.Warn("parked message re-sent with its lease: SQS hides a message at most 12 hours after its receipt", "sqsMessageId", pm.d.id)
				continue
			}
			if pm.d.held != nil {
				w.health.keepLease(*pm.d.held)
			}
			w.log.Warn("parked message released: SQS hides a message at most 12 hours after its receipt; it will be received again",
				"sqsMessageId", pm.d.id)
			continue
		}
		id := strconv.Itoa(i)
		hides[id] = hide
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(id), ReceiptHandle: pm.d.m.ReceiptHandle,
			VisibilityTimeout: visibilitySeconds(hide)})
	}
	if len(entries) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, sqsCallTimeout)
	defer cancel()
	out, err := w.deps.SQS.ChangeMessageVisibilityBatch(callCtx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(w.cfg.QueueURL), Entries: entries})
	if err != nil {
		w.log.Warn("could not renew the visibility of parked messages; retrying", "error", err.Error())
		return
	}
	for _, ok := range out.Successful {
		i, _ := strconv.Atoi(aws.ToString(ok.Id))
		w.parked.update(aws.ToString(batch[i].d.m.ReceiptHandle), func(pm *parkedMsg) bool {
			pm.hidden = now.Add(hides[aws.ToString(ok.Id)])
			return true
		})
	}
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		// The handle is no good any more (the message is back in the queue
		// or someone else holds it): its next delivery goes through the gate,
		// and a lease it held is given back when the database recovers.
		w.parked.update(aws.ToString(batch[i].d.m.ReceiptHandle), func(*parkedMsg) bool { return false })
		if l := batch[i].d.held; l != nil {
			w.health.keepLease(*l)
		}
		w.log.Info("parked message let go: its visibility could not be renewed", "sqsMessageId", batch[i].d.id,
			"code", aws.ToString(f.Code))
	}
}

// handOver hands the lease a parked delivery holds (delivery.held) to a
// copy of its message, sent delayed by delay (at most SQS's 15 minutes)
// with the lease in attrHeldLease, and deletes the message: the copy's
// claim gets the lease back instead of taking it over. It reports false,
// and does nothing, when d holds no lease, on a FIFO queue (the copy
// would leave its group's order: the lease is taken over, one takeover),
// or when the copy cannot be sent. A delete that fails leaves both: the
// gate absorbs the duplicate.
func (w *Worker) handOver(ctx context.Context, d *delivery, delay time.Duration) bool {
	if d.held == nil || w.fifo {
		return false
	}
	if err := w.resend(ctx, d, max(0, min(delay, maxSendDelay))); err != nil {
		w.log.Warn("could not re-send a parked message with its lease; its next delivery takes the lease over when it expires",
			"sqsMessageId", d.id, "error", truncateRunes(err.Error(), maxLoggedMessage))
		return false
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	out, err := w.deps.SQS.DeleteMessageBatch(callCtx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(w.cfg.QueueURL),
		Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: d.m.ReceiptHandle}}})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
	}
	if err != nil {
		w.log.Warn("re-sent a parked message with its lease, but could not delete it; the gate absorbs the duplicate",
			"sqsMessageId", d.id, "error", truncateRunes(err.Error(), maxLoggedMessage))
	}
	return true
}
