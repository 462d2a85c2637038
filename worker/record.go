package worker

import (
	"context"
	"errors"
	"time"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

// record tells the inbox what a verdict means for the work — the only
// place that writes a failure (or a supersede, a release, an end, a
// rejection) to the inbox — and returns the outcome for the message.
//
// A business failure is counted as an attempt in the same fenced write
// that records it (mutation.Committer.Fail), and nowhere else: a verdict
// of infrastructure trouble writes no failure, only gives its lease back
// (best effort, while the database is healthy), and whatever cannot be
// written leaves a lease to expire — never a charge to undo later.
//
// found is set, and the outcome empty, when a run that claimed by its
// commit turns out to have a record already (its commit, or the write
// that would have created its failed or superseded record, found it):
// nothing was written or charged, and process decides the delivery again
// from that record.
//
// held is the lease the delivery holds (process); the outcome says what it
// holds once recorded (outcome.held): a delivery parked by a write the
// database could not take holds the lease that write was for, one let go
// unstarted holds nothing once its lease is given back, and any other
// keeps held.
func (w *Worker) record(ctx context.Context, d *delivery, held *inbox.Lease, v verdict) (outcome, *inbox.Record) {
	if v, ok := v.(notStarted); ok {
		if v.park {
			return parked(nil, held), nil
		}
		o := released()
		if !w.giveBack(ctx, held) {
			o.held = held
		}
		return o, nil
	}
	o, found := w.recordVerdict(ctx, d, v)
	if _, parks := o.act.(park); !parks {
		o.held = held
	}
	return o, found
}

// recordVerdict is record's writing of every verdict but notStarted; a
// parked outcome holds the lease the write was for.
func (w *Worker) recordVerdict(ctx context.Context, d *delivery, v verdict) (o outcome, found *inbox.Record) {
	switch v := v.(type) {
	case recordExists:
		return outcome{}, v.record
	case completed:
		return done(v.outcome, v.attempt), nil
	case waiting:
		return later(v.outcome, v.hide, nil, v.attempt), nil
	case deferred:
		if v.resend {
			return resent(v.by), nil
		}
		return later(OutcomeDeferred, v.by, nil, 0), nil
	case terminalAgain:
		return terminal(v.failure, v.attempt), nil
	case troubled:
		return w.recordTrouble(ctx, d, v), nil
	case failed:
		return w.recordFailure(ctx, d, v)
	case superseded:
		return w.recordSupersede(ctx, d, v)
	case exhausted:
		return w.recordEnd(ctx, d, v), nil
	case rejected:
		return w.recordRejection(ctx, d, v), nil
	}
	return w.unrecorded(ctx, d, errors.New("worker: unknown verdict"), nil), nil
}

// recordEnd ends the work FAILED_TERMINAL as the gate read it (attempts,
// retry window or takeovers used up).
func (w *Worker) recordEnd(ctx context.Context, d *delivery, v exhausted) outcome {
	err := w.committer.End(ctx, v.record, v.failure, w.policy.StaleBefore(w.cfg.Now()))
	var changed *mutation.ChangedError
	switch {
	case err == nil:
		return terminal(v.failure, v.record.Attempts)
	case errors.As(err, &changed):
		// Another delivery moved the record on meanwhile: the next
		// delivery decides from what is there now.
		return later(OutcomeLeaseLost, time.Second, nil, v.record.Attempts)
	}
	return w.unrecorded(ctx, d, err, nil)
}

// recordRejection writes the rejection record of a message that cannot be
// filed under its key (or whose key holds other work); the terminal policy
// then accounts for the message.
func (w *Worker) recordRejection(ctx context.Context, d *delivery, v rejected) outcome {
	r := v.rejection
	r.SQSMessageID = d.id
	f := failure.NewTerminal(r.Code, r.Message)
	if err := w.committer.Reject(ctx, &r); err != nil {
		if cf := failure.Classify(err, failure.CodeServiceUnavailable); !cf.IsTerminal() {
			// It must not leave the queue unaccounted for.
			return w.unrecorded(ctx, d, err, nil)
		}
		// DynamoDB refuses the record for good (it can never be
		// written): the terminal policy still accounts for the
		// message.
		w.stageFailed(ctx, err)
		w.log.ErrorContext(ctx, "rejection record refused by DynamoDB; the terminal policy still applies", "sqsMessageId", d.id,
			"code", r.Code, "error", truncateRunes(err.Error(), maxLoggedMessage))
	}
	return terminal(f, 0)
}

// recordTrouble: no business outcome, no attempt. The lease, if one is
// held (or may be: a claim without an answer), is given back so that the
// next delivery takes over at once and counts no crash — unless the
// database is unhealthy: then nothing is written (the lease expires by
// itself) and the message is parked.
func (w *Worker) recordTrouble(ctx context.Context, d *delivery, v troubled) outcome {
	if !w.health.Healthy() {
		return parked(v.failure, v.lease)
	}
	wait := w.cfg.Backoff.delay(v.step)
	if v.wait > 0 {
		wait = v.wait // its hot key's backoff
	}
	if v.failure.Code == failure.CodeShutdown {
		wait = 0 // another worker takes it at once
	}
	if v.lease != nil {
		err := w.committer.Release(asCleanup(ctx), *v.lease, v.failure)
		var lost *inbox.LeaseLostError
		if err != nil && !errors.As(err, &lost) {
			// Not given back: the lease ends by itself; the next delivery
			// would only find it in flight until then.
			w.stageFailed(ctx, err)
			wait = max(wait, w.policy.Remaining(v.lease.ExpiresAt, w.cfg.Now())+time.Second)
		}
	}
	return laterInfra(wait, v.failure, 0)
}

// giveBack gives back held, the lease a parked delivery holds
// (delivery.held), when the daemon lets it go unstarted (shutdown) while
// the database is healthy, so that the next delivery takes the work over
// at once and counts no takeover; best effort — a lease not given back
// expires, and costs one takeover. It reports whether the delivery let
// go of the lease (false: it holds it still — none, or the database is
// unhealthy).
func (w *Worker) giveBack(ctx context.Context, held *inbox.Lease) bool {
	if held == nil || !w.health.Healthy() {
		return false
	}
	if err := w.committer.Release(asCleanup(ctx), *held, failure.NewRetryable(failure.CodeShutdown, "let go unstarted at shutdown")); err != nil {
		w.stageFailed(ctx, err)
	}
	return true
}

// recordFailure counts the business attempt and records its failure, made
// terminal when the attempts policy ends retries, as the run's commit
// mode does (commitMode.recordFailure). A run that claimed by its commit
// has no record: its failure creates one, unless one is there (found).
func (w *Worker) recordFailure(ctx context.Context, d *delivery, v failed) (outcome, *inbox.Record) {
	f := judge.Attempt(v.failure, v.attempts, v.attempt, w.cfg.Now())
	err := v.mode.recordFailure(ctx, f)
	var lost *inbox.LeaseLostError
	var exists *mutation.ExistsError
	switch {
	case errors.As(err, &lost):
		return w.outcomeOf(w.leaseLost(lost, v.attempt)), nil
	case errors.As(err, &exists):
		return outcome{}, exists.Record
	case err != nil:
		return w.unrecorded(ctx, d, err, v.lease), nil
	case f.IsTerminal():
		return terminal(f, v.attempt), nil
	}
	return later(OutcomeRetry, w.cfg.Backoff.delay(v.attempt), f, v.attempt), nil
}

// recordSupersede completes the work as superseded, with no domain write
// (commitMode.supersede); as recordFailure, a run that claimed by its
// commit creates the record, unless one is there (found).
func (w *Worker) recordSupersede(ctx context.Context, d *delivery, v superseded) (outcome, *inbox.Record) {
	o := orDefault(v.outcome, inbox.OutcomeSuperseded)
	err := v.mode.supersede(ctx, o)
	var lost *inbox.LeaseLostError
	var exists *mutation.ExistsError
	switch {
	case err == nil && v.duplicate:
		return done(OutcomeDuplicate, v.attempt), nil
	case err == nil:
		return done(appliedOutcome(o), v.attempt), nil
	case errors.As(err, &lost) && v.duplicate && lost.Completed() && lost.Record.LeaseToken == lost.Lease.Token:
		// Our own completion of a duplicate, its response lost: the work
		// applied before, not now (leaseLost would say applied).
		return done(OutcomeDuplicate, v.attempt), nil
	case errors.As(err, &lost):
		return w.outcomeOf(w.leaseLost(lost, v.attempt)), nil
	case errors.As(err, &exists):
		return outcome{}, exists.Record
	}
	return w.unrecorded(ctx, d, err, v.lease), nil
}

// unrecorded: what the inbox had to be told could not be written (the
// database is in trouble). Nothing was recorded, so nothing was charged:
// the message comes back after a backoff — parked while the database is
// unhealthy — and, when a lease is held, not before it ends, so that the
// next delivery takes the work over instead of finding it in flight. No
// attempt is reported: none was counted.
func (w *Worker) unrecorded(ctx context.Context, d *delivery, err error, lease *inbox.Lease) outcome {
	w.stageFailed(ctx, err)
	f := failure.Classify(err, failure.CodeServiceUnavailable)
	w.log.WarnContext(ctx, "could not record the outcome in the inbox; the message comes back", "sqsMessageId", d.id, "code", f.Code,
		"error", truncateRunes(err.Error(), maxLoggedMessage))
	if !w.health.Healthy() {
		return parked(f, lease)
	}
	wait := w.cfg.Backoff.delay(infraStep(d))
	if lease != nil {
		wait = max(wait, w.policy.Remaining(lease.ExpiresAt, w.cfg.Now())+time.Second)
	}
	return laterInfra(wait, f, 0)
}

// outcomeOf is the outcome of a verdict that needs no write.
func (w *Worker) outcomeOf(v verdict) outcome {
	switch v := v.(type) {
	case completed:
		return done(v.outcome, v.attempt)
	case waiting:
		return later(v.outcome, v.hide, nil, v.attempt)
	}
	return released()
}
