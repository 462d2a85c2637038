package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

// maxMessageBytes is SQS's largest message size: body plus attributes
// (sqsbatch.MessageSize); a queue's MaximumMessageSize may be smaller.
const maxMessageBytes = sqsbatch.MaxMessageBytes

// errTooLargeForDLQ: the body leaves no room for the failure attributes.
var errTooLargeForDLQ = errors.New("worker: message too large to copy to the DLQ with its failure attributes")

func strAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// carried are the attributes of d's message a copy of it carries over
// beside ddbworker's own: its creation context (traceAttributes:
// traceparent and tracestate, or its AWSTraceHeader as traceparent) and
// the producer's other attributes (not ddbworker.*).
func carried(d *delivery) map[string]types.MessageAttributeValue {
	out := traceAttributes(d)
	if out == nil {
		out = map[string]types.MessageAttributeValue{}
	}
	for k, v := range d.m.MessageAttributes {
		// The message's own traceparent and tracestate are in out as
		// extracted: a malformed one is dropped.
		if k != tracing.AttrTraceparent && k != tracing.AttrTracestate && !strings.HasPrefix(k, dlq.AttrPrefix) {
			out[k] = v
		}
	}
	return out
}

// messageGroup is the MessageGroupId d's message arrived with ("": none):
// on a FIFO queue its order group, on a standard queue its tenant (SQS
// fair queues), which every copy the worker sends keeps. The receive asks
// for every system attribute (MessageSystemAttributeNameAll), so SQS
// returns it; an event source mapping passes it on to Lambda.
func messageGroup(d *delivery) string {
	return d.m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
}

// origin is the attributes that say when d's work was first sent
// (AttrFirstSentAt, d's origin), none when that is unknown.
func origin(d *delivery) map[string]types.MessageAttributeValue {
	if d.origin.IsZero() {
		return map[string]types.MessageAttributeValue{}
	}
	return map[string]types.MessageAttributeValue{dlq.AttrFirstSentAt: {DataType: aws.String("Number"),
		StringValue: aws.String(strconv.FormatInt(d.origin.UnixMilli(), 10))}}
}

// controls are ddbworker's control attributes a re-send of d's message
// carries: its origin; the marks of a message the DLQ tooling redrove or
// copied (AttrRedrivenFrom, AttrFailureCode), kept as they are; when d's
// work may have an inbox record (mayHaveRecord: a redelivery, a held
// lease, a marked copy), AttrResentFrom — so the copy, whose receive count
// starts afresh, claims through the gate as d would have, and never
// applies work that has a recorded outcome by its commit; and the lease d
// holds (attrHeldLease), which the copy's claim gets back.
func controls(d *delivery) map[string]types.MessageAttributeValue {
	out := origin(d)
	marked := false
	for _, k := range recordMarks {
		if v, ok := d.m.MessageAttributes[k]; ok {
			out[k], marked = v, true
		}
	}
	if !marked && mayHaveRecord(d) {
		// One mark is enough: a copy already marked keeps its mark. A copy
		// that carries the lease d holds is marked too: the lease, larger,
		// ranks after the mark and may be the one a full copy drops.
		out[dlq.AttrResentFrom] = strAttr(d.id)
	}
	if v, ok := heldLeaseAttribute(d.held); ok {
		out[attrHeldLease] = v
	}
	return out
}

// sendToDLQ copies the message to the DLQ with the failure as attributes
// (dlqAttributes) and its MessageGroupId (messageGroup; on a FIFO DLQ a
// message without one goes to group ddbworker-dlq). If even the failure
// code does not fit, or an attribute a route reads to take the message (a
// needed one: the copy could never be redriven), or the DLQ refuses the
// copy as too large, it returns errTooLargeForDLQ: the redrive policy
// then moves the message as it is, every attribute with it. Attributes the
// copy sent dropped are logged and counted (droppedAttributes).
func (w *Worker) sendToDLQ(ctx context.Context, d *delivery, wk *work, f *failure.Error) error {
	body := aws.ToString(d.m.Body)
	fit := w.dlqAttributes(d, wk, f)
	attrs := fit.attrs
	if _, ok := attrs[dlq.AttrFailureCode]; !ok {
		return fmt.Errorf("%w: body %d bytes, the DLQ takes %d", errTooLargeForDLQ, len(body), w.queue.dlqMaxBytes)
	}
	if len(fit.needed) > 0 {
		return fmt.Errorf("%w: body %d bytes, the DLQ takes %d: the copy cannot carry %s, which a route reads to take the message",
			errTooLargeForDLQ, len(body), w.queue.dlqMaxBytes, strings.Join(fit.needed, ", "))
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.DLQURL), MessageBody: d.m.Body, MessageAttributes: attrs}
	if strings.HasSuffix(w.cfg.DLQURL, ".fifo") {
		in.MessageGroupId = aws.String(orDefault(messageGroup(d), "ddbworker-dlq"))
		in.MessageDeduplicationId = d.m.MessageId
	} else if g := messageGroup(d); g != "" {
		in.MessageGroupId = aws.String(g) // the tenant (SQS fair queues), kept for the redrive
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		if tooLarge(err) {
			return fmt.Errorf("%w: the DLQ refused the copy: %w", errTooLargeForDLQ, err)
		}
		return fmt.Errorf("worker: send %s to DLQ: %w", d.id, err)
	}
	w.droppedAttributes(ctx, d, copyDLQ, fit.dropped)
	return nil
}

// dlqAttributes are the attributes of d's DLQ copy: the failure f, what
// d's work is (wk: nil when the envelope did not decode) and its origin,
// then the creation context and the producer's attributes (carried),
// within SQS's limits and the DLQ's MaximumMessageSize (read when Run
// starts) in dlq.FitAttributesFor's order — the failure code first, then
// the attributes the routes read (w.needed), the producer's other
// attributes last.
func (w *Worker) dlqAttributes(d *delivery, wk *work, f *failure.Error) fitted {
	ours := map[string]types.MessageAttributeValue{
		dlq.AttrFailureCode:     strAttr(f.Code),
		dlq.AttrFailureMessage:  strAttr(orDefault(truncateRunes(f.Message, maxLoggedMessage), "-")),
		dlq.AttrFailedAt:        strAttr(inbox.FormatTime(w.cfg.Now())),
		dlq.AttrSourceMessageID: strAttr(d.id),
	}
	if wk != nil { // SQS takes no empty attribute: an adapted body of an unknown type has only its type
		if wk.env.IdempotencyKey != "" {
			ours[dlq.AttrIdempotencyKey] = strAttr(wk.env.IdempotencyKey)
		}
		if wk.env.MessageType != "" {
			ours[dlq.AttrMessageType] = strAttr(wk.env.MessageType)
		}
	}
	maps.Copy(ours, origin(d))
	return w.fitAttributes(aws.ToString(d.m.Body), ours, carried(d), w.queue.dlqMaxBytes)
}

// tooLarge reports whether SQS refused a message for its size, whatever
// the error's form: the code of a too-long message, or the parameter
// refusal whose reason says the message must be shorter.
func tooLarge(err error) bool {
	switch failure.APICode(err) {
	case "MessageTooLong", "BatchRequestTooLong", "RequestEntityTooLarge":
		return true
	case "InvalidParameterValue", "InvalidParameterValueException", "InvalidMessageContents", "ValidationError":
		msg := strings.ToLower(err.Error())
		return strings.Contains(msg, "shorter than") || strings.Contains(msg, "too long") || strings.Contains(msg, "too large") ||
			strings.Contains(msg, "maximummessagesize")
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 413
}

// fitted is a copy's attributes (never nil), the candidates it dropped in
// order of precedence, and those of them a route reads to take the
// message (needed): a copy without them could never be read again.
type fitted struct {
	attrs           map[string]types.MessageAttributeValue
	dropped, needed []string
}

// fitAttributes chooses a copy's attributes among ours (ddbworker's:
// the failure, the origin, the marks) and carried (the trace context and
// the producer's), ours winning a name both hold, as
// dlq.FitAttributesFor ranks and fits them within SQS's limits and limit
// bytes with body: the attributes the routes read (w.needed) right after
// ddbworker's control attributes.
func (w *Worker) fitAttributes(body string, ours, carried map[string]types.MessageAttributeValue, limit int) fitted {
	candidates := make(map[string]types.MessageAttributeValue, len(ours)+len(carried))
	maps.Copy(candidates, carried)
	maps.Copy(candidates, ours)
	attrs, dropped, needed := dlq.FitAttributesFor(body, candidates, w.needed, limit)
	return fitted{attrs: attrs, dropped: dropped, needed: needed}
}

// Copies the worker makes, as logs and metrics name them.
const (
	copyDLQ    = "dlq"
	copyResend = "resend"
)

// droppedAttributes says which attributes a copy of d's message sent
// without (none: nothing to say): a warning naming them and the message,
// and CopyAttributesDropped counts them. A route never needs one of them
// (the copy is not sent without those): they are the producer's, the
// trace context, or ddbworker's informational attributes.
func (w *Worker) droppedAttributes(ctx context.Context, d *delivery, kind string, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	w.metrics.CopyAttributesDropped.WithLabelValues(kind).Add(float64(len(dropped)))
	w.log.WarnContext(ctx, "a copy of the message dropped attributes SQS's limits (10 attributes, the queue's MaximumMessageSize) left no room for beside ddbworker's",
		"sqsMessageId", d.id, "copy", kind, "droppedAttributes", dropped)
}

// resend sends a copy of a message to the work queue — deferred, or parked
// on its last receive — delayed by delay, with resendAttributes. A copy
// that cannot carry an attribute a route reads to take the message is
// not sent (an error): its caller keeps the message, whose redrive policy
// moves it to the DLQ as it is.
func (w *Worker) resend(ctx context.Context, d *delivery, delay time.Duration) error {
	fit := w.resendAttributes(d)
	if len(fit.needed) > 0 {
		return fmt.Errorf("worker: re-send %s: the copy cannot carry %s, which a route reads to take the message, within the queue's limits (%d bytes)",
			d.id, strings.Join(fit.needed, ", "), w.queue.maxBytes)
	}
	attrs := fit.attrs
	if len(attrs) == 0 {
		attrs = nil
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.QueueURL), MessageBody: d.m.Body,
		MessageAttributes: attrs, DelaySeconds: visibilitySeconds(min(delay, maxSendDelay))}
	if g := messageGroup(d); g != "" && !w.fifo {
		// The copy keeps the message's tenant (SQS fair queues): without
		// it, it would leave its tenant's share of the queue. (A FIFO
		// message is never re-sent: see parkByResend.)
		in.MessageGroupId = aws.String(g)
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		return fmt.Errorf("worker: re-send %s: %w", d.id, err)
	}
	w.droppedAttributes(ctx, d, copyResend, fit.dropped)
	return nil
}

// resendAttributes are the attributes of the re-send of d's message
// (deferred, or parked on its last receive): its control attributes
// (controls: its origin, the marks of a redriven or DLQ-copied message),
// the attributes the routes read (w.needed), its creation context and its
// producer's other attributes, in that order of precedence within SQS's
// limits and the work queue's MaximumMessageSize (dlq.FitAttributesFor).
func (w *Worker) resendAttributes(d *delivery) fitted {
	return w.fitAttributes(aws.ToString(d.m.Body), controls(d), carried(d), w.queue.maxBytes)
}

// truncateRunes shortens s to about n bytes on a rune boundary, marking the
// cut.
func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
