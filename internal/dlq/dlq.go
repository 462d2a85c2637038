package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
)

// Message attributes the worker's terminal policy "dlq" sets on its copy.
// The values are the ones worker.Attr* use.
const (
	AttrFailureCode     = "ddbworker.failureCode"
	AttrFailureMessage  = "ddbworker.failureMessage"
	AttrFailedAt        = "ddbworker.failedAt"
	AttrSourceMessageID = "ddbworker.sourceMessageId"
	AttrIdempotencyKey  = "ddbworker.idempotencyKey"
	AttrMessageType     = "ddbworker.messageType"
	// AttrRedrivenFrom is set by Redrive on the message it sends to the
	// work queue: the DLQ message id it came from.
	AttrRedrivenFrom = "ddbworker.redrivenFrom"
	// AttrResentFrom is set by the worker on a message it re-sends to the
	// work queue (a deferral, or a park on the last receive the redrive
	// policy allows) when the work may have an inbox record already: the
	// SQS message id of the delivery it re-sent. Like AttrRedrivenFrom and
	// AttrFailureCode, it tells the worker that the copy must claim its work
	// through the gate, which reads the record, never by its commit.
	AttrResentFrom = "ddbworker.resentFrom"
	// AttrHeldLease is set by the worker on a message it re-sends while its
	// delivery holds a lease it could not give back (the database was
	// down): the lease's item and token, which the copy's claim presents
	// to get the lease back instead of taking it over.
	AttrHeldLease = "ddbworker.heldLease"
	// AttrFirstSentAt is when the work's first message was sent (epoch ms):
	// the worker's DLQ copy, its re-sends of deferred messages and Redrive
	// carry it forward, so every copy knows its true age. The worker refuses
	// a message older than it keeps COMPLETED records
	// (REPLAY_WINDOW_EXPIRED), and Redrive does not send one.
	AttrFirstSentAt = "ddbworker.firstSentAt"
	// AttrPrefix starts every ddbworker attribute; Redrive strips them.
	AttrPrefix = "ddbworker."
)

// Placeholders for what a DLQ message does not say.
const (
	// CodeNone is the failure code of a message without AttrFailureCode:
	// SQS's redrive policy moved it (or another sender put it there).
	CodeNone = "(none: redrive policy)"
	// TypeUnreadable is the message type of a message whose type is neither
	// an attribute nor readable from a JSON envelope in its body.
	TypeUnreadable = "(unreadable)"
)

// maxBatch is SQS's limit of entries per batch call and messages per receive.
const maxBatch = sqsbatch.MaxEntries

// The defaults of Config, applied by WithDefaults.
const (
	DefaultHide           = 30 * time.Second
	DefaultWaitTime       = time.Second
	DefaultEmptyReceives  = 2
	DefaultMaxScan        = 100_000
	DefaultReleaseTimeout = 30 * time.Second
)

// API is what this package needs of SQS; *sqs.Client implements it.
type API interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Config configures a Queue.
type Config struct {
	// DLQURL is the dead-letter queue. Required. A URL ending in ".fifo"
	// is a FIFO queue.
	DLQURL string
	// QueueURL is the work queue Redrive sends to. Default: none; Redrive
	// (but not a dry run) requires it. A URL ending in ".fifo" gets each
	// message's MessageGroupId and a MessageDeduplicationId.
	QueueURL string
	// Hide is the visibility timeout of every receive: how long a scan may
	// hold what it received before it makes it visible again. Keep it above
	// the operation's duration; a message whose Hide ran out mid-scan is
	// received again and counted once. Default: DefaultHide. Whole
	// seconds, 1s..12h.
	Hide time.Duration
	// WaitTime is the long-poll wait of each receive. Default:
	// DefaultWaitTime. 0..20s.
	WaitTime time.Duration
	// EmptyReceives ends a scan after this many receives in a row brought
	// no message it had not seen. Default: DefaultEmptyReceives.
	EmptyReceives int
	// MaxScan bounds the messages one Stats, Peek or Redrive receives (and
	// holds hidden). Default: DefaultMaxScan (100,000: below SQS's 120,000
	// in-flight limit).
	MaxScan int
	// ReleaseTimeout bounds the calls that make held messages visible again
	// and that delete moved ones; they run on a context detached from the
	// caller's, so that a cancelled operation still releases everything.
	// Default: DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Queue reads and replays one dead-letter queue. It is safe for concurrent
// use, but concurrent scans of one DLQ hide messages from each other.
type Queue struct {
	api   API
	cfg   Config
	sleep func(ctx context.Context, d time.Duration) error
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Hide = cmp.Or(c.Hide, DefaultHide)
	c.WaitTime = cmp.Or(c.WaitTime, DefaultWaitTime)
	c.EmptyReceives = cmp.Or(c.EmptyReceives, DefaultEmptyReceives)
	c.MaxScan = cmp.Or(c.MaxScan, DefaultMaxScan)
	c.ReleaseTimeout = cmp.Or(c.ReleaseTimeout, DefaultReleaseTimeout)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if c.DLQURL == "" {
		errs = append(errs, errors.New("dlq: Config.DLQURL is required"))
	}
	if c.QueueURL != "" && c.QueueURL == c.DLQURL {
		errs = append(errs, errors.New("dlq: Config.QueueURL must not be the DLQ itself"))
	}
	if c.Hide < time.Second || c.Hide > 12*time.Hour || c.Hide%time.Second != 0 {
		errs = append(errs, fmt.Errorf("dlq: Config.Hide %s must be whole seconds within 1s..12h", c.Hide))
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second || c.WaitTime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("dlq: Config.WaitTime %s must be whole seconds within 0..20s", c.WaitTime))
	}
	if c.EmptyReceives < 1 {
		errs = append(errs, fmt.Errorf("dlq: Config.EmptyReceives %d must be at least 1", c.EmptyReceives))
	}
	if c.MaxScan < 1 {
		errs = append(errs, fmt.Errorf("dlq: Config.MaxScan %d must be at least 1", c.MaxScan))
	}
	if c.ReleaseTimeout < 0 {
		errs = append(errs, errors.New("dlq: Config.ReleaseTimeout must not be negative"))
	}
	return errs
}

// New applies cfg's defaults (WithDefaults), validates it and returns a
// Queue; every problem is reported, joined.
func New(api API, cfg Config) (*Queue, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("dlq: API is required"))
	}
	cfg = cfg.WithDefaults()
	if err := errors.Join(append(errs, cfg.validate()...)...); err != nil {
		return nil, err
	}
	return &Queue{api: api, cfg: cfg, sleep: sleepCtx}, nil
}

// Config returns the configuration with its defaults applied.
func (q *Queue) Config() Config { return q.cfg }

// Message is one DLQ message as a scan saw it.
type Message struct {
	// ID is the message's SQS id in the DLQ.
	ID string `json:"id"`
	// FailureCode is AttrFailureCode, or CodeNone.
	FailureCode string `json:"failureCode"`
	// FailureMessage is AttrFailureMessage ("" without one).
	FailureMessage string `json:"failureMessage,omitempty"`
	// FailedAt is AttrFailedAt (zero without one).
	FailedAt time.Time `json:"failedAt,omitzero"`
	// SourceMessageID is the work queue's message id the worker failed
	// (AttrSourceMessageID; "" without one).
	SourceMessageID string `json:"sourceMessageId,omitempty"`
	// MessageType is AttrMessageType, else the envelope's messageType read
	// from the body, else TypeUnreadable.
	MessageType string `json:"messageType"`
	// IdempotencyKey is AttrIdempotencyKey, else the envelope's from the
	// body ("" when neither says).
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// GroupID is the message's MessageGroupId ("": none): a FIFO DLQ's
	// group, a standard DLQ's tenant (SQS fair queues). Redrive keeps it.
	GroupID string `json:"groupId,omitempty"`
	// SentAt is when the message was sent to the DLQ — or, after a move by
	// the redrive policy, to the work queue (SQS keeps SentTimestamp).
	SentAt time.Time `json:"sentAt,omitzero"`
	// FirstSentAt is when the work's first message was sent: the earliest
	// of AttrFirstSentAt and SentAt.
	FirstSentAt time.Time `json:"firstSentAt,omitzero"`
	// ReceiveCount is ApproximateReceiveCount, this scan's receive included.
	ReceiveCount int `json:"receiveCount"`
	// Body is the original message body.
	Body string `json:"body"`
	// Payload is the body a route reads inside a well-known wrapper: an
	// SNS notification's Message (raw message delivery off), an
	// EventBridge event's detail, or both unwrapped in turn; "" when the
	// body has no such wrapper (then the body is what a route reads).
	Payload string `json:"payload,omitempty"`
	// Wrapper names the wrappers Payload was unwrapped from: WrapperSNS,
	// WrapperEventBridge, or both joined by "+" ("" without one).
	Wrapper string `json:"wrapper,omitempty"`
	// Attributes are every message attribute, the ddbworker.* ones included.
	Attributes map[string]types.MessageAttributeValue `json:"-"`
	// AWSTraceHeader is the AWSTraceHeader system attribute ("": none): the
	// X-Ray trace header of the message's producer, which a redrive keeps
	// as traceparent when the message carries no traceparent of its own.
	AWSTraceHeader string `json:"-"`

	receipt string
}

// FromWorker reports whether the worker's terminal policy put the message
// there (it carries AttrFailureCode).
func (m *Message) FromWorker() bool {
	_, ok := m.Attributes[AttrFailureCode]
	return ok
}

// ProducerAttributes are the message attributes without the ddbworker.*
// ones: what the producer sent.
func (m *Message) ProducerAttributes() map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(m.Attributes))
	for k, v := range m.Attributes {
		if !strings.HasPrefix(k, AttrPrefix) {
			out[k] = v
		}
	}
	return out
}

// bodyEnvelope is the part of the JSON envelope a DLQ reader needs; the
// body is not validated (envelope.Decode's job, in the worker).
type bodyEnvelope struct {
	MessageType    string `json:"messageType"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// parse reads an SQS message into a Message.
func parse(m types.Message) Message {
	attr := func(name string) string {
		if a, ok := m.MessageAttributes[name]; ok {
			return aws.ToString(a.StringValue)
		}
		return ""
	}
	sys := func(name types.MessageSystemAttributeName) string { return m.Attributes[string(name)] }
	out := Message{
		ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Attributes: m.MessageAttributes,
		FailureCode: attr(AttrFailureCode), FailureMessage: attr(AttrFailureMessage),
		SourceMessageID: attr(AttrSourceMessageID), MessageType: attr(AttrMessageType), IdempotencyKey: attr(AttrIdempotencyKey),
		GroupID: sys(types.MessageSystemAttributeNameMessageGroupId), receipt: aws.ToString(m.ReceiptHandle),
		AWSTraceHeader: sys(types.MessageSystemAttributeNameAWSTraceHeader),
	}
	if out.Attributes == nil {
		out.Attributes = map[string]types.MessageAttributeValue{}
	}
	if out.FailureCode == "" {
		out.FailureCode = CodeNone
	}
	if s := attr(AttrFailedAt); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			out.FailedAt = t.UTC()
		}
	}
	if ms, err := strconv.ParseInt(sys(types.MessageSystemAttributeNameSentTimestamp), 10, 64); err == nil {
		out.SentAt = time.UnixMilli(ms).UTC()
	}
	out.FirstSentAt = out.SentAt
	if ms, err := strconv.ParseInt(attr(AttrFirstSentAt), 10, 64); err == nil && ms > 0 {
		if t := time.UnixMilli(ms).UTC(); out.FirstSentAt.IsZero() || t.Before(out.FirstSentAt) {
			out.FirstSentAt = t
		}
	}
	out.ReceiveCount, _ = strconv.Atoi(sys(types.MessageSystemAttributeNameApproximateReceiveCount))
	out.Payload, out.Wrapper = unwrap(out.Body)
	if out.MessageType == "" || out.IdempotencyKey == "" {
		var env bodyEnvelope
		if json.Unmarshal([]byte(cmp.Or(out.Payload, out.Body)), &env) == nil {
			out.MessageType = firstNonEmpty(out.MessageType, env.MessageType)
			out.IdempotencyKey = firstNonEmpty(out.IdempotencyKey, env.IdempotencyKey)
		}
	}
	if out.MessageType == "" {
		out.MessageType = TypeUnreadable
	}
	return out
}

// The wrappers Message.Wrapper names.
const (
	WrapperSNS         = "sns"
	WrapperEventBridge = "eventbridge"
)

// unwrap finds the body a route reads inside the well-known wrappers a
// DLQ message may carry — an SNS notification (Type "Notification", a
// TopicArn and a string Message), an EventBridge event (detail-type,
// source and an object detail), or an SNS notification of an EventBridge
// event — as the envelope package's adapters do (envelope.Adapters). The
// tooling does not know the routes: these two shapes are the ones it can
// recognise without them. payload is "" when the body has no wrapper.
func unwrap(body string) (payload, wrapper string) {
	var doc map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &doc) != nil {
		return "", ""
	}
	var wrappers []string
	var typ, arn, msg string
	if json.Unmarshal(doc["Type"], &typ) == nil && typ == "Notification" && json.Unmarshal(doc["TopicArn"], &arn) == nil && arn != "" &&
		json.Unmarshal(doc["Message"], &msg) == nil {
		wrappers, payload = append(wrappers, WrapperSNS), msg
		doc = nil
		_ = json.Unmarshal([]byte(msg), &doc)
	}
	var dt, src string
	if detail := doc["detail"]; len(detail) > 0 && detail[0] == '{' && json.Unmarshal(doc["detail-type"], &dt) == nil &&
		json.Unmarshal(doc["source"], &src) == nil {
		wrappers, payload = append(wrappers, WrapperEventBridge), string(detail)
	}
	return payload, strings.Join(wrappers, "+")
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isFIFO(url string) bool { return strings.HasSuffix(url, ".fifo") }

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
