package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/mutation"
)

// disposition is what must happen to a delivery's SQS message.
type disposition struct {
	outcome string
	ack     bool           // delete the message
	hide    time.Duration  // keep it, hidden this long (when keep is set)
	keep    bool           // change visibility to hide
	failure *failure.Error // a retry's or terminal's failure
	attempt int
	// infra marks infrastructure trouble (no business attempt counted):
	// while the database is unhealthy the message is parked, not hidden.
	infra bool
	// release is a refund of a held lease that could not be written yet.
	release *pendingRelease
	// resend re-sends a deferred message as a new one (with this delay)
	// and deletes this one: its receive count and retention start afresh.
	resend    bool
	sendDelay time.Duration
}

func ackWith(outcome string) disposition { return disposition{outcome: outcome, ack: true} }

func keepFor(outcome string, d time.Duration, f *failure.Error) disposition {
	return disposition{outcome: outcome, keep: true, hide: d, failure: f}
}

func terminalWith(f *failure.Error) disposition {
	return disposition{outcome: OutcomeTerminal, failure: f}
}

// pendingRelease is a lease to give back (its attempt refunded) before the
// work runs again.
type pendingRelease struct {
	lease   inbox.Lease
	failure *failure.Error
}

// delivery is one message on its way through the protocol.
type delivery struct {
	m          types.Message
	receivedAt time.Time
	release    *pendingRelease
	lease      time.Duration // 0: the policy's, renewed by the heartbeat
	env        *envelope.Envelope
	req        *gate.Request
	rt         ddbworker.Route
}

// settled is what became of a delivery.
type settled int

const (
	settledFinal  settled = iota + 1 // the message left the queue
	settledKept                      // it stays (retry, in flight, deferred, released)
	settledParked                    // it is parked until the database is healthy
)

// process runs the protocol for one message and applies its disposition.
func (w *Worker) process(ctx context.Context, r received, del acker) (settled, *parkedMsg) {
	start := w.cfg.Now()
	w.metrics.InFlight.Inc()
	defer w.metrics.InFlight.Dec()
	d := &delivery{m: r.m, receivedAt: r.at, release: r.rel, lease: r.lease}
	var disp disposition
	if !w.health.Healthy() {
		// Received (or taken from the lot) just as the database turned
		// unhealthy: not started, parked.
		disp = disposition{outcome: OutcomeParked, infra: true, release: r.rel}
	} else {
		if t := sentAt(r.m); !t.IsZero() {
			w.metrics.MessageAge.Observe(start.Sub(t).Seconds())
		}
		timeout := w.cfg.MessageTimeout
		if r.timeout > 0 {
			timeout = r.timeout
		}
		msgCtx, cancel := context.WithTimeout(ctx, timeout)
		disp = w.deliver(msgCtx, d)
		cancel()
		if disp.infra && !w.health.Healthy() {
			disp = disposition{outcome: OutcomeParked, infra: true, release: disp.release, failure: disp.failure, attempt: disp.attempt}
		}
	}
	return w.finish(ctx, d, disp, del, start)
}

func (w *Worker) deliver(ctx context.Context, d *delivery) disposition {
	if pr := d.release; pr != nil {
		if disp, done := w.giveBack(ctx, pr.lease, pr.failure, 0); !done {
			return disp
		}
		d.release = nil
	}
	body, decoder, disp, ok := w.messageBody(ctx, d) // an SQS Extended Client message's body is in S3
	if !ok {
		return disp
	}
	env, err := decoder.Decode(body)
	if err != nil {
		code := failure.CodeHandlerError
		var ee *envelope.Error
		if errors.As(err, &ee) {
			code = string(ee.Code)
		}
		return w.reject(ctx, d, &gate.Rejection{Code: code, Message: err.Error()})
	}
	d.env = env
	rt, ok := w.routes[env.MessageType]
	if !ok {
		return w.reject(ctx, d, w.rejection(env, failure.CodeUnknownMessageType, fmt.Sprintf("no handler for message type %q", env.MessageType)))
	}
	d.rt = rt
	now := w.cfg.Now()
	if origin := originTime(d.m); !origin.IsZero() && now.Sub(origin) >= w.cfg.Store.TTL.Completed-w.policy.Skew {
		// Its COMPLETED record, if the work was ever applied, may be gone
		// by TTL: the gate could not tell a replay from new work.
		return w.reject(ctx, d, w.rejection(env, failure.CodeReplayWindowExpired, fmt.Sprintf(
			"first sent %s, longer ago than the inbox keeps COMPLETED records (%s): a replay this old could apply the work twice",
			inbox.FormatTime(origin), w.cfg.Store.TTL.Completed)))
	}
	if ap := env.AttemptPolicy; ap != nil && ap.NotBefore != nil && now.Before(*ap.NotBefore) {
		return w.defer_(ctx, d, ap.NotBefore.Sub(now))
	}
	d.req = &gate.Request{Work: inbox.Work{
		Key: env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
		SchemaVersion: env.SchemaVersion, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Producer: env.Producer,
	}, Lease: d.lease, HashAs: env.HashLike}
	if ap := env.AttemptPolicy; ap != nil {
		d.req.Attempts = failure.Policy{MaxAttempts: ap.MaxBusinessAttempts, TerminalAfterCodes: ap.TerminalAfterCodes}
		if ap.RetryableUntil != nil {
			d.req.Attempts.RetryableUntil = *ap.RetryableUntil
		}
	}
	if rt.Fused && env.PayloadRef == nil { // a payload by reference is fetched under the gate's lease
		return w.deliverFused(ctx, d)
	}
	dec, err := w.gate.Acquire(ctx, d.req)
	if err != nil {
		return w.unleased(ctx, d, err)
	}
	return w.decided(ctx, d, dec)
}

// rejection describes env's work for a rejection record.
func (w *Worker) rejection(env *envelope.Envelope, code, message string) *gate.Rejection {
	return &gate.Rejection{Code: code, Message: message, Key: env.IdempotencyKey, MessageType: env.MessageType,
		RequestHash: env.RequestHash, AggregateType: env.AggregateType, AggregateID: env.AggregateID, CorrelationID: env.CorrelationID}
}

// maxSendDelay is SQS's longest per-message delay.
const maxSendDelay = 15 * time.Minute

// defer_ keeps a message whose attemptPolicy.notBefore lies wait ahead,
// without a lease or an attempt. One visibility change covers it when it
// can (SQS hides a message at most 12 hours after its receipt, and the
// message must outlive its hiding within the queue's retention); otherwise
// a standard queue's message is re-sent as a new one (delayed up to 15
// minutes) and this one deleted, so neither its receive count nor its age
// climbs toward the redrive policy or the retention period by deferral
// alone. A FIFO message cannot be re-sent without breaking its group's
// order: one deferred further than one hiding covers ends terminal.
func (w *Worker) defer_(ctx context.Context, d *delivery, wait time.Duration) disposition {
	if wait > w.cfg.MaxDeferral {
		return w.reject(ctx, d, w.rejection(d.env, failure.CodeDeferralTooLong,
			fmt.Sprintf("attemptPolicy.notBefore is %s ahead; the worker defers at most %s (Config.MaxDeferral)", wait.Round(time.Second), w.cfg.MaxDeferral)))
	}
	hide := w.cappedHide(wait, d.receivedAt)
	age := w.cfg.Now().Sub(sentAt(d.m))
	// Hidden, the message comes back once more: within its retention and
	// without passing the redrive policy's maxReceiveCount.
	outlives := (sentAt(d.m).IsZero() || age+hide+retentionMargin < w.retention) &&
		(w.maxReceives == 0 || receiveCount(d.m) < w.maxReceives)
	covers := hide >= wait
	switch {
	case w.fifo && covers && outlives:
		return keepFor(OutcomeDeferred, hide, nil)
	case w.fifo:
		return w.reject(ctx, d, w.rejection(d.env, failure.CodeDeferralTooLong, fmt.Sprintf(
			"attemptPolicy.notBefore is %s ahead: on a FIFO queue one visibility change must cover a deferral (at most 12h after receipt, within the queue's retention of %s)",
			wait.Round(time.Second), w.retention)))
	case outlives && (covers || receiveCount(d.m) <= 1):
		return keepFor(OutcomeDeferred, hide, nil)
	}
	return disposition{outcome: OutcomeDeferred, resend: true, sendDelay: min(wait, maxSendDelay)}
}

// retentionMargin is how long before the end of its retention a hidden
// message must come back.
const retentionMargin = time.Hour

// unleased: an error before any lease was held (the gate's call failed):
// no attempt is counted; the message comes back after a backoff. A request
// DynamoDB refuses as invalid (ValidationException: it will not heal by
// waiting) is rejected terminal with its code instead of retried forever.
func (w *Worker) unleased(ctx context.Context, d *delivery, err error) disposition {
	f := failure.Classify(err, failure.CodeServiceUnavailable)
	if f.IsTerminal() {
		return w.reject(ctx, d, w.rejection(d.env, f.Code, "the gate's request was refused: "+f.Message))
	}
	if errors.Is(err, gate.ErrRaceLimit) {
		f = failure.Wrap(failure.Retryable, failure.CodeTransactionConflict, err)
	}
	disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(unleasedStep(d.m)), f)
	disp.infra = true
	return disp
}

// unleasedStep is the backoff step of a delivery that failed for
// infrastructure reasons (no business attempt is counted): its receive
// count, capped low — innocent redeliveries (in-flight duplicates, a storm
// after an outage) raise the count, and one throttle must not then hide a
// message for minutes. Database-wide trouble is the health gate's.
func unleasedStep(m types.Message) int { return min(max(1, receiveCount(m)), 4) }

// reject records a message that cannot be filed under its key, then ends it
// with the terminal policy. If the record cannot be written because the
// database is in trouble, the message stays (retry): it must not leave the
// queue unaccounted for; a record DynamoDB refuses as invalid cannot be
// written ever, and the terminal policy still accounts for the message.
func (w *Worker) reject(ctx context.Context, d *delivery, r *gate.Rejection) disposition {
	r.SQSMessageID = aws.ToString(d.m.MessageId)
	if err := w.gate.Reject(ctx, r); err != nil {
		if f := failure.Classify(err, failure.CodeServiceUnavailable); !f.IsTerminal() {
			disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(unleasedStep(d.m)), f)
			disp.infra = true
			return disp
		}
		w.log.Error("rejection record refused by DynamoDB; the terminal policy still applies", "sqsMessageId", r.SQSMessageID,
			"code", r.Code, "error", truncateRunes(err.Error(), maxLoggedMessage))
	}
	return terminalWith(failure.NewTerminal(r.Code, r.Message))
}

func (w *Worker) decided(ctx context.Context, d *delivery, dec gate.Decision) disposition {
	switch dec.Action {
	case gate.Duplicate:
		return ackWith(OutcomeDuplicate)
	case gate.InFlight:
		return keepFor(OutcomeInFlight, max(dec.RetryAfter, time.Second)+w.cfg.Backoff.Delay(1, 0)/2, nil)
	case gate.Terminal:
		f := failure.NewTerminal(dec.Code, dec.Message)
		if dec.Code == failure.CodeHashMismatch {
			w.metrics.HashMismatches.Inc()
			w.log.Error("ALERT idempotency hash mismatch: the key already holds other work; the existing record is untouched",
				"idempotencyKey", d.req.Key, "messageType", d.req.MessageType, "sqsMessageId", aws.ToString(d.m.MessageId),
				"existingHash", dec.Record.RequestHash, "requestHash", d.req.RequestHash)
			return w.reject(ctx, d, w.rejection(d.env, dec.Code, dec.Message))
		}
		disp := terminalWith(f)
		if dec.Record != nil {
			disp.attempt = dec.Record.Attempts
		}
		return disp
	case gate.Acquired:
		w.fail(hooks.AfterGate)
		return w.runLease(ctx, d, dec.Lease, dec.Attempts)
	}
	disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(1), failure.NewRetryable(failure.CodeServiceUnavailable, "gate: unknown action "+dec.Action.String()))
	disp.infra = true
	return disp
}

// leaseLock keeps the heartbeat's renewal and the commit off the inbox item
// at the same time: on DynamoDB an UpdateItem on an item that a
// transaction is writing (or the other way round) fails with a transaction
// conflict, and the worker must not conflict with itself.
type leaseLock struct{ sync.Mutex }

// runLease runs the handler and commits under lease, renewing it while the
// handler runs long, re-running the handler after Retry guards.
func (w *Worker) runLease(ctx context.Context, d *delivery, lease inbox.Lease, attempts failure.Policy) disposition {
	handlerCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	var lock leaseLock
	stopBeat := func() {}
	if d.lease == 0 {
		stopBeat = w.startHeartbeat(handlerCtx, d.m, lease, &lock, abort)
	}
	defer stopBeat()
	if err := w.resolvePayload(handlerCtx, d.env); err != nil {
		if lost := leaseLostCause(handlerCtx); lost != nil {
			return w.lostLease(lost, lease.Attempts)
		}
		err = w.overran(ctx, err)
		settleCtx, cancel := detached(ctx)
		defer cancel()
		stopBeat()
		return w.payloadFailed(settleCtx, d, lease, attempts, err)
	}
	for run := 0; ; run++ {
		msg := &ddbworker.Message{Envelope: d.env, SQSMessageID: aws.ToString(d.m.MessageId), ReceiveCount: receiveCount(d.m), Attempt: lease.Attempts, Run: run, LeaseToken: lease.Token}
		res, err := w.callHandler(handlerCtx, d.rt.Handler, msg)
		if lost := leaseLostCause(handlerCtx); lost != nil {
			return w.lostLease(lost, lease.Attempts)
		}
		if err == nil {
			var disp disposition
			if disp, err = w.commit(res, lease.Attempts, func(writes []mutation.Write, done mutation.Completion) error {
				lock.Lock()
				defer lock.Unlock()
				return w.committer.Commit(ctx, lease, writes, done, run)
			}); err == nil {
				return disp
			}
		}
		var ge *mutation.GuardError
		if errors.As(err, &ge) && ge.Verdict.Kind == mutation.Retry && run < w.cfg.MaxGuardRetries {
			continue
		}
		err = w.overran(ctx, err)
		settleCtx, cancel := detached(ctx)
		defer cancel()
		stopBeat() // settling writes the record; no renewal may race it
		return w.settle(settleCtx, d, lease, attempts, err)
	}
}

// settleTimeout bounds the inbox writes that settle a delivery once its
// handler is done, which may be after the per-message deadline.
const settleTimeout = 10 * time.Second

// detached is the context that settles a delivery: not ended by the
// per-message deadline or by shutdown (a failure must be recorded, or the
// record stays PROCESSING until its lease ends), but bounded.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// overran names a failure caused by the end of the work's context: the
// per-message deadline (the handler or its commit ran past MessageTimeout:
// a business failure) or shutdown (infrastructure: not an attempt).
func (w *Worker) overran(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return failure.Wrap(failure.Retryable, failure.CodeShutdown, fmt.Errorf("shutdown cancelled the work: %w", err))
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if f, ok := failure.As(err); ok && f.Code != failure.CodeTimeout {
		return err // the handler chose its own failure
	}
	return failure.Wrap(failure.Retryable, failure.CodeMessageTimeout,
		fmt.Errorf("handler and commit ran past MessageTimeout (%s): %w", w.cfg.MessageTimeout, err))
}

// commit runs one commit of a handler's result and times it; after a
// commit the after-commit failpoint passes and the message is acked.
func (w *Worker) commit(res ddbworker.Result, attempt int, do func([]mutation.Write, mutation.Completion) error) (disposition, error) {
	writes := make([]mutation.Write, len(res.Writes))
	for i, wr := range res.Writes {
		m, err := wr.Mutation()
		if err != nil {
			return disposition{}, fmt.Errorf("write %d: %w", i, err)
		}
		writes[i] = m
	}
	start := w.cfg.Now()
	err := do(writes, mutation.Completion{Outcome: res.Outcome, ResultRef: res.ResultRef})
	w.metrics.Commit.Observe(w.cfg.Now().Sub(start).Seconds())
	if err != nil {
		return disposition{}, err
	}
	w.fail(hooks.AfterCommit)
	disp := ackWith(appliedOutcome(res.Outcome))
	disp.attempt = attempt
	return disp, nil
}

func appliedOutcome(o string) string {
	if o == "" || o == inbox.OutcomeApplied {
		return OutcomeApplied
	}
	if o == inbox.OutcomeSuperseded {
		return OutcomeSuperseded
	}
	return strings.ToLower(o)
}

func leaseLostCause(ctx context.Context) *inbox.LeaseLostError {
	var lost *inbox.LeaseLostError
	if errors.As(context.Cause(ctx), &lost) {
		return lost
	}
	return nil
}

// settle turns a failed handler run or commit into an inbox transition and
// a disposition.
func (w *Worker) settle(ctx context.Context, d *delivery, lease inbox.Lease, attempts failure.Policy, err error) disposition {
	var lost *inbox.LeaseLostError
	if errors.As(err, &lost) {
		return w.lostLease(lost, lease.Attempts)
	}
	var f *failure.Error
	var ge *mutation.GuardError
	if errors.As(err, &ge) {
		switch ge.Verdict.Kind {
		case mutation.Supersede:
			serr := w.committer.Supersede(ctx, lease, ge.Verdict.Outcome)
			if serr == nil {
				disp := ackWith(appliedOutcome(orDefault(ge.Verdict.Outcome, inbox.OutcomeSuperseded)))
				disp.attempt = lease.Attempts
				return disp
			}
			if errors.As(serr, &lost) {
				return w.lostLease(lost, lease.Attempts)
			}
			f = failure.Classify(serr, failure.CodeServiceUnavailable)
		case mutation.Fail:
			f = failure.NewTerminal(ge.Verdict.Code, orDefault(ge.Verdict.Message, fmt.Sprintf("domain write %d failed its condition", ge.Index)))
		default:
			f = failure.Wrap(failure.Retryable, failure.CodeConcurrentModification, err)
		}
	} else {
		f = failure.Classify(err, failure.CodeHandlerError)
	}
	if f.Infrastructure() {
		disp, _ := w.giveBack(ctx, lease, f, unleasedStep(d.m))
		return disp
	}
	return w.failLease(ctx, d, lease, attempts, f)
}

// giveBack ends a held lease whose attempt ended for infrastructure
// reasons: the record is released and the attempt refunded (inbox.Release),
// and the message comes back after a backoff of step (0: the caller goes on
// with the delivery when done is true). If the release cannot be written
// now, it is carried with the message and written before the work runs
// again; a lease already lost needs nothing.
func (w *Worker) giveBack(ctx context.Context, lease inbox.Lease, f *failure.Error, step int) (disp disposition, done bool) {
	err := w.committer.Release(ctx, lease, f)
	var lost *inbox.LeaseLostError
	switch {
	case err == nil:
	case errors.As(err, &lost):
		if step > 0 {
			return w.lostLease(lost, lease.Attempts), true
		}
	default:
		w.log.Warn("could not release the lease; the release goes with the message", "idempotencyKey", lease.Key,
			"code", f.Code, "error", truncateRunes(err.Error(), maxLoggedMessage))
		disp = keepFor(OutcomeRetry, w.cfg.Backoff.delay(max(1, step)), f)
		// Until the refund is written the attempt still counts; keep the
		// message hidden until the lease ends, so the refund (retried in the
		// background, or carried by a parked message) lands first.
		disp.hide = max(disp.hide, w.policy.Remaining(lease.ExpiresAt, w.cfg.Now())+time.Second)
		disp.infra, disp.release, disp.attempt = true, &pendingRelease{lease: lease, failure: f}, lease.Attempts
		return disp, false
	}
	if step == 0 {
		return disposition{}, true
	}
	hide := w.cfg.Backoff.delay(step)
	if f.Code == failure.CodeShutdown {
		hide = 0 // another worker takes it at once
	}
	disp = keepFor(OutcomeRetry, hide, f)
	disp.infra, disp.attempt = true, lease.Attempts-1
	return disp, true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// failLease records f on the record (made terminal when the attempts
// policy ends retries) and keeps or ends the message.
func (w *Worker) failLease(ctx context.Context, d *delivery, lease inbox.Lease, attempts failure.Policy, f *failure.Error) disposition {
	f = attempts.After(f, lease.Attempts, w.cfg.Now())
	err := w.committer.Fail(ctx, lease, f)
	var lost *inbox.LeaseLostError
	status := inbox.StatusFailedRetryable
	if f.IsTerminal() {
		status = inbox.StatusFailedTerminal
	}
	// Ours: an earlier try of the same fenced update applied and its
	// response was lost (the SDK retried); the failure is recorded.
	if errors.As(err, &lost) && !lost.Ours(status, f.Code) {
		return w.lostLease(lost, lease.Attempts)
	}
	if err != nil && lost == nil {
		// The failure could not be recorded; the lease will expire and the
		// redelivery takes over (counting this attempt, a business one).
		w.log.Warn("could not record failure", "idempotencyKey", lease.Key, "code", f.Code, "error", truncateRunes(err.Error(), maxLoggedMessage))
		disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(lease.Attempts), f)
		disp.attempt = lease.Attempts
		disp.infra = failure.Classify(err, "").Infrastructure() // park it while the database is down
		return disp
	}
	if f.IsTerminal() {
		disp := terminalWith(f)
		disp.attempt = lease.Attempts
		return disp
	}
	disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(lease.Attempts), f)
	disp.attempt = lease.Attempts
	return disp
}

// lostLease: the record is not ours any more. COMPLETED means the work is
// done (by our own ambiguous commit, or by the worker that took over): the
// message is a duplicate. Otherwise another worker holds it: keep the
// message hidden while that lease runs.
func (w *Worker) lostLease(lost *inbox.LeaseLostError, attempt int) disposition {
	if lost.Completed() {
		outcome := OutcomeDuplicate
		if lost.Record.LeaseToken == lost.Lease.Token {
			outcome = appliedOutcome(lost.Record.Outcome) // our own commit applied; its response was lost
		}
		disp := ackWith(outcome)
		disp.attempt = attempt
		return disp
	}
	wait := w.policy.Lease
	if lost.Record != nil && lost.Record.Status == inbox.StatusProcessing {
		wait = max(time.Second, w.policy.Remaining(lost.Record.LeaseExpiry, w.cfg.Now()))
	}
	disp := keepFor(OutcomeLeaseLost, wait, nil)
	disp.attempt = attempt
	return disp
}

func (w *Worker) callHandler(ctx context.Context, h ddbworker.Handler, msg *ddbworker.Message) (res ddbworker.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("handler panicked", "messageType", msg.Envelope.MessageType, "idempotencyKey", msg.Envelope.IdempotencyKey,
				"panic", truncateRunes(fmt.Sprint(r), maxLoggedMessage), "stack", string(debug.Stack()))
			err = failure.NewRetryable(failure.CodeHandlerPanic, fmt.Sprintf("handler panicked: %v", r))
		}
	}()
	return h.Handle(ctx, msg)
}

// deliverFused runs the handler first and commits its writes with a
// COMPLETED inbox record in one transaction. An existing record goes
// through the gate's decision table; any failure falls back to the gated
// path, which records it under a lease.
func (w *Worker) deliverFused(ctx context.Context, d *delivery) disposition {
	rec := inbox.NewRecord(&d.req.Work, w.cfg.Now())
	rec.LeaseToken, rec.LeaseOwner = gate.NewToken(), w.gate.Owner()
	for run := 0; ; run++ {
		msg := &ddbworker.Message{Envelope: d.env, SQSMessageID: aws.ToString(d.m.MessageId), ReceiveCount: receiveCount(d.m), Attempt: 1, Run: run}
		res, err := w.callHandler(ctx, d.rt.Handler, msg)
		if err == nil {
			var disp disposition
			if disp, err = w.commit(res, 1, func(writes []mutation.Write, done mutation.Completion) error {
				return w.committer.CommitFused(ctx, rec, writes, done, run)
			}); err == nil {
				return disp
			}
			var exists *mutation.ExistsError
			if errors.As(err, &exists) {
				dec, rerr := w.gate.Resolve(ctx, d.req, exists.Record)
				if rerr != nil {
					return w.unleased(ctx, d, rerr)
				}
				return w.decided(ctx, d, dec)
			}
			var ge *mutation.GuardError
			if errors.As(err, &ge) && ge.Verdict.Kind == mutation.Retry && run < w.cfg.MaxGuardRetries {
				continue
			}
		}
		err = w.overran(ctx, err)
		// Infrastructure trouble before anything was written: nothing to
		// record, no attempt to count.
		if f := failure.Classify(err, failure.CodeHandlerError); f.Infrastructure() {
			disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(unleasedStep(d.m)), f)
			if f.Code == failure.CodeShutdown {
				disp.hide = 0
			}
			disp.infra = true
			return disp
		}
		// Record what happened under a lease, as the gated path would.
		settleCtx, cancel := detached(ctx)
		defer cancel()
		dec, aerr := w.gate.Acquire(settleCtx, d.req)
		if aerr != nil {
			return w.unleased(settleCtx, d, aerr)
		}
		if dec.Action != gate.Acquired {
			return w.decided(settleCtx, d, dec)
		}
		return w.settle(settleCtx, d, dec.Lease, dec.Attempts, err)
	}
}

// startHeartbeat renews the lease and the message's visibility every half
// lease while the handler runs; a lost lease aborts the handler. A renewal
// never runs while the commit is in flight (lock): the commit's condition
// checks the token, not the expiry, so skipping a renewal then is safe.
// Every call is bounded by ctx, which the handler's end and shutdown
// cancel. The returned stop may be called more than once.
func (w *Worker) startHeartbeat(ctx context.Context, m types.Message, lease inbox.Lease, lock *leaseLock, abort context.CancelCauseFunc) func() {
	hbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(w.policy.RenewAfter())
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
			}
			visCtx, cancel := context.WithTimeout(hbCtx, sqsCallTimeout)
			w.changeVisibilityWithin(visCtx, m, w.cfg.VisibilityTimeout)
			cancel()
			if !lock.TryLock() {
				// The commit holds the item; its outcome decides the lease.
				t.Reset(w.policy.Lease / 8)
				continue
			}
			renewed, err := w.renewer.Renew(hbCtx, lease)
			lock.Unlock()
			var lost *inbox.LeaseLostError
			switch {
			case errors.As(err, &lost):
				abort(lost)
				return
			case err != nil:
				if hbCtx.Err() != nil {
					return
				}
				w.log.Warn("lease renewal failed; retrying", "idempotencyKey", lease.Key, "error", truncateRunes(err.Error(), maxLoggedMessage))
				t.Reset(w.policy.Lease / 8)
				continue
			}
			lease = renewed
			w.metrics.Extensions.Inc()
			t.Reset(w.policy.RenewAfter())
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { stop(); <-done }) }
}

// maxLoggedMessage caps failure and error texts in log lines and DLQ
// attributes: a failure that echoes a large payload must not become a
// large log line.
const maxLoggedMessage = 1024

// finish applies a disposition: delete, terminal policy, visibility or
// parking; then metrics, the log line and the event.
func (w *Worker) finish(ctx context.Context, d *delivery, disp disposition, del acker, start time.Time) (settled, *parkedMsg) {
	result := settledKept
	var parked *parkedMsg
	var policy TerminalPolicy
	switch {
	case disp.outcome == OutcomeParked:
		hide := w.cappedHide(w.health.cfg.ParkVisibility, d.receivedAt)
		w.changeVisibility(ctx, d.m, hide)
		parked = &parkedMsg{m: d.m, receivedAt: d.receivedAt, hidden: w.cfg.Now().Add(hide), release: disp.release}
		disp.hide, disp.keep = hide, true
		result = settledParked
	case disp.ack:
		del.ack(d.m)
		result = settledFinal
	case disp.resend:
		if err := w.resend(ctx, d, disp.sendDelay); err != nil {
			w.log.Warn("could not re-send a deferred message; it comes back after a backoff", "sqsMessageId", aws.ToString(d.m.MessageId), "error", err.Error())
			disp.keep, disp.hide = true, w.cfg.Backoff.delay(unleasedStep(d.m))
			w.changeVisibility(ctx, d.m, disp.hide)
			break
		}
		del.ack(d.m)
		disp.hide = disp.sendDelay
	case disp.outcome == OutcomeTerminal:
		policy = w.cfg.TerminalPolicy
		switch policy {
		case PolicyDLQ:
			if err := w.sendToDLQ(ctx, d, disp.failure); err != nil {
				hide := w.cfg.Backoff.delay(unleasedStep(d.m))
				if errors.Is(err, errTooLargeForDLQ) {
					// Its body cannot travel with the failure attributes:
					// the redrive policy moves it to the DLQ as it is.
					hide = w.cfg.Backoff.Max
					policy = PolicyRedrive
				}
				// Not in the DLQ yet: keep it; the next delivery finds the
				// record FAILED_TERMINAL and tries the DLQ again.
				w.log.Error("DLQ send failed; message kept", "sqsMessageId", aws.ToString(d.m.MessageId), "error", truncateRunes(err.Error(), maxLoggedMessage))
				w.changeVisibility(ctx, d.m, hide)
				disp.keep, disp.hide = true, hide
				break
			}
			w.metrics.DLQSent.Inc()
			del.ack(d.m)
			result = settledFinal
		case PolicyQuarantine:
			del.ack(d.m)
			result = settledFinal
		case PolicyRedrive:
			// Left alone: SQS moves it to the DLQ after maxReceiveCount.
		}
	case disp.keep:
		w.changeVisibility(ctx, d.m, disp.hide)
		if disp.release != nil {
			w.releases.add(*disp.release)
		}
	}
	final := result == settledFinal

	ev := Event{SQSMessageID: aws.ToString(d.m.MessageId), Outcome: disp.outcome, Final: final, Attempt: disp.attempt,
		Policy: policy, Duration: w.cfg.Now().Sub(start), Infrastructure: disp.infra}
	if disp.keep || disp.resend {
		ev.Visibility = time.Duration(visibilitySeconds(disp.hide)) * time.Second
	}
	if d.env != nil {
		ev.IdempotencyKey, ev.MessageType = d.env.IdempotencyKey, d.env.MessageType
	}
	attrs := []slog.Attr{
		slog.String("sqsMessageId", ev.SQSMessageID), slog.String("outcome", ev.Outcome),
		slog.Int("receiveCount", receiveCount(d.m)), slog.Int64("durationMs", ev.Duration.Milliseconds()),
	}
	if d.env != nil {
		attrs = append(attrs, slog.String("messageId", d.env.MessageID), slog.String("idempotencyKey", d.env.IdempotencyKey),
			slog.String("messageType", d.env.MessageType), slog.String("aggregateType", d.env.AggregateType),
			slog.String("aggregateId", d.env.AggregateID), slog.String("correlationId", d.env.CorrelationID),
			slog.String("causationId", d.env.CausationID), slog.Int("attempt", disp.attempt))
	}
	typeLabel := w.labels.messageType(ev.MessageType)
	level := slog.LevelInfo
	if f := disp.failure; f != nil {
		ev.Code, ev.Kind = f.Code, f.Kind.String()
		attrs = append(attrs, slog.String("failureKind", ev.Kind), slog.String("failureCode", f.Code),
			slog.String("failureMessage", truncateRunes(f.Message, maxLoggedMessage)), slog.Bool("infrastructure", disp.infra))
		w.metrics.Failures.WithLabelValues(typeLabel, ev.Kind, w.labels.code(f.Code)).Inc()
		switch f.Code {
		case failure.CodeThrottled:
			w.metrics.Throttles.Inc()
		case failure.CodeTransactionConflict:
			w.metrics.Conflicts.Inc()
		}
		level = slog.LevelWarn
		if f.IsTerminal() {
			level = slog.LevelError
			attrs = append(attrs, slog.String("terminalPolicy", string(policy)))
		}
	}
	if ev.Visibility > 0 {
		attrs = append(attrs, slog.Int64("visibilityS", int64(ev.Visibility/time.Second)))
	}
	w.log.LogAttrs(ctx, level, "message", attrs...)
	w.metrics.Outcomes.WithLabelValues(typeLabel, outcomeLabel(ev.Outcome)).Inc()
	w.metrics.Processing.WithLabelValues(typeLabel).Observe(ev.Duration.Seconds())
	w.emit(ev)
	return result, parked
}
