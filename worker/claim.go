package worker

import (
	"context"
	"errors"
	"time"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
)

// claim takes the lease of wk's work through the gate: a fresh record, or
// the decision table on the record there (existing, when a fused commit
// found it). Claiming counts no business attempt. A delivery that may not
// run now gets its verdict instead of a lease.
func (w *Worker) claim(ctx context.Context, d *delivery, wk *work, existing *inbox.Record) (*claimed, verdict) {
	var dec gate.Decision
	var err error
	req := wk.req
	if d.held != nil {
		// A lease this delivery could not give back when it was parked: the
		// claim presents its token, and gets it back if it is still ours.
		held := *req
		held.Token = d.held.Token
		req = &held
	}
	if existing != nil {
		dec, err = w.gate.Resolve(ctx, req, existing)
	} else {
		dec, err = w.gate.Acquire(ctx, req)
	}
	if err != nil {
		w.stageFailed(ctx, err)
		return nil, w.claimFailed(d, wk, err)
	}
	switch dec.Action {
	case gate.Acquired:
		return &claimed{lease: dec.Lease, attempts: dec.Attempts}, nil
	case gate.Duplicate:
		return nil, completed{outcome: OutcomeDuplicate}
	case gate.InFlight:
		return nil, waiting{outcome: OutcomeInFlight, hide: max(dec.RetryAfter, time.Second) + w.cfg.Backoff.Delay(1, 0)/2}
	case gate.Terminal:
		return nil, terminalAgain{failure: failure.NewTerminal(dec.Code, dec.Message), attempt: dec.Record.Attempts}
	case gate.Exhausted:
		return nil, exhausted{failure: failure.NewTerminal(dec.Code, dec.Message), record: dec.Record}
	case gate.HashMismatch:
		return nil, reject(wk.env, dec.Code, dec.Message) // observe raises the alert for its code
	}
	return nil, troubled{failure: failure.NewRetryable(failure.CodeServiceUnavailable, "gate: unknown action "+dec.Action.String()), step: 1}
}

// claimFailed is the verdict of a claim whose call failed: no attempt is
// counted, and a lease the claim may have taken (its write got no answer)
// is given back. A request DynamoDB refuses as invalid will not heal by
// waiting: the message is rejected with its code.
func (w *Worker) claimFailed(d *delivery, wk *work, err error) verdict {
	f := failure.Classify(err, failure.CodeServiceUnavailable)
	if f.IsTerminal() {
		return reject(wk.env, f.Code, "the gate's request was refused: "+f.Message)
	}
	if errors.Is(err, gate.ErrRaceLimit) {
		f = failure.Wrap(failure.Retryable, failure.CodeTransactionConflict, err)
	}
	t := troubled{failure: f, step: infraStep(d)}
	var ce *gate.ClaimError
	if errors.As(err, &ce) {
		t.lease = &ce.Lease
	}
	return t
}

// infraStep is the backoff step of a delivery that failed for
// infrastructure reasons (no business attempt is counted): its receive
// count, capped low — innocent redeliveries (in-flight duplicates, a storm
// after an outage) raise the count, and one throttle must not then hide a
// message for minutes. Database-wide trouble is the health gate's.
func infraStep(d *delivery) int { return min(max(1, d.receives), 4) }
