package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

// admit decides whether a delivery is work this worker runs now: its body
// (fetched from S3 for an SQS Extended Client message) decodes into an
// envelope — or an adapted route's adapter reads it into one (an SNS
// notification, an EventBridge event, a service's own JSON: see
// envelope.Decoder.Read) —, a handler is registered for its type, it is
// not a replay older than the inbox remembers, and its
// attemptPolicy.notBefore has passed. It writes nothing: a delivery it
// refuses becomes a rejection that record writes (the work it returns then
// holds only what the envelope says, for the log line and the DLQ copy).
func (w *Worker) admit(ctx context.Context, d *delivery) (*work, verdict) {
	body, decoder, v := w.messageBody(ctx, d)
	if v != nil {
		return nil, v
	}
	env, err := decoder.Read(w.input(d, body), w.adapters)
	if err != nil {
		f := judge.Undecodable(err)
		rej := rejected{rejection: mutation.Rejection{Code: f.Code, Message: f.Message}}
		var ee *envelope.Error
		if errors.As(err, &ee) && ee.MessageType != "" {
			// An adapted body of a type no route takes: its rejection and
			// DLQ copy name the type the body named, as the log line does.
			rej.rejection.MessageType = ee.MessageType
			return &work{env: &envelope.Envelope{MessageType: ee.MessageType}}, rej
		}
		return nil, rej
	}
	known := &work{env: env}
	rt, ok := w.routes[env.MessageType]
	if !ok {
		return known, reject(env, failure.CodeUnknownMessageType, fmt.Sprintf("no handler for message type %q", env.MessageType))
	}
	now := w.cfg.Now()
	if !d.origin.IsZero() && now.Sub(d.origin) >= w.cfg.Store.TTL.Completed-w.policy.Skew {
		// Its COMPLETED record, if the work was ever applied, may be gone
		// by TTL: the gate could not tell a replay from new work.
		return known, reject(env, failure.CodeReplayWindowExpired, fmt.Sprintf(
			"first sent %s, longer ago than the inbox keeps COMPLETED records (%s): a replay this old could apply the work twice",
			inbox.FormatTime(d.origin), w.cfg.Store.TTL.Completed))
	}
	if ap := env.AttemptPolicy; ap != nil && ap.NotBefore != nil && now.Before(*ap.NotBefore) {
		return known, w.deferral(d, env, ap.NotBefore.Sub(now))
	}
	req := &gate.Request{Work: inbox.Work{
		Key: env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
		SchemaVersion: env.SchemaVersion, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Producer: env.Producer,
	}, LeaseUntil: d.deadline, Owner: d.owner, HashAs: env.HashLike, Attempts: judge.Policy(env, w.cfg.MaxAttempts)}
	return &work{env: env, route: rt, req: req, mode: w.modes[env.MessageType]}, nil
}

// input is the body to read and, when a route is adapted, what the
// delivery says of it: the SQS message id and send time (the messageId and
// occurredAt of a body that names none) and its String and Number
// attributes (an adapter's TypeAttribute).
func (w *Worker) input(d *delivery, body []byte) envelope.Input {
	in := envelope.Input{Body: body}
	if w.adapters.Len() == 0 {
		return in
	}
	in.MessageID, in.SentAt = d.id, d.sentAt
	for name, v := range d.m.MessageAttributes {
		if dt := aws.ToString(v.DataType); v.StringValue != nil && (strings.HasPrefix(dt, "String") || strings.HasPrefix(dt, "Number")) {
			if in.Attributes == nil {
				in.Attributes = make(map[string]string, len(d.m.MessageAttributes))
			}
			in.Attributes[name] = *v.StringValue
		}
	}
	return in
}

// reject is the rejection of env's work with code and message.
func reject(env *envelope.Envelope, code, message string) rejected {
	return rejected{rejection: mutation.Rejection{Code: code, Message: message, Key: env.IdempotencyKey, MessageType: env.MessageType,
		RequestHash: env.RequestHash, AggregateType: env.AggregateType, AggregateID: env.AggregateID, CorrelationID: env.CorrelationID}}
}

// maxSendDelay is SQS's longest per-message delay.
const maxSendDelay = 15 * time.Minute

// retentionMargin is how long before the end of its retention a hidden
// message must come back.
const retentionMargin = time.Hour

// deferral keeps a message whose attemptPolicy.notBefore lies wait ahead,
// without a lease or an attempt. One visibility change covers it when it
// can (SQS hides a message at most 12 hours after its receipt, and the
// message must outlive its hiding within the queue's retention); otherwise
// a standard queue's message is re-sent as a new one (delayed up to 15
// minutes) and this one deleted, so neither its receive count nor its age
// climbs toward the redrive policy or the retention period by deferral
// alone. A FIFO message cannot be re-sent without breaking its group's
// order: one deferred further than one hiding covers ends terminal.
func (w *Worker) deferral(d *delivery, env *envelope.Envelope, wait time.Duration) verdict {
	if wait > w.cfg.MaxDeferral {
		return reject(env, failure.CodeDeferralTooLong,
			fmt.Sprintf("attemptPolicy.notBefore is %s ahead; the worker defers at most %s (Config.MaxDeferral)", wait.Round(time.Second), w.cfg.MaxDeferral))
	}
	by := w.cappedHide(wait, d.receivedAt)
	// Hidden, the message comes back once more: within its retention and
	// without passing the redrive policy's maxReceiveCount.
	outlives := (d.sentAt.IsZero() || w.cfg.Now().Sub(d.sentAt)+by+retentionMargin < w.queue.retention) &&
		(w.queue.maxReceives == 0 || d.receives < w.queue.maxReceives)
	covers := by >= wait
	switch {
	case w.fifo && covers && outlives:
		return deferred{by: by}
	case w.fifo:
		return reject(env, failure.CodeDeferralTooLong, fmt.Sprintf(
			"attemptPolicy.notBefore is %s ahead: on a FIFO queue one visibility change must cover a deferral (at most 12h after receipt, within the queue's retention of %s)",
			wait.Round(time.Second), w.queue.retention))
	case outlives && (covers || d.receives <= 1):
		return deferred{by: by}
	}
	return deferred{by: min(wait, maxSendDelay), resend: true}
}
