package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/dlq"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
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
}

func ackWith(outcome string) disposition { return disposition{outcome: outcome, ack: true} }

func keepFor(outcome string, d time.Duration, f *failure.Error) disposition {
	return disposition{outcome: outcome, keep: true, hide: d, failure: f}
}

func terminalWith(f *failure.Error) disposition {
	return disposition{outcome: OutcomeTerminal, failure: f}
}

// delivery is one message on its way through the protocol.
type delivery struct {
	m   types.Message
	env *envelope.Envelope
	req *gate.Request
	rt  route
}

// process runs the protocol for one message and applies its disposition.
// It reports whether the message left the queue (for FIFO group order).
func (w *Worker) process(ctx context.Context, m types.Message, del *deleter) bool {
	start := w.cfg.Now()
	w.metrics.InFlight.Inc()
	defer w.metrics.InFlight.Dec()
	if t := sentAt(m); !t.IsZero() {
		w.metrics.MessageAge.Observe(start.Sub(t).Seconds())
	}
	msgCtx, cancel := context.WithTimeout(ctx, w.cfg.MessageTimeout)
	d := &delivery{m: m}
	disp := w.deliver(msgCtx, d)
	cancel()
	return w.finish(ctx, d, disp, del, start)
}

func (w *Worker) deliver(ctx context.Context, d *delivery) disposition {
	env, err := w.decoder.Decode([]byte(aws.ToString(d.m.Body)))
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
		return w.reject(ctx, d, &gate.Rejection{Code: failure.CodeUnknownMessageType,
			Message: fmt.Sprintf("no handler for message type %q", env.MessageType),
			Key:     env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
			AggregateType: env.AggregateType, AggregateID: env.AggregateID, CorrelationID: env.CorrelationID})
	}
	d.rt = rt
	now := w.cfg.Now()
	if ap := env.AttemptPolicy; ap != nil && ap.NotBefore != nil && now.Before(*ap.NotBefore) {
		return keepFor(OutcomeDeferred, min(ap.NotBefore.Sub(now), maxVisibility), nil)
	}
	d.req = &gate.Request{Work: inbox.Work{
		Key: env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
		SchemaVersion: env.SchemaVersion, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Producer: env.Producer,
	}}
	if ap := env.AttemptPolicy; ap != nil {
		d.req.Attempts = failure.Policy{MaxAttempts: ap.MaxBusinessAttempts, TerminalAfterCodes: ap.TerminalAfterCodes}
		if ap.RetryableUntil != nil {
			d.req.Attempts.RetryableUntil = *ap.RetryableUntil
		}
	}
	if rt.fused {
		return w.deliverFused(ctx, d)
	}
	dec, err := w.gate.Acquire(ctx, d.req)
	if err != nil {
		return w.unleased(d, err)
	}
	return w.decided(ctx, d, dec)
}

// unleased: an error before any lease was held (the gate's call failed):
// no attempt is counted; the message comes back after a backoff.
func (w *Worker) unleased(d *delivery, err error) disposition {
	f := failure.Classify(err, failure.CodeServiceUnavailable)
	if f.IsTerminal() { // a request the database refuses will not heal by waiting, but needs a record
		f = failure.Wrap(failure.Retryable, f.Code, err)
	}
	return keepFor(OutcomeRetry, w.cfg.Backoff.delay(unleasedStep(d.m)), f)
}

// unleasedStep is the backoff step of a delivery that failed before it held
// a lease (no business attempt is counted): its receive count, capped low —
// innocent redeliveries (in-flight duplicates, a storm after an outage)
// raise the count, and one throttle must not then hide a message for
// minutes. Database-wide trouble is the poller's to handle.
func unleasedStep(m types.Message) int { return min(max(1, receiveCount(m)), 4) }

// reject records a message that cannot be filed under its key, then ends it
// with the terminal policy. If the record cannot be written, the message
// stays (retry): it must not leave the queue unaccounted for.
func (w *Worker) reject(ctx context.Context, d *delivery, r *gate.Rejection) disposition {
	r.SQSMessageID = aws.ToString(d.m.MessageId)
	if err := w.gate.Reject(ctx, r); err != nil {
		return w.unleased(d, err)
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
			return w.reject(ctx, d, &gate.Rejection{Code: dec.Code, Message: dec.Message, Key: d.req.Key,
				MessageType: d.req.MessageType, RequestHash: d.req.RequestHash,
				AggregateType: d.req.AggregateType, AggregateID: d.req.AggregateID, CorrelationID: d.req.CorrelationID})
		}
		disp := terminalWith(f)
		if dec.Record != nil {
			disp.attempt = dec.Record.Attempts
		}
		return disp
	case gate.Acquired:
		w.fail(FailpointAfterGate)
		return w.runLease(ctx, d, dec.Lease, dec.Attempts)
	}
	return keepFor(OutcomeRetry, w.cfg.Backoff.delay(1), failure.NewRetryable(failure.CodeServiceUnavailable, "gate: unknown action "+dec.Action.String()))
}

// runLease runs the handler and commits under lease, renewing it while the
// handler runs long, re-running the handler after Retry guards.
func (w *Worker) runLease(ctx context.Context, d *delivery, lease inbox.Lease, attempts failure.Policy) disposition {
	handlerCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	stopBeat := w.startHeartbeat(handlerCtx, d.m, lease, abort)
	defer stopBeat()
	for run := 0; ; run++ {
		msg := &Message{Envelope: d.env, SQSMessageID: aws.ToString(d.m.MessageId), ReceiveCount: receiveCount(d.m), Attempt: lease.Attempts, Run: run}
		res, err := w.callHandler(handlerCtx, d.rt.handler, msg)
		if lost := leaseLostCause(handlerCtx); lost != nil {
			return w.lostLease(lost, lease.Attempts)
		}
		if err == nil {
			var disp disposition
			if disp, err = w.commit(res, lease.Attempts, func(done mutation.Completion) error {
				return w.committer.Commit(ctx, lease, res.Writes, done, run)
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

// overran names a failure caused by the per-message deadline: the handler
// or its commit ran past MessageTimeout.
func (w *Worker) overran(ctx context.Context, err error) error {
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
func (w *Worker) commit(res Result, attempt int, do func(mutation.Completion) error) (disposition, error) {
	start := w.cfg.Now()
	err := do(mutation.Completion{Outcome: res.Outcome, ResultRef: res.ResultRef})
	w.metrics.Commit.Observe(w.cfg.Now().Sub(start).Seconds())
	if err != nil {
		return disposition{}, err
	}
	w.fail(FailpointAfterCommit)
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
	return w.failLease(ctx, d, lease, attempts, f)
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
		// redelivery takes over (counting this attempt).
		w.log.Warn("could not record failure", "idempotencyKey", lease.Key, "code", f.Code, "error", err.Error())
		disp := keepFor(OutcomeRetry, w.cfg.Backoff.delay(lease.Attempts), f)
		disp.attempt = lease.Attempts
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

func (w *Worker) callHandler(ctx context.Context, h Handler, msg *Message) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("handler panicked", "messageType", msg.Envelope.MessageType, "idempotencyKey", msg.Envelope.IdempotencyKey,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
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
		msg := &Message{Envelope: d.env, SQSMessageID: aws.ToString(d.m.MessageId), ReceiveCount: receiveCount(d.m), Attempt: 1, Run: run}
		res, err := w.callHandler(ctx, d.rt.handler, msg)
		if err == nil {
			var disp disposition
			if disp, err = w.commit(res, 1, func(done mutation.Completion) error {
				return w.committer.CommitFused(ctx, rec, res.Writes, done, run)
			}); err == nil {
				return disp
			}
			var exists *mutation.ExistsError
			if errors.As(err, &exists) {
				dec, rerr := w.gate.Resolve(ctx, d.req, exists.Record)
				if rerr != nil {
					return w.unleased(d, rerr)
				}
				return w.decided(ctx, d, dec)
			}
			var ge *mutation.GuardError
			if errors.As(err, &ge) && ge.Verdict.Kind == mutation.Retry && run < w.cfg.MaxGuardRetries {
				continue
			}
		}
		// Record what happened under a lease, as the gated path would.
		err = w.overran(ctx, err)
		settleCtx, cancel := detached(ctx)
		defer cancel()
		dec, aerr := w.gate.Acquire(settleCtx, d.req)
		if aerr != nil {
			return w.unleased(d, aerr)
		}
		if dec.Action != gate.Acquired {
			return w.decided(settleCtx, d, dec)
		}
		return w.settle(settleCtx, d, dec.Lease, dec.Attempts, err)
	}
}

// startHeartbeat renews the lease and the message's visibility every half
// lease while the handler runs; a lost lease aborts the handler.
func (w *Worker) startHeartbeat(ctx context.Context, m types.Message, lease inbox.Lease, abort context.CancelCauseFunc) func() {
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
			w.changeVisibility(hbCtx, m, w.cfg.VisibilityTimeout)
			renewed, err := w.renewer.Renew(hbCtx, lease)
			var lost *inbox.LeaseLostError
			switch {
			case errors.As(err, &lost):
				abort(lost)
				return
			case err != nil:
				if hbCtx.Err() != nil {
					return
				}
				w.log.Warn("lease renewal failed; retrying", "idempotencyKey", lease.Key, "error", err.Error())
				t.Reset(w.policy.Lease / 8)
				continue
			}
			lease = renewed
			w.metrics.Extensions.Inc()
			t.Reset(w.policy.RenewAfter())
		}
	}()
	return func() { stop(); <-done }
}

// finish applies a disposition: delete, terminal policy, or visibility;
// then metrics, the log line and the event. It reports whether the message
// left the queue.
func (w *Worker) finish(ctx context.Context, d *delivery, disp disposition, del *deleter, start time.Time) bool {
	final := false
	var policy TerminalPolicy
	switch {
	case disp.ack:
		del.add(deletion{receipt: aws.ToString(d.m.ReceiptHandle), id: aws.ToString(d.m.MessageId)})
		final = true
	case disp.outcome == OutcomeTerminal:
		policy = w.cfg.TerminalPolicy
		switch policy {
		case PolicyDLQ:
			if err := w.sendToDLQ(ctx, d, disp.failure); err != nil {
				// Not in the DLQ yet: keep it; the next delivery finds the
				// record FAILED_TERMINAL and tries the DLQ again.
				w.log.Error("DLQ send failed; message kept", "sqsMessageId", aws.ToString(d.m.MessageId), "error", err.Error())
				w.changeVisibility(ctx, d.m, w.cfg.Backoff.delay(unleasedStep(d.m)))
				break
			}
			w.metrics.DLQSent.Inc()
			del.add(deletion{receipt: aws.ToString(d.m.ReceiptHandle), id: aws.ToString(d.m.MessageId)})
			final = true
		case PolicyQuarantine:
			del.add(deletion{receipt: aws.ToString(d.m.ReceiptHandle), id: aws.ToString(d.m.MessageId)})
			final = true
		case PolicyRedrive:
			// Left alone: SQS moves it to the DLQ after maxReceiveCount.
		}
	case disp.keep:
		w.changeVisibility(ctx, d.m, disp.hide)
	}

	ev := Event{SQSMessageID: aws.ToString(d.m.MessageId), Outcome: disp.outcome, Final: final, Attempt: disp.attempt,
		Policy: policy, Duration: w.cfg.Now().Sub(start)}
	if disp.keep {
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
	level := slog.LevelInfo
	if f := disp.failure; f != nil {
		ev.Code, ev.Kind = f.Code, f.Kind.String()
		attrs = append(attrs, slog.String("failureKind", ev.Kind), slog.String("failureCode", f.Code), slog.String("failureMessage", f.Message))
		w.metrics.Failures.WithLabelValues(ev.MessageType, ev.Kind, f.Code).Inc()
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
	w.metrics.Outcomes.WithLabelValues(ev.MessageType, ev.Outcome).Inc()
	w.metrics.Processing.WithLabelValues(ev.MessageType).Observe(ev.Duration.Seconds())
	w.emit(ev)
	return final
}

func (w *Worker) sendToDLQ(ctx context.Context, d *delivery, f *failure.Error) error {
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	attrs := map[string]types.MessageAttributeValue{
		dlq.AttrFailureCode:     str(f.Code),
		dlq.AttrFailureMessage:  str(orDefault(truncateRunes(f.Message, 1024), "-")),
		dlq.AttrFailedAt:        str(inbox.FormatTime(w.cfg.Now())),
		dlq.AttrSourceMessageID: str(aws.ToString(d.m.MessageId)),
	}
	if d.env != nil {
		attrs[dlq.AttrIdempotencyKey] = str(d.env.IdempotencyKey)
		attrs[dlq.AttrMessageType] = str(d.env.MessageType)
	}
	// Keep the producer's own attributes, within SQS's limit of 10.
	names := make([]string, 0, len(d.m.MessageAttributes))
	for k := range d.m.MessageAttributes {
		if !strings.HasPrefix(k, dlq.AttrPrefix) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		if len(attrs) >= 10 {
			break
		}
		attrs[k] = d.m.MessageAttributes[k]
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.DLQURL), MessageBody: d.m.Body, MessageAttributes: attrs}
	if strings.HasSuffix(w.cfg.DLQURL, ".fifo") {
		group := d.m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		in.MessageGroupId = aws.String(orDefault(group, "ddbworker-dlq"))
		in.MessageDeduplicationId = d.m.MessageId
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		return fmt.Errorf("worker: send %s to DLQ: %w", aws.ToString(d.m.MessageId), err)
	}
	return nil
}

func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) > n/4 {
		r = r[:n/4]
	}
	return string(r) + "…"
}
