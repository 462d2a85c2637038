package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/calltime"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/judge"
	ddbwrites "github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// run runs the handler and commits its writes in the commit mode m the
// claim bound (gated: under the lease, renewed by a heartbeat while the
// handler runs long — none under Lambda, whose lease is the invocation —
// with a payload by reference fetched first; fused: the commit creates
// the work's record COMPLETED; single-write: one fenced write), re-running
// the handler after a Rerun guard, and says what it came to.
func (w *Worker) run(ctx context.Context, d *delivery, wk *work, m commitMode, r *report) verdict {
	handlerCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	stop, err := m.begin(handlerCtx, d, wk, abort)
	defer stop()
	if err != nil {
		return w.judge(d, wk, m, err, w.judgement(ctx, payloadFailure(err), "", 0))
	}
	for run := 0; ; run++ {
		msg := &ddbworker.Message{Envelope: wk.env, SQSMessageID: d.id, ReceiveCount: d.receives, Run: run}
		msg.Attempt, msg.LeaseToken = m.attempt()
		var waited calltime.Clock // the handler's waits on calls ddbworker made for it
		started := time.Now()
		res, err := w.callHandler(calltime.With(handlerCtx, &waited), wk.route.Handler, msg)
		own := time.Since(started) - waited.Total() // the handler's own time
		if lost := leaseLostCause(handlerCtx); lost != nil {
			return w.leaseLost(lost, msg.Attempt)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = databaseOverran(ctx, started, own, err)
			}
		} else {
			var took time.Duration
			took, err = w.commit(ctx, wk, m, res, run)
			r.commit += took
			if err == nil {
				w.fail(hooks.AfterCommit)
				return completed{outcome: appliedOutcome(res.Outcome), attempt: msg.Attempt}
			}
			err = databaseOverran(ctx, started, own, err)
		}
		j := w.judgement(ctx, err, res.Outcome, run)
		if j.Kind == judge.Rerun {
			w.metrics.HandlerReruns.WithLabelValues(w.labels.messageType(wk.env.MessageType)).Inc()
			continue
		}
		stop() // recording writes the record: no renewal may race it
		return w.judge(d, wk, m, err, j)
	}
}

// judgement is what a run came to (package judge, which the test kit
// shares), with a failure caused by the end of the work's context named
// for what ended it (overran).
func (w *Worker) judgement(ctx context.Context, err error, outcome string, run int) judge.Run {
	var ge *mutation.GuardError
	if err != nil && !errors.As(err, &ge) {
		err = w.overran(ctx, err)
	}
	return judge.Of(err, outcome, run, w.cfg.MaxGuardRetries)
}

// commit renders a handler's writes and commits them as the mode m does
// (commitMode.commit), and says how long its call took (0: none).
func (w *Worker) commit(ctx context.Context, wk *work, m commitMode, res ddbworker.Result, run int) (time.Duration, error) {
	writes := make([]mutation.Write, len(res.Writes))
	for i, wr := range res.Writes {
		mw, err := ddbwrites.Mutation(wr)
		if err != nil {
			return 0, fmt.Errorf("write %d: %w", i, err)
		}
		writes[i] = mw
	}
	op, call, err := m.commit(wk, writes, mutation.Completion{Outcome: res.Outcome, ResultRef: res.ResultRef}, run)
	if err != nil {
		return 0, err
	}
	ctx, span := w.commitStage(ctx, op)
	if call == nil {
		// Nothing to write, no call — and no commit time (the commit
		// latency is of calls made).
		span.end(w, nil)
		return 0, nil
	}
	start := w.cfg.Now()
	err = call(ctx)
	took := w.cfg.Now().Sub(start)
	span.end(w, err)
	return took, err
}

// judge turns the end of a run into its verdict: the lease lost (or our
// own ambiguous commit applied), the record already there (a run that
// claimed by its commit), what the mode decides itself
// (commitMode.judged), and otherwise the run's judgement: superseded,
// infrastructure trouble (no attempt), or a business failure for record to
// count.
func (w *Worker) judge(d *delivery, wk *work, m commitMode, err error, j judge.Run) verdict {
	lease := m.lease() // as the heartbeat last renewed it
	attempt, _ := m.attempt()
	var lost *inbox.LeaseLostError
	if errors.As(err, &lost) {
		return w.leaseLost(lost, attempt)
	}
	var exists *mutation.ExistsError
	if errors.As(err, &exists) {
		return recordExists{record: exists.Record}
	}
	if v := m.judged(wk, j); v != nil {
		return v
	}
	switch j.Kind {
	case judge.Duplicate:
		return superseded{outcome: j.Outcome, mode: m, lease: lease, attempt: attempt, duplicate: true}
	case judge.Superseded:
		return superseded{outcome: j.Outcome, mode: m, lease: lease, attempt: attempt}
	}
	f := j.Failure
	switch {
	case f.Code == payloadCodeAccessDenied:
		// The deployment's to fix, not the work's: retried without an
		// attempt, spaced by the receive count, until the permission is
		// fixed or the redrive policy takes the message.
		return troubled{failure: f, lease: lease, step: max(1, d.receives)}
	case f.Infrastructure():
		return troubled{failure: f, lease: lease, step: infraStep(d)}
	}
	return failed{failure: f, mode: m, lease: lease, attempt: attempt, attempts: m.attempts(wk)}
}

// leaseLost: the record is not ours any more. COMPLETED means the work is
// done (by our own ambiguous commit, or by the worker that took over): a
// duplicate. Otherwise another worker holds it: keep the message hidden
// while that lease runs.
func (w *Worker) leaseLost(lost *inbox.LeaseLostError, attempt int) verdict {
	if lost.Completed() {
		outcome := OutcomeDuplicate
		if lost.Record.LeaseToken == lost.Lease.Token {
			outcome = appliedOutcome(lost.Record.Outcome) // our own commit applied; its response was lost
		}
		return completed{outcome: outcome, attempt: attempt}
	}
	wait := w.policy.Lease
	if lost.Record != nil && lost.Record.Status == inbox.StatusProcessing && !lost.Record.Released() {
		wait = max(time.Second, w.policy.Remaining(lost.Record.LeaseExpiry, w.cfg.Now()))
	}
	return waiting{outcome: OutcomeLeaseLost, hide: wait, attempt: attempt}
}

// errShutdown is the cause of the work context's cancellation when the
// drain timeout ends in-flight work.
var errShutdown = errors.New("worker: drain timeout: work cancelled by shutdown")

// errDatabaseOverran marks a failure the work's deadline caused while the
// handler's own time — its time less its waits on the calls ddbworker made
// for it (package calltime: the effect log's reads and writes) — was
// within the first half of the time it had: the database was slow (a
// throttle retried, an outage that hangs calls, a loaded host), not the
// handler, whether the deadline met the commit or an effect's call —
// trouble with the infrastructure (TIMEOUT), which costs no business
// attempt. Charged as MESSAGE_TIMEOUT, a slow database would use up
// healthy work's attempts and dead-letter it (the explorer's seed 28, on a
// loaded machine: a Lambda invocation's deadline passed in the commit; its
// seed 8: outages that hang calls met effects.Do). A handler whose own
// time was more than half is still charged: a handler that always runs
// long cannot circulate unbounded.
var errDatabaseOverran = errors.New("worker: the database's calls ran past the work's deadline")

// databaseOverran marks err with errDatabaseOverran when the work's
// deadline ended it and the handler, started at started, spent at most
// half the time it had on its own (own).
func databaseOverran(ctx context.Context, started time.Time, own time.Duration, err error) error {
	deadline, ok := ctx.Deadline()
	var ge *mutation.GuardError
	if !ok || !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ge) {
		return err
	}
	if own > deadline.Sub(started)/2 {
		return err
	}
	return fmt.Errorf("%w: %w", errDatabaseOverran, err)
}

// overran names a failure caused by the end of the work's context: the
// per-message deadline (the handler or its commit ran past MessageTimeout:
// a business failure, unless the database was the slow part:
// errDatabaseOverran)
// or shutdown (infrastructure: not an attempt).
func (w *Worker) overran(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return failure.Wrap(failure.Retryable, failure.CodeShutdown, fmt.Errorf("shutdown cancelled the work: %w", err))
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, errDatabaseOverran) {
		return failure.Wrap(failure.Retryable, failure.CodeTimeout, err)
	}
	if f, ok := failure.As(err); ok && f.Code != failure.CodeTimeout {
		return err // the handler chose its own failure
	}
	return failure.Wrap(failure.Retryable, failure.CodeMessageTimeout,
		fmt.Errorf("handler and commit ran past their deadline (MessageTimeout %s, or the Lambda invocation's): %w", w.cfg.MessageTimeout, err))
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

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (w *Worker) callHandler(ctx context.Context, h ddbworker.Handler, msg *ddbworker.Message) (res ddbworker.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.ErrorContext(ctx, "handler panicked", "messageType", msg.Envelope.MessageType, "idempotencyKey", msg.Envelope.IdempotencyKey,
				"panic", truncateRunes(fmt.Sprint(r), maxLoggedMessage), "stack", string(debug.Stack()))
			err = failure.NewRetryable(failure.CodeHandlerPanic, fmt.Sprintf("handler panicked: %v", r))
		}
	}()
	return h.Handle(ctx, msg)
}

// heartbeat renews a held lease and its message's visibility every half
// lease while the handler runs, and aborts the handler when the lease is
// lost. It never renews while the commit is in flight (hold): on DynamoDB
// an UpdateItem on an item that a transaction is writing (or the other way
// round) fails with a transaction conflict, and the worker must not
// conflict with itself; the commit's condition checks the token, not the
// expiry, so skipping a renewal then is safe. Under Lambda (the delivery
// has a deadline) the lease is the invocation and nothing is renewed.
type heartbeat struct {
	mu      sync.Mutex // held by the commit and by each renewal
	current inbox.Lease
	stopped sync.Once
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *Worker) startHeartbeat(ctx context.Context, d *delivery, l inbox.Lease, abort context.CancelCauseFunc) *heartbeat {
	hb := &heartbeat{current: l, done: make(chan struct{})}
	if !d.deadline.IsZero() {
		close(hb.done)
		hb.cancel = func() {}
		return hb
	}
	hbCtx, cancel := context.WithCancel(ctx)
	hb.cancel = cancel
	go func() {
		defer close(hb.done)
		// A lease with less than a whole lease left (one a parked delivery
		// got back: delivery.held) is renewed at half its remaining time,
		// at once when it has expired.
		first := w.policy.RenewAfter()
		if left := l.ExpiresAt.Sub(w.cfg.Now()); left < 2*first {
			first = max(0, left/2)
		}
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
			}
			visCtx, cancel := context.WithTimeout(hbCtx, sqsCallTimeout)
			w.changeVisibilityWithin(visCtx, d.m, w.cfg.VisibilityTimeout)
			cancel()
			if !hb.mu.TryLock() {
				// The commit holds the item; its outcome decides the lease.
				t.Reset(w.policy.Lease / 8)
				continue
			}
			renewed, err := w.renewer.Renew(hbCtx, hb.current)
			if err == nil {
				hb.current = renewed
			}
			hb.mu.Unlock()
			var lost *inbox.LeaseLostError
			switch {
			case errors.As(err, &lost):
				abort(lost)
				return
			case err != nil:
				if hbCtx.Err() != nil {
					return
				}
				w.log.WarnContext(hbCtx, "lease renewal failed; retrying", "idempotencyKey", l.Key, "error", truncateRunes(err.Error(), maxLoggedMessage))
				t.Reset(w.policy.Lease / 8)
				continue
			}
			w.metrics.Extensions.Inc()
			t.Reset(w.policy.RenewAfter())
		}
	}()
	return hb
}

// hold runs f (the commit) with no renewal in flight.
func (hb *heartbeat) hold(f func()) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	f()
}

// lease is the lease as last renewed.
func (hb *heartbeat) lease() inbox.Lease {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.current
}

// stop ends the renewals and waits for the last one; it may be called
// more than once, and on a nil heartbeat.
func (hb *heartbeat) stop() {
	if hb == nil {
		return
	}
	hb.stopped.Do(func() {
		hb.cancel()
		<-hb.done
	})
}
