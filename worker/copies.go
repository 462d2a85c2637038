package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/dlq"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
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

// carried are the attributes a copy of d's message keeps beside
// ddbworker's own: its creation context (traceAttributes: traceparent and
// tracestate, or its AWSTraceHeader as traceparent) and the producer's
// other attributes (not ddbworker.*). A copy takes them in that order of
// precedence, after ddbworker's (fitAttributes): the trace context is
// worth less than the failure code a DLQ reader needs, and more than a
// producer's arbitrary attribute.
func carried(d *delivery) (trace, producer map[string]types.MessageAttributeValue) {
	trace = traceAttributes(d)
	producer = map[string]types.MessageAttributeValue{}
	for k, v := range d.m.MessageAttributes {
		// The message's own traceparent and tracestate are in trace (as
		// extracted: a malformed one is dropped).
		if k != tracing.AttrTraceparent && k != tracing.AttrTracestate && !strings.HasPrefix(k, dlq.AttrPrefix) {
			producer[k] = v
		}
	}
	return trace, producer
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

// sendToDLQ copies the message to the DLQ with the failure as attributes,
// keeping its creation context and its producer's attributes (carried).
// When body and attributes exceed the DLQ's MaximumMessageSize (read when
// Run starts) it drops, in this order, the producer's attributes, then the
// failure message; if even the failure code does not fit, or the DLQ
// refuses the copy as too large, it returns errTooLargeForDLQ.
func (w *Worker) sendToDLQ(ctx context.Context, d *delivery, wk *work, f *failure.Error) error {
	body := aws.ToString(d.m.Body)
	ours := map[string]types.MessageAttributeValue{
		dlq.AttrFailureCode:     strAttr(f.Code),
		dlq.AttrFailureMessage:  strAttr(orDefault(truncateRunes(f.Message, maxLoggedMessage), "-")),
		dlq.AttrFailedAt:        strAttr(inbox.FormatTime(w.cfg.Now())),
		dlq.AttrSourceMessageID: strAttr(d.id),
	}
	if wk != nil {
		ours[dlq.AttrIdempotencyKey] = strAttr(wk.env.IdempotencyKey)
		ours[dlq.AttrMessageType] = strAttr(wk.env.MessageType)
	}
	maps.Copy(ours, origin(d))
	trace, producer := carried(d)
	limit := w.queue.dlqMaxBytes
	attrs := fitAttributes(body, ours, trace, producer, limit)
	if attrs == nil {
		return fmt.Errorf("%w: body %d bytes, the DLQ takes %d", errTooLargeForDLQ, len(body), limit)
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.DLQURL), MessageBody: d.m.Body, MessageAttributes: attrs}
	if strings.HasSuffix(w.cfg.DLQURL, ".fifo") {
		group := d.m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		in.MessageGroupId = aws.String(orDefault(group, "ddbworker-dlq"))
		in.MessageDeduplicationId = d.m.MessageId
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		if tooLarge(err) {
			return fmt.Errorf("%w: the DLQ refused the copy: %w", errTooLargeForDLQ, err)
		}
		return fmt.Errorf("worker: send %s to DLQ: %w", d.id, err)
	}
	return nil
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

// fitAttributes chooses a copy's attributes: ours (ddbworker's), then the
// trace context (traceparent, then tracestate), then the producer's
// (sorted by name), each within SQS's limit of sqsbatch.MaxAttributes and
// while body and attributes fit in limit bytes; without room it sheds the
// producer's attributes and the trace context, then every attribute of
// ours but the failure code, the source message id, the first-sent time,
// the type and the key — and keeps traceparent after those if it fits. It
// returns nil when not even ours[dlq.AttrFailureCode] (when ours has one)
// fits.
func fitAttributes(body string, ours, trace, producer map[string]types.MessageAttributeValue, limit int) map[string]types.MessageAttributeValue {
	attrs := make(map[string]types.MessageAttributeValue, sqsbatch.MaxAttributes)
	maps.Copy(attrs, ours)
	names := make([]string, 0, len(trace)+len(producer))
	for _, k := range []string{tracing.AttrTraceparent, tracing.AttrTracestate} {
		if _, ok := trace[k]; ok {
			names = append(names, k)
		}
	}
	names = append(names, slices.Sorted(maps.Keys(producer))...)
	value := func(k string) types.MessageAttributeValue {
		if v, ok := trace[k]; ok {
			return v
		}
		return producer[k]
	}
	for _, k := range names {
		if len(attrs) >= sqsbatch.MaxAttributes || sqsbatch.MessageSize(body, attrs)+sqsbatch.AttributeSize(k, value(k)) > limit {
			continue
		}
		attrs[k] = value(k)
	}
	if sqsbatch.MessageSize(body, attrs) <= limit {
		return attrs
	}
	minimal := map[string]types.MessageAttributeValue{}
	keep := func(k string, v types.MessageAttributeValue) {
		if sqsbatch.MessageSize(body, minimal)+sqsbatch.AttributeSize(k, v) <= limit {
			minimal[k] = v
		}
	}
	for _, k := range []string{dlq.AttrFailureCode, dlq.AttrSourceMessageID, dlq.AttrFirstSentAt, dlq.AttrMessageType, dlq.AttrIdempotencyKey} {
		if v, ok := ours[k]; ok {
			keep(k, v)
		}
	}
	if v, ok := trace[tracing.AttrTraceparent]; ok {
		keep(tracing.AttrTraceparent, v)
	}
	if _, ok := minimal[dlq.AttrFailureCode]; !ok {
		if _, needed := ours[dlq.AttrFailureCode]; needed {
			return nil
		}
	}
	return minimal
}

// resend sends a copy of a message to the work queue — deferred, or parked
// on its last receive — delayed by delay, keeping its origin, its creation context and its producer
// attributes, in that order of precedence within SQS's limits
// (fitAttributes).
func (w *Worker) resend(ctx context.Context, d *delivery, delay time.Duration) error {
	trace, producer := carried(d)
	attrs := fitAttributes(aws.ToString(d.m.Body), origin(d), trace, producer, maxMessageBytes)
	if len(attrs) == 0 {
		attrs = nil
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.QueueURL), MessageBody: d.m.Body,
		MessageAttributes: attrs, DelaySeconds: visibilitySeconds(min(delay, maxSendDelay))}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		return fmt.Errorf("worker: re-send %s: %w", d.id, err)
	}
	return nil
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
