package ddbworkertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ddbworker/ddbworker/envelope"
)

// Defaults of the envelope NewMessage builds.
const (
	DefaultKey           = "test-key"
	DefaultMessageID     = "test-message"
	DefaultProducer      = "ddbworkertest"
	DefaultAggregateType = "Test"
	DefaultAggregateID   = "test-aggregate"
	DefaultSQSMessageID  = "test-sqs-message"
)

// DefaultOccurredAt is the occurredAt of the envelope NewMessage builds: a
// fixed time, so that what a handler derives from it is the same on every
// run.
var DefaultOccurredAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Message is one delivery for Worker.Work: an envelope the kit built
// (NewMessage), an envelope the test built (FromEnvelope), or a raw SQS body
// (FromBody). Work sends each through the worker's real envelope decoder —
// and a raw body through the registry's body adapters as the worker does
// (an SNS notification, an EventBridge event, a service's own JSON) — so a
// body the worker would reject is rejected here with the same code.
type Message struct {
	env          *envelope.Envelope // nil for a raw body
	body         []byte
	err          error
	edits        []func(*envelope.Envelope)
	attempt      int
	receiveCount int
	attributes   map[string]string
}

// Option adjusts a Message: its envelope's fields (Key, Aggregate,
// AggregateVersion, AttemptPolicy, OccurredAt, Edit; not for FromBody) or
// the delivery (Attempt, ReceiveCount, Attribute).
type Option func(*Message)

// NewMessage builds a valid envelope of messageType carrying payload:
// payload is marshalled with encoding/json (a json.RawMessage or []byte is
// taken as it is). The envelope's other fields have defaults — key
// DefaultKey, messageId DefaultMessageID, producer DefaultProducer,
// aggregate DefaultAggregateType/DefaultAggregateID, occurredAt
// DefaultOccurredAt, no aggregateVersion, no attemptPolicy — which opts
// change. The delivery is attempt 1, received once.
func NewMessage(messageType string, payload any, opts ...Option) Message {
	var raw []byte
	var err error
	switch p := payload.(type) {
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		raw, err = json.Marshal(payload)
		if err != nil {
			err = fmt.Errorf("ddbworkertest: NewMessage(%q): payload: %w", messageType, err)
		}
	}
	env := &envelope.Envelope{
		MessageID: DefaultMessageID, SchemaVersion: envelope.SchemaV1, MessageType: messageType,
		Producer: DefaultProducer, OccurredAt: DefaultOccurredAt, IdempotencyKey: DefaultKey,
		AggregateType: DefaultAggregateType, AggregateID: DefaultAggregateID, Payload: raw,
	}
	return newMessage(Message{env: env, err: err}, opts)
}

// FromEnvelope delivers a copy of env (changed by opts). Work encodes it as
// a producer would send it, without validating it, and decodes it: an
// invalid envelope is rejected as the worker rejects it.
func FromEnvelope(env *envelope.Envelope, opts ...Option) Message {
	if env == nil {
		return Message{err: errors.New("ddbworkertest: FromEnvelope: nil envelope")}
	}
	c := *env
	if env.AttemptPolicy != nil {
		ap := *env.AttemptPolicy
		c.AttemptPolicy = &ap
	}
	return newMessage(Message{env: &c}, opts)
}

// FromBody delivers body as the SQS message body, as it is: the way to test
// what the worker does with a body that is not a valid envelope, and with a
// body an adapted route reads (ddbworker.Adapt: an SNS notification as the
// queue receives it, an EventBridge event, a service's own JSON). The
// delivery's SQS MessageId is DefaultSQSMessageID and its SentTimestamp
// DefaultOccurredAt (the messageId and occurredAt of a body that names
// none). Only the delivery's options (Attempt, ReceiveCount, Attribute)
// apply to it.
func FromBody(body []byte, opts ...Option) Message {
	return newMessage(Message{body: bytes.Clone(body)}, opts)
}

func newMessage(m Message, opts []Option) Message {
	m.attempt, m.receiveCount = 1, 1
	for _, o := range opts {
		o(&m)
	}
	if m.env == nil && len(m.edits) > 0 && m.err == nil {
		m.err = errors.New("ddbworkertest: FromBody: an envelope option (Key, Aggregate, AggregateVersion, AttemptPolicy, OccurredAt, Edit) does not apply to a raw body")
	}
	for _, e := range m.edits {
		if m.env != nil {
			e(m.env)
		}
	}
	return m
}

func edit(f func(*envelope.Envelope)) Option {
	return func(m *Message) { m.edits = append(m.edits, f) }
}

// Key sets the idempotency key.
func Key(key string) Option { return edit(func(e *envelope.Envelope) { e.IdempotencyKey = key }) }

// Aggregate sets the aggregate type and id.
func Aggregate(aggregateType, aggregateID string) Option {
	return edit(func(e *envelope.Envelope) { e.AggregateType, e.AggregateID = aggregateType, aggregateID })
}

// AggregateVersion sets the envelope's aggregateVersion.
func AggregateVersion(v int64) Option {
	return edit(func(e *envelope.Envelope) { e.AggregateVersion = &v })
}

// AttemptPolicy sets the envelope's attemptPolicy: its maxBusinessAttempts,
// retryableUntil and terminalAfterCodes decide, as in the worker, whether a
// failure of this attempt is retried.
func AttemptPolicy(p envelope.AttemptPolicy) Option {
	return edit(func(e *envelope.Envelope) { e.AttemptPolicy = &p })
}

// OccurredAt sets occurredAt.
func OccurredAt(t time.Time) Option { return edit(func(e *envelope.Envelope) { e.OccurredAt = t }) }

// Edit changes the envelope in any other way (messageId, producer,
// causationId, correlationId, payload, schemaVersion…). Options apply in
// the order given.
func Edit(f func(e *envelope.Envelope)) Option { return edit(f) }

// Attempt sets the business attempt this delivery runs as
// (Message.Attempt; default 1). The worker counts an attempt when it
// records a business failure, so attempt n is the run after n-1 recorded
// failures (infrastructure trouble counts none). The attempts policy
// judges a failure by it: a retryable failure of the last attempt ends
// terminal MAX_ATTEMPTS_EXCEEDED.
func Attempt(n int) Option { return func(m *Message) { m.attempt = n } }

// ReceiveCount sets SQS's ApproximateReceiveCount the handler sees
// (Message.ReceiveCount; default 1).
func ReceiveCount(n int) Option { return func(m *Message) { m.receiveCount = n } }

// Attribute sets an SQS message attribute of the delivery (a String): what
// a JSONBody's TypeAttribute reads of a body on SQS or delivered raw by SNS.
func Attribute(name, value string) Option {
	return func(m *Message) {
		if m.attributes == nil {
			m.attributes = map[string]string{}
		}
		m.attributes[name] = value
	}
}

// encode returns the message's SQS body.
func (m Message) encode() ([]byte, error) {
	if m.err != nil {
		return nil, m.err
	}
	if m.env == nil {
		return m.body, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m.env); err != nil {
		return nil, fmt.Errorf("ddbworkertest: the envelope does not marshal (deliver its bytes with FromBody): %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
