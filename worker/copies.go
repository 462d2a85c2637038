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
)

// maxMessageBytes is SQS's message size limit: body plus attributes (each
// attribute's name, type and value).
const maxMessageBytes = 1 << 20

// errTooLargeForDLQ: the body leaves no room for the failure attributes.
var errTooLargeForDLQ = errors.New("worker: message too large to copy to the DLQ with its failure attributes")

func strAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

func attrSize(name string, v types.MessageAttributeValue) int {
	return len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
}

func messageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += attrSize(k, v)
	}
	return n
}

// originTime is when the work's first message was sent: the earliest of
// AttrFirstSentAt (carried by DLQ copies, re-sends and redrives) and this
// message's SentTimestamp. Zero when neither is known.
func originTime(m types.Message) time.Time {
	t := sentAt(m)
	if v, ok := m.MessageAttributes[dlq.AttrFirstSentAt]; ok {
		if ms, err := strconv.ParseInt(aws.ToString(v.StringValue), 10, 64); err == nil && ms > 0 {
			if first := time.UnixMilli(ms); t.IsZero() || first.Before(t) {
				t = first
			}
		}
	}
	return t
}

// carriedAttributes are the attributes a copy of m keeps: the producer's
// (not ddbworker.*) and AttrFirstSentAt, set to m's origin.
func carriedAttributes(m types.Message) map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range m.MessageAttributes {
		if !strings.HasPrefix(k, dlq.AttrPrefix) {
			attrs[k] = v
		}
	}
	if origin := originTime(m); !origin.IsZero() {
		attrs[dlq.AttrFirstSentAt] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(origin.UnixMilli(), 10))}
	}
	return attrs
}

// sendToDLQ copies the message to the DLQ with the failure as attributes.
// When body and attributes exceed SQS's size limit it drops, in this order,
// the producer's attributes, then the failure message; if even the failure
// code does not fit, it returns errTooLargeForDLQ.
func (w *Worker) sendToDLQ(ctx context.Context, d *delivery, f *failure.Error) error {
	body := aws.ToString(d.m.Body)
	ours := map[string]types.MessageAttributeValue{
		dlq.AttrFailureCode:     strAttr(f.Code),
		dlq.AttrFailureMessage:  strAttr(orDefault(truncateRunes(f.Message, maxLoggedMessage), "-")),
		dlq.AttrFailedAt:        strAttr(inbox.FormatTime(w.cfg.Now())),
		dlq.AttrSourceMessageID: strAttr(aws.ToString(d.m.MessageId)),
	}
	if d.env != nil {
		ours[dlq.AttrIdempotencyKey] = strAttr(d.env.IdempotencyKey)
		ours[dlq.AttrMessageType] = strAttr(d.env.MessageType)
	}
	carried := carriedAttributes(d.m)
	if v, ok := carried[dlq.AttrFirstSentAt]; ok {
		ours[dlq.AttrFirstSentAt] = v
		delete(carried, dlq.AttrFirstSentAt)
	}
	attrs := fitAttributes(body, ours, carried)
	if attrs == nil {
		return fmt.Errorf("%w: body %d bytes", errTooLargeForDLQ, len(body))
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
		return fmt.Errorf("worker: send %s to DLQ: %w", aws.ToString(d.m.MessageId), err)
	}
	return nil
}

// fitAttributes chooses the DLQ copy's attributes: ours, then the
// producer's (sorted by name) within SQS's limit of 10, as long as body and
// attributes fit in a message; without room it sheds the producer's
// attributes, then every attribute of ours but the failure code and the
// source message id. It returns nil when even those do not fit.
func fitAttributes(body string, ours, producer map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
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
		if len(attrs) >= 10 || messageSize(body, attrs)+attrSize(k, producer[k]) > maxMessageBytes {
			continue
		}
		attrs[k] = producer[k]
	}
	if messageSize(body, attrs) <= maxMessageBytes {
		return attrs
	}
	minimal := map[string]types.MessageAttributeValue{}
	for _, k := range []string{dlq.AttrFailureCode, dlq.AttrSourceMessageID, dlq.AttrFirstSentAt, dlq.AttrMessageType, dlq.AttrIdempotencyKey} {
		if v, ok := ours[k]; ok && messageSize(body, minimal)+attrSize(k, v) <= maxMessageBytes {
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
		MessageAttributes: carriedAttributes(d.m), DelaySeconds: visibilitySeconds(min(delay, maxSendDelay))}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	if _, err := w.deps.SQS.SendMessage(callCtx, in); err != nil {
		return fmt.Errorf("worker: re-send deferred %s: %w", aws.ToString(d.m.MessageId), err)
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
