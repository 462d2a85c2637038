package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/logevent"
)

// handle runs one delivery's pipeline inside its observer: its consumer
// span (tracing on), the in-flight gauge and the message's age before, and
// after it the one log line — written inside the span — the metrics and
// the event (observe).
func (w *Worker) handle(ctx context.Context, d *delivery, h host) settled {
	ctx, span := w.consume(ctx, d)
	start := w.cfg.Now()
	defer w.working()() // ddbworker_database_capacity (capacity.go)
	w.metrics.InFlight.Inc()
	defer w.metrics.InFlight.Dec()
	if !d.sentAt.IsZero() {
		w.metrics.MessageAge.Observe(start.Sub(d.sentAt).Seconds())
	}
	r := w.process(ctx, d, h, nil)
	w.observeDwell(d) // fair.go
	w.observe(ctx, d, r, w.cfg.Now().Sub(start))
	w.consumed(span, r)
	return r.applied.settled
}

// skip settles a delivery its host does not start — the rest of a FIFO
// group after a failure, or held behind a parked one; a message received
// as the worker shuts down; a Lambda record with no time left — through
// the pipeline's record and apply stages with v, and observes it.
func (w *Worker) skip(ctx context.Context, d *delivery, v notStarted, h host) settled {
	ctx, span := w.consume(ctx, d)
	r := w.process(ctx, d, h, v)
	w.observe(ctx, d, r, 0)
	w.consumed(span, r)
	return r.applied.settled
}

// observe is the one place a delivery is logged, counted and reported:
// one JSON log line (LogEvent names it by outcome), its metrics, the alerts
// its failure calls for, and the event for Deps.OnEvent.
func (w *Worker) observe(ctx context.Context, d *delivery, r report, took time.Duration) {
	o, a := r.outcome, r.applied
	ev := Event{SQSMessageID: d.id, Outcome: o.result, Final: a.settled == settledFinal, Attempt: o.attempt,
		Policy: a.policy, Duration: took, Infrastructure: o.infra, Visibility: time.Duration(visibilitySeconds(a.visibility)) * time.Second}
	attrs := make([]slog.Attr, 0, 24)
	attrs = append(attrs, slog.String("queue", w.queueName), slog.String("sqsMessageId", d.id), slog.String("result", o.result),
		slog.Int("receiveCount", d.receives), slog.Int64("processingMs", took.Milliseconds()),
		slog.Int64("dbTransactionMs", r.commit.Milliseconds()))
	if wk := r.work; wk != nil {
		env := wk.env
		ev.IdempotencyKey, ev.MessageType = env.IdempotencyKey, env.MessageType
		attrs = append(attrs, slog.String("messageId", env.MessageID), slog.String("idempotencyKey", env.IdempotencyKey),
			slog.String("messageType", env.MessageType), slog.String("aggregateType", env.AggregateType),
			slog.String("aggregateId", env.AggregateID), slog.String("correlationId", env.CorrelationID),
			slog.String("causationId", env.CausationID), slog.Int("attempt", o.attempt))
	}
	typeLabel := w.labels.messageType(ev.MessageType)
	level := slog.LevelInfo
	if f := o.failure; f != nil {
		ev.Code, ev.Kind = f.Code, f.Kind.String()
		attrs = append(attrs, slog.String("failureKind", ev.Kind), slog.String("failureCode", f.Code),
			slog.String("failureMessage", truncateRunes(f.Message, maxLoggedMessage)), slog.Bool("infrastructure", o.infra))
		w.metrics.Failures.WithLabelValues(typeLabel, ev.Kind, w.labels.code(f.Code)).Inc()
		w.alert(ctx, d, r, f)
		level = slog.LevelWarn
		if f.IsTerminal() {
			level = slog.LevelError
			attrs = append(attrs, slog.String("terminalPolicy", string(a.policy)))
		}
	}
	if ev.Visibility > 0 {
		attrs = append(attrs, slog.Int64("visibilityS", int64(ev.Visibility/time.Second)))
	}
	if a.resent {
		attrs = append(attrs, slog.Bool("resent", true))
	}
	if r.commit > 0 {
		w.metrics.Commit.Observe(r.commit.Seconds())
	}
	if a.dlqSent {
		w.metrics.DLQSent.Inc()
	}
	if wk := r.work; wk != nil && wk.req != nil && w.records != nil && !r.unrecorded() {
		bytes, warn := w.records.size(&wk.req.Work)
		w.metrics.InboxRecordBytes.WithLabelValues(typeLabel).Observe(float64(bytes))
		if warn {
			w.log.WarnContext(ctx, "inbox records of this message type approach DynamoDB's 1 KB write unit: over it each write of one costs two units; shorter idempotency keys, aggregate ids, correlation ids or producer names keep them under",
				"messageType", wk.env.MessageType, "recordBytes", bytes, "idempotencyKeyBytes", len(wk.env.IdempotencyKey))
		}
	}
	w.log.LogAttrs(ctx, level, LogEvent(o.result), attrs...)
	w.metrics.Outcomes.WithLabelValues(typeLabel, outcomeLabel(ev.Outcome)).Inc()
	if took > 0 {
		w.metrics.Processing.WithLabelValues(typeLabel).Observe(took.Seconds())
	}
	if w.deps.OnEvent != nil {
		w.deps.OnEvent(ev)
	}
}

// LogEvent is the log line's event of a delivery whose outcome is result
// (an Outcome* label, or a handler's own outcome).
func LogEvent(result string) string {
	switch result {
	case OutcomeDuplicate:
		return logevent.Duplicate
	case OutcomeSuperseded:
		return logevent.Superseded
	case OutcomeInFlight:
		return logevent.InFlight
	case OutcomeRetry:
		return logevent.Retry
	case OutcomeTerminal:
		return logevent.Terminal
	case OutcomeDeferred:
		return logevent.Deferred
	case OutcomeLeaseLost:
		return logevent.LeaseLost
	case OutcomeReleased:
		return logevent.Released
	case OutcomeParked:
		return logevent.Parked
	}
	return logevent.Completed
}

// alert counts and logs the failures an operator must act on: a hash
// mismatch (a key reused for other work), a payload the worker may not
// read (a permission to fix), and the infrastructure trouble the metrics
// track.
func (w *Worker) alert(ctx context.Context, d *delivery, r report, f *failure.Error) {
	switch f.Code {
	case failure.CodeThrottled:
		w.metrics.Throttles.Inc()
	case failure.CodeTransactionConflict, failure.CodeReplicatedWriteConflict:
		w.metrics.Conflicts.Inc()
	case failure.CodeHashMismatch:
		w.metrics.HashMismatches.Inc()
		attrs := []any{"sqsMessageId", d.id, "reason", truncateRunes(f.Message, maxLoggedMessage)}
		if r.work != nil {
			attrs = append(attrs, "idempotencyKey", r.work.env.IdempotencyKey, "messageType", r.work.env.MessageType, "requestHash", r.work.env.RequestHash)
		}
		w.log.ErrorContext(ctx, "ALERT idempotency hash mismatch: the key already holds other work; the existing record is untouched", attrs...)
	case payloadCodeAccessDenied:
		w.metrics.PayloadAccessDenied.Inc()
		attrs := []any{"sqsMessageId", d.id, "receiveCount", d.receives, "code", f.Code, "error", truncateRunes(f.Message, maxLoggedMessage)}
		if r.work != nil {
			attrs = append(attrs, "idempotencyKey", r.work.env.IdempotencyKey, "messageType", r.work.env.MessageType)
		}
		w.log.ErrorContext(ctx, "ALERT payload access denied: the worker may not read the referenced object; the message is retried without counting attempts until the permission is fixed", attrs...)
	}
}

// maxLoggedMessage caps failure and error texts in log lines and DLQ
// attributes: a failure that echoes a large payload must not become a
// large log line.
const maxLoggedMessage = 1024
