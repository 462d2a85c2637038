package worker

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
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
	// resent: a copy went back to the work queue (a deferral, or a park on
	// the last receive the redrive policy allows).
	resent bool
}

// apply does to a delivery's SQS message what its outcome says — the only
// place that acts on SQS for a message: delete it (through the host),
// hide it, park it, re-send it delayed, or end it by the terminal policy.
// When an action cannot be done it keeps the message for a later delivery,
// never losing it: the inbox already knows what it must.
//
// The delivery it acts on holds what the outcome says (outcome.held): the
// parking lot keeps that, and a copy of the message hands it over.
func (w *Worker) apply(ctx context.Context, d *delivery, wk *work, o outcome, h host) applied {
	if o.held != d.held {
		d = d.holding(o.held)
	}
	switch a := o.act.(type) {
	case ack:
		h.ack(d)
		return applied{settled: settledFinal}
	case hide:
		vis := w.cappedHide(a.d, d.receivedAt)
		if w.lastReceive(d) {
			return w.keepByResend(ctx, d, h, vis)
		}
		w.changeVisibility(ctx, d.m, vis)
		return applied{settled: settledKept, visibility: vis}
	case park:
		if w.lastReceive(d) {
			return w.parkByResend(ctx, d, h)
		}
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
		return applied{settled: settledFinal, visibility: a.delay, resent: true}
	case endTerminal:
		return w.endTerminal(ctx, d, wk, o, h)
	}
	w.log.ErrorContext(ctx, "unknown action; the message is kept", "sqsMessageId", d.id)
	return applied{settled: settledKept}
}

// lastReceive reports whether d is on the last receive the queue's
// redrive policy allows a standard queue's message: whatever hides it, its
// next receive moves it to the DLQ.
func (w *Worker) lastReceive(d *delivery) bool {
	return !w.fifo && w.queue.maxReceives > 0 && d.receives >= w.queue.maxReceives
}

// parkByResend parks a message on its last receive (lastReceive) as a copy
// of itself: sent back to the work queue, delayed, and this one deleted.
// Hidden instead, its next receive would move it to the DLQ — healthy
// work dead-lettered by an outage. The copy's receive count starts afresh
// and it carries the work's origin, trace context and producer attributes
// (resend), so the replay window still protects it; a delivery of both
// (the delete lost) is a duplicate the gate absorbs. A lease the message
// holds goes with the copy (attrHeldLease), which gets it back instead of
// taking it over. A FIFO message is
// never re-sent (the copy would leave its group's order): its cover is
// the hidings before its last receive (HealthConfig.OutageCover). The
// copy is delayed as a parked record is hidden under Lambda, by the
// outage's age (HealthConfig.outagePark), within SQS's 15 minutes: a
// longer delay would outlast a short outage. When the copy cannot be sent
// the message is parked as usual.
func (w *Worker) parkByResend(ctx context.Context, d *delivery, h host) applied {
	age, confirming := w.health.parkAge(w.cfg.Now())
	delay := min(w.cfg.Health.outagePark(age, confirming, rand.Float64()), maxSendDelay)
	if err := w.resend(ctx, d, delay); err != nil {
		w.stageFailed(ctx, err)
		w.log.ErrorContext(ctx, "could not re-send a parked message on its last receive before the redrive policy's maxReceiveCount; it is parked, and the DLQ takes it at its next receive if the database is still unhealthy then",
			"sqsMessageId", d.id, "receiveCount", d.receives, "error", truncateRunes(err.Error(), maxLoggedMessage))
		return applied{settled: settledParked, visibility: h.park(ctx, d)}
	}
	h.ack(d)
	return applied{settled: settledFinal, visibility: delay, resent: true}
}

// keepByResend keeps a message on its last receive (lastReceive) for a
// later delivery — a retryable failure with attempts left, work in flight
// elsewhere — as a copy of itself, delayed by the hide it was due (within
// SQS's 15 minutes), and this one deleted: hidden instead, its next
// receive would move it to the DLQ, healthy work dead-lettered because
// earlier receives went to an outage or to duplicates in flight (the
// explorer's seed 19: flaky work on Lambda after two outages). The copy
// is marked (controls: its work has a record), so it claims through the
// gate; its business attempts go on counting in the record, which ends
// the work at MaxAttempts. When the copy cannot be sent the message is
// hidden as before.
func (w *Worker) keepByResend(ctx context.Context, d *delivery, h host, vis time.Duration) applied {
	delay := min(vis, maxSendDelay)
	if err := w.resend(ctx, d, delay); err != nil {
		w.stageFailed(ctx, err)
		w.log.WarnContext(ctx, "could not re-send a message on its last receive before the redrive policy's maxReceiveCount; it is hidden, and the DLQ takes it at its next receive",
			"sqsMessageId", d.id, "receiveCount", d.receives, "error", truncateRunes(err.Error(), maxLoggedMessage))
		w.changeVisibility(ctx, d.m, vis)
		return applied{settled: settledKept, visibility: vis}
	}
	h.ack(d)
	return applied{settled: settledFinal, visibility: delay, resent: true}
}

// attrHeldLease is the control attribute by which a copy of a message
// that holds a lease (delivery.held: parked while the database was
// unhealthy, so it could not be given back) hands that lease to the copy
// (controls): the copy's claim presents its token and gets the lease back
// — renewed — instead of taking it over when it expires, which counts a
// takeover (MAX_TAKEOVERS_EXCEEDED after a few outages). Only workers of
// the work's table can use it: the token is 128 random bits that the
// record must still name, for the same work (gate.Decide); it never
// reaches the DLQ (DLQ copies carry no control attributes but the origin)
// and Redrive strips it with every ddbworker attribute.
const attrHeldLease = dlq.AttrHeldLease

// heldLease is attrHeldLease's value (JSON): the lease's item and token.
type heldLease struct {
	Key         string `json:"k"`
	MessageType string `json:"t"`
	Token       string `json:"l"`
}

// heldLeaseAttribute is the attribute that carries l (false for none).
func heldLeaseAttribute(l *inbox.Lease) (types.MessageAttributeValue, bool) {
	if l == nil || l.Token == "" {
		return types.MessageAttributeValue{}, false
	}
	b, err := json.Marshal(heldLease{Key: l.Key, MessageType: l.MessageType, Token: l.Token})
	if err != nil {
		return types.MessageAttributeValue{}, false
	}
	return strAttr(string(b)), true
}

// heldLeaseOf is the lease m's attrHeldLease hands over, nil when it has
// none (or one that does not parse: the claim then decides as for any
// delivery).
func heldLeaseOf(m types.Message) *inbox.Lease {
	v, ok := m.MessageAttributes[attrHeldLease]
	if !ok {
		return nil
	}
	var h heldLease
	if err := json.Unmarshal([]byte(aws.ToString(v.StringValue)), &h); err != nil || h.Token == "" || h.Key == "" || h.MessageType == "" {
		return nil
	}
	return &inbox.Lease{Key: h.Key, MessageType: h.MessageType, Token: h.Token}
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
