package worker

import (
	"context"
	"errors"
	"fmt"
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
)

// maxMessageBytes is SQS's largest message size: body plus attributes
// (sqsbatch.MessageSize); a queue's MaximumMessageSize may be smaller.
const maxMessageBytes = sqsbatch.MaxMessageBytes

// errTooLargeForDLQ: the body leaves no room for the failure attributes.
var errTooLargeForDLQ = errors.New("worker: message too large to copy to the DLQ with its failure attributes")

func strAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// carriedAttributes are the attributes a copy of m keeps: the producer's
// (not ddbworker.*) and AttrFirstSentAt, set to m's origin.
func carriedAttributes(d *delivery) map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range d.m.MessageAttributes {
		if !strings.HasPrefix(k, dlq.AttrPrefix) {
			attrs[k] = v
		}
	}
	if !d.origin.IsZero() {
		attrs[dlq.AttrFirstSentAt] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(d.origin.UnixMilli(), 10))}
	}
	return attrs
}

// sendToDLQ copies the message to the DLQ with the failure as attributes.
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
	carried := carriedAttributes(d)
	if v, ok := carried[dlq.AttrFirstSentAt]; ok {
		ours[dlq.AttrFirstSentAt] = v
		delete(carried, dlq.AttrFirstSentAt)
	}
	limit := w.queue.dlqMaxBytes
	attrs := fitAttributes(body, ours, carried, limit)
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

// fitAttributes chooses the DLQ copy's attributes: ours, then the
// producer's (sorted by name) within SQS's limit of 10, as long as body and
// attributes fit in a message; without room it sheds the producer's
// attributes, then every attribute of ours but the failure code and the
// source message id. It returns nil when even those do not fit.
func fitAttributes(body string, ours, producer map[string]types.MessageAttributeValue, limit int) map[string]types.MessageAttributeValue {
	attrs := make(map[string]types.MessageAttributeValue, 10)
	for k, v := range ours {
		attrs[k] = v
	}
	names := make([]string, 0, len(producer))
	for k := range producer {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if len(attrs) >= sqsbatch.MaxAttributes || sqsbatch.MessageSize(body, attrs)+sqsbatch.AttributeSize(k, producer[k]) > limit {
			continue
		}
		attrs[k] = producer[k]
	}
	if sqsbatch.MessageSize(body, attrs) <= limit {
		return attrs
	}
	minimal := map[string]types.MessageAttributeValue{}
	for _, k := range []string{dlq.AttrFailureCode, dlq.AttrSourceMessageID, dlq.AttrFirstSentAt, dlq.AttrMessageType, dlq.AttrIdempotencyKey} {
		if v, ok := ours[k]; ok && sqsbatch.MessageSize(body, minimal)+sqsbatch.AttributeSize(k, v) <= limit {
			minimal[k] = v
		}
	}
	if _, ok := minimal[dlq.AttrFailureCode]; !ok {
		return nil
	}
	return minimal
}

// resend sends a copy of a deferred message to the work queue, delayed by
// delay, keeping its producer attributes and its origin.
func (w *Worker) resend(ctx context.Context, d *delivery, delay time.Duration) error {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.cfg.QueueURL), MessageBody: d.m.Body,
		MessageAttributes: carriedAttributes(d), DelaySeconds: visibilitySeconds(min(delay, maxSendDelay))}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		return fmt.Errorf("worker: re-send deferred %s: %w", d.id, err)
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
