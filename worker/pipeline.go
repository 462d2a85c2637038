package worker

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/spans"
)

// One message's pipeline, top to bottom (each stage is called from here
// once and returns a value; see outcome.go for the values):
//
//	facts    the delivery, read once at receipt          newDelivery   pipeline.go
//	admit    decode or adapt, route, replay window,      admit         admit.go
//	         deferral, an Extended Client body; writes
//	         nothing
//	claim    the route's commit mode (gated, fused,      commitMode    mode.go
//	         single-write): the gate's lease, or the     .claim        claim.go
//	         run's own commit
//	run      handler and commit, heartbeat, re-runs      run           run.go
//	record   the only writer of failures to the inbox    record        record.go
//	apply    the only place that acts on SQS for it      apply         apply.go
//	observe  log line, metrics, event: one wrapper       observe       observe.go
//
// The daemon (worker.go: poll, dispatch) and the Lambda adapter
// (lambda.go) run the same pipeline; they differ only in their host: how a
// message is acked and parked.

// delivery is one received message and the facts of its delivery, read
// once when it is received: every stage reads them here.
type delivery struct {
	m        types.Message
	id       string    // SQS MessageId
	receives int       // ApproximateReceiveCount
	sentAt   time.Time // SentTimestamp (zero when absent)
	// origin is when the work's first message was sent: the earliest of
	// the first-sent attribute that DLQ copies, re-sends, relay sends and
	// redrives carry, and this message's SentTimestamp (zero when neither
	// is known).
	origin time.Time
	group  string // MessageGroupId
	// tenant is the message's tenant (fair.go: tenantOf), set by its host
	// before it runs.
	tenant string
	// receivedAt is when the message was received (SQS hides a message at
	// most 12 hours after its receipt).
	receivedAt time.Time
	// until, when set, ends the work (handler and commit): under Lambda the
	// invocation's deadline less the time kept to settle and answer; the
	// lease runs to the deadline (deadline) and has no heartbeat.
	until, deadline time.Time
	// held is the lease this delivery comes holding: one claimed and not
	// given back because the database was unhealthy (record writes nothing
	// then), handed over by the message's attribute (a parked message's
	// re-send: heldLeaseOf) or by the parking lot (the daemon's parked
	// delivery comes back as holding). Its claim presents the lease's token
	// and gets it back without counting a takeover (gate.Request.Token);
	// let go at shutdown, it is given back if the database is healthy. What
	// the delivery holds once recorded is the outcome's (outcome.held).
	// Under Lambda the lease just expires.
	held *inbox.Lease
	// owner, when set, names the holder of the leases this delivery takes
	// instead of Config.Owner: under Lambda, its invocation
	// (HandleSQSEvent).
	owner string
}

func newDelivery(m types.Message, receivedAt time.Time) *delivery {
	d := &delivery{m: m, id: aws.ToString(m.MessageId), receivedAt: receivedAt,
		group: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]}
	d.receives, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.sentAt = time.UnixMilli(ms)
	}
	d.origin = d.sentAt
	d.held = heldLeaseOf(m) // a parked message's re-send carries its lease
	if v, ok := m.MessageAttributes[dlq.AttrFirstSentAt]; ok {
		if ms, err := strconv.ParseInt(aws.ToString(v.StringValue), 10, 64); err == nil && ms > 0 {
			if first := time.UnixMilli(ms); d.origin.IsZero() || first.Before(d.origin) {
				d.origin = first
			}
		}
	}
	return d
}

// holding is d holding l instead (delivery.held): the same facts, as the
// parking lot keeps and a copy of the message hands over.
func (d *delivery) holding(l *inbox.Lease) *delivery {
	c := *d
	c.held = l
	return &c
}

// work is an admitted delivery: its envelope, its route, and the request
// the gate claims.
type work struct {
	env   *envelope.Envelope
	route ddbworker.Route
	req   *gate.Request
	// mode is the route's commit mode (Worker.modes), which claims the
	// work.
	mode commitMode
}

// claimed is a held lease and the attempts policy in effect for it.
type claimed struct {
	lease    inbox.Lease
	attempts failure.Policy
}

// host is where the pipeline runs: the daemon's pollers or a Lambda
// invocation. They differ in how a finished message leaves the queue and
// how one waits out an unhealthy database.
type host interface {
	// ack takes the message out of the queue (the daemon deletes in
	// batches; under Lambda the event source mapping deletes what the
	// invocation does not report).
	ack(d *delivery)
	// park keeps the message hidden until the database is healthy again,
	// and returns how long it hid it.
	park(ctx context.Context, d *delivery) time.Duration
}

// settled is what became of a delivery's message.
type settled int

const (
	settledFinal  settled = iota + 1 // it left the queue
	settledKept                      // it stays (retry, in flight, deferred, released)
	settledParked                    // it is parked until the database is healthy
)

// report is everything the observer needs of one delivery: what the
// stages decided, what the inbox was told, what was done to the message.
type report struct {
	work    *work
	outcome outcome
	applied applied
	// commit is how long the commit's transaction took (0: none).
	commit time.Duration
	// mode is the commit mode the last run was bound to (nil: none ran).
	mode commitMode
}

// unrecorded reports whether the delivery's work has no inbox record
// (commitMode.unrecorded).
func (r report) unrecorded() bool { return r.mode != nil && r.mode.unrecorded() }

// process carries one delivery through the pipeline. unstarted, when set,
// is the verdict of a delivery its host did not start (the rest of a FIFO
// group behind a failure or a parked message, a message received as the
// worker shuts down, a Lambda record with no time left): it goes straight
// to record and apply.
//
// The pipeline has one way back, and only one: a run that claims its
// work by its commit (fused, or single-write fresh: claimsByCommit) may
// find — with the commit, or with the write that records its failure —
// that the work has a record already. Then nothing of this run was
// written or charged, and the delivery is decided again from that record:
// claim, then run under the lease. The second pass never claims by its
// commit, so it never finds a record again; nor is it admitted again.
func (w *Worker) process(ctx context.Context, d *delivery, h host, unstarted verdict) report {
	var r report
	ctx = withTenant(ctx, d.tenant) // the write budget's share (fair.go)
	settleCtx, cancel := w.settling(ctx, d)
	defer cancel()
	v := unstarted
	var found *inbox.Record
	var adm admission
	// held is the lease the delivery holds: the one it came holding until
	// its claim presents it (at most once: a delivery that holds one claims
	// through the gate, and is never decided again).
	held := d.held
	defer func() { adm.hot.release() }()
	for {
		if v == nil {
			var claimed bool
			v, claimed = w.decide(ctx, d, &r, &adm, found)
			if claimed {
				held = nil
			}
		}
		recordCtx, span := w.stage(settleCtx, spans.SpanRecord)
		r.outcome, found = w.record(recordCtx, d, held, v)
		span.end(w, nil)
		if found == nil {
			break
		}
		v = nil
	}
	settleCtx, span := w.stage(settleCtx, spans.SpanSettle)
	r.applied = w.apply(settleCtx, d, r.work, r.outcome, h)
	span.end(w, nil)
	return r
}

// admission is a delivery's admit stage, as it came out (done: it ran): a
// delivery decided again from its work's record (process) is not admitted
// twice.
type admission struct {
	done    bool
	work    *work
	verdict verdict
	// hot is the delivery's pass through its key (hotkey.go), taken
	// before its first claim; process releases it.
	hot *hotTicket
}

// decide runs the deciding stages, each once: admit (unless adm holds its
// result from an earlier pass), claim — the route's mode's: the gate's,
// from found when an earlier pass found the work's record, or the run's
// own commit — and run. claimed: the claim ran (it presented the lease
// the delivery holds, if any).
func (w *Worker) decide(ctx context.Context, d *delivery, r *report, adm *admission, found *inbox.Record) (v verdict, claimed bool) {
	if !w.health.Healthy() {
		// Received (or taken from the parking lot) just as the database
		// turned unhealthy: not started, and admitted afresh when it runs.
		return notStarted{park: true}, false
	}
	workCtx, cancel := w.workContext(ctx, d)
	defer cancel()
	if !adm.done {
		adm.work, adm.verdict = w.admit(workCtx, d)
		adm.done = true
	}
	wk, v := adm.work, adm.verdict
	r.work = wk
	if v != nil {
		return v, false
	}
	if adm.hot == nil {
		// Its key parked (a hot key range): held back without a call,
		// or let through as the key's probe.
		if adm.hot, v = w.hotAdmit(d, wk); v != nil {
			return v, false
		}
	}
	m, v := wk.mode.claim(workCtx, d, wk, found)
	if v != nil {
		return w.hotSettle(d, adm.hot, v), true
	}
	r.mode = m
	return w.hotSettle(d, adm.hot, w.run(workCtx, d, wk, m, r)), true
}

// recordMarks are the attributes that mark a copy ddbworker made of a
// message whose work may have a record: mayHaveRecord reads them, and a
// re-send keeps them (controls).
var recordMarks = []string{dlq.AttrFailureCode, dlq.AttrRedrivenFrom, dlq.AttrResentFrom}

// mayHaveRecord reports whether d's work may have an inbox record already
// — the one rule for every way a message comes back. It may when:
//
//   - d is a redelivery (its receive count is above one);
//   - d holds a lease (a delivery parked while the database was down);
//   - d is a copy that ddbworker made of a message whose work may have had
//     a record: the worker's DLQ copy (AttrFailureCode), a redrive of it
//     by `dlq redrive` (AttrRedrivenFrom) or by SQS's own redrive, which
//     keeps the copy's attributes, or the worker's re-send of a delivery
//     that itself may have had one (AttrResentFrom; copyMarks sets it);
//   - SQS says the message went through a dead-letter queue
//     (DeadLetterQueueSourceArn), as a message the redrive policy moved
//     may say when a redrive brings it back.
//
// A copy inherits what its source knew: a re-send carries AttrResentFrom
// exactly when mayHaveRecord held for the delivery it copies, so the mark
// survives any number of re-sends and a copy of a fresh message stays
// fresh.
func mayHaveRecord(d *delivery) bool {
	if d.receives > 1 || d.held != nil {
		return true
	}
	for _, a := range recordMarks {
		if _, ok := d.m.MessageAttributes[a]; ok {
			return true
		}
	}
	return d.m.Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)] != ""
}

// workContext bounds the work of one delivery: MessageTimeout from now,
// or, under Lambda, the invocation's deadline less the settle margin.
func (w *Worker) workContext(ctx context.Context, d *delivery) (context.Context, context.CancelFunc) {
	if !d.until.IsZero() {
		return context.WithDeadline(ctx, d.until)
	}
	return context.WithTimeout(ctx, w.cfg.MessageTimeout)
}

// settleTimeout bounds the inbox and SQS calls that settle a delivery
// once its work is done, which may be after the per-message deadline.
const settleTimeout = 10 * time.Second

// settling is the context that records and applies an outcome: not ended
// by the per-message deadline or by shutdown (a failure must be recorded,
// or the record stays PROCESSING until its lease ends), but bounded — and,
// under Lambda, ended by the invocation's deadline.
func (w *Worker) settling(ctx context.Context, d *delivery) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if !d.deadline.IsZero() {
		return context.WithDeadline(detached, d.deadline)
	}
	return context.WithTimeout(detached, settleTimeout)
}
