package worker

import (
	"context"
	"errors"
	"time"
)

// applied is what apply did with a delivery's message.
type applied struct {
	settled settled
	// visibility is how long the message was hidden (kept, parked,
	// deferred by re-send: the copy's delay).
	visibility time.Duration
	// policy is the terminal policy applied (terminal outcomes).
	policy TerminalPolicy
	// dlqSent: a copy went to the DLQ.
	dlqSent bool
}

// apply does to a delivery's SQS message what its outcome says — the only
// place that acts on SQS for a message: delete it (through the host),
// hide it, park it, re-send it delayed, or end it by the terminal policy.
// When an action cannot be done it keeps the message for a later delivery,
// never losing it: the inbox already knows what it must.
func (w *Worker) apply(ctx context.Context, d *delivery, wk *work, o outcome, h host) applied {
	switch a := o.act.(type) {
	case ack:
		h.ack(d)
		return applied{settled: settledFinal}
	case hide:
		vis := w.cappedHide(a.d, d.receivedAt)
		w.changeVisibility(ctx, d.m, vis)
		return applied{settled: settledKept, visibility: vis}
	case park:
		return applied{settled: settledParked, visibility: h.park(ctx, d)}
	case resend:
		if err := w.resend(ctx, d, a.delay); err != nil {
			w.stageFailed(ctx, err)
			w.log.WarnContext(ctx, "could not re-send a deferred message; it comes back after a backoff", "sqsMessageId", d.id, "error", err.Error())
			vis := w.cfg.Backoff.delay(infraStep(d))
			w.changeVisibility(ctx, d.m, vis)
			return applied{settled: settledKept, visibility: vis}
		}
		h.ack(d)
		return applied{settled: settledFinal, visibility: a.delay}
	case endTerminal:
		return w.endTerminal(ctx, d, wk, o, h)
	}
	w.log.ErrorContext(ctx, "unknown action; the message is kept", "sqsMessageId", d.id)
	return applied{settled: settledKept}
}

// endTerminal applies the terminal policy to a message whose work failed
// for good.
func (w *Worker) endTerminal(ctx context.Context, d *delivery, wk *work, o outcome, h host) applied {
	policy := w.cfg.TerminalPolicy
	switch policy {
	case PolicyQuarantine:
		h.ack(d)
		return applied{settled: settledFinal, policy: policy}
	case PolicyRedrive:
		// Left alone: SQS moves it to the DLQ after maxReceiveCount.
		return applied{settled: settledKept, policy: policy}
	}
	err := w.sendToDLQ(ctx, d, wk, o.failure)
	if err == nil {
		h.ack(d)
		return applied{settled: settledFinal, policy: policy, dlqSent: true}
	}
	vis := w.cfg.Backoff.delay(infraStep(d))
	if errors.Is(err, errTooLargeForDLQ) {
		// Its body cannot travel with the failure attributes (or the DLQ
		// refuses its size): the redrive policy moves it to the DLQ as it
		// is, its failure recorded in the inbox.
		vis, policy = w.cfg.Backoff.Max, PolicyRedrive
	}
	w.stageFailed(ctx, err)
	// Not in the DLQ yet: kept; the next delivery finds the record
	// FAILED_TERMINAL and tries the DLQ again.
	w.log.ErrorContext(ctx, "DLQ send failed; message kept", "sqsMessageId", d.id, "error", truncateRunes(err.Error(), maxLoggedMessage))
	vis = w.cappedHide(vis, d.receivedAt)
	w.changeVisibility(ctx, d.m, vis)
	return applied{settled: settledKept, policy: policy, visibility: vis}
}
