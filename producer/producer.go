package producer

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/groupid"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

// API is what the producer needs of SQS.
type API interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Offloader stores a large payload outside the message (in S3) and returns
// the reference the envelope carries instead. The bytes it stores must be
// exactly payload: the worker checks SHA256 and Size against what it reads.
type Offloader interface {
	Offload(ctx context.Context, messageType string, payload []byte) (envelope.PayloadRef, error)
}

// The defaults of Config's zero fields, applied by WithDefaults.
const (
	DefaultOffloadAbove    = 200 << 10 // bytes of payload
	DefaultMaxMessageBytes = 256 << 10 // a queue's MaximumMessageSize unless raised (at most 1 MiB)
	DefaultDLQHeadroom     = 8 << 10   // room for the failure attributes of the worker's DLQ copy
	DefaultMaxBatchBytes   = 256 << 10 // one SendMessageBatch call, bodies and attributes (at least MaxMessageBytes)
	DefaultMaxAttempts     = 3
	DefaultRetryDelay      = 100 * time.Millisecond
)

// SQS's own limits.
const (
	maxSQSBytes = sqsbatch.MaxMessageBytes
	maxDelay    = 15 * time.Minute
)

// Config configures a Producer.
type Config struct {
	// QueueURL is the queue messages are sent to. Required. A URL ending in
	// ".fifo" is a FIFO queue: each message gets a MessageGroupId (GroupID)
	// and a MessageDeduplicationId, and a batch holds at most one message
	// per group so that a failure cannot reorder a group. On a standard
	// queue a message's MessageGroupId is its tenant (Tenant), when it has
	// one.
	QueueURL string
	// Producer is the envelope's producer field: the sending service's name.
	// Required.
	Producer string
	// Envelope is the configuration of the worker's decoder
	// (worker.Config.Envelope); every body is decoded with it before it is
	// sent. Default: envelope's defaults (zero Config), which is what the
	// worker uses unless configured otherwise.
	Envelope envelope.Config
	// Offloader stores payloads larger than OffloadAbove and sends a
	// payloadRef instead. Default: nil, payloads are always inline.
	Offloader Offloader
	// OffloadAbove is the payload size in bytes above which the Offloader
	// takes the payload (only with an Offloader). Default:
	// DefaultOffloadAbove (200 KiB). The choice depends only on the
	// payload's bytes, so the same work is always sent the same way (the
	// request hash covers a reference's content, not the inline payload).
	OffloadAbove int
	// MaxMessageBytes is the queue's MaximumMessageSize: body plus message
	// attributes. Default: DefaultMaxMessageBytes (256 KiB); at most 1 MiB.
	MaxMessageBytes int
	// DLQHeadroom is kept free under MaxMessageBytes for the attributes the
	// worker adds to a dead-lettered copy (failure code and message, key,
	// type, times: up to about 5 KiB). Default: DefaultDLQHeadroom (8 KiB);
	// -1 for none.
	DLQHeadroom int
	// MaxBatchBytes bounds one SendMessageBatch call (bodies and
	// attributes); a message larger than it is sent alone, in a call of
	// its own. Default: MaxMessageBytes, and at least 256 KiB (a queue
	// that takes messages over 256 KiB is on an SQS that takes calls of
	// 1 MiB); at most 1 MiB.
	MaxBatchBytes int
	// MaxAttempts bounds how often an entry SQS failed on its side
	// (SenderFault false) is offered again. Call errors are retried by the
	// SDK's retryer, not here. Default: DefaultMaxAttempts.
	MaxAttempts int
	// RetryDelay is the first pause before re-offering failed entries,
	// doubled each time, with jitter. Default: DefaultRetryDelay.
	RetryDelay time.Duration
	// GroupID is a FIFO message's MessageGroupId. Default: the aggregateId,
	// so each aggregate's messages stay in order.
	GroupID func(*envelope.Envelope) string
	// Tenant is the tenant of a message whose Message.Tenant is empty (and
	// of every envelope SendEnvelopes sends): on a standard queue it is the
	// message's MessageGroupId, which makes the queue an SQS fair queue —
	// SQS serves the other tenants first while one holds a disproportionate
	// share of the in-flight messages — and which the worker's DLQ copies,
	// re-sends and the DLQ redrive keep. "" sends none. On a FIFO queue the
	// MessageGroupId is the order group (GroupID) and the tenant is not
	// sent. A tenant SQS would refuse (empty is none; over 128 characters,
	// or other than ASCII letters, digits and punctuation) fails its message
	// with ErrInvalid and a *TenantError, on either kind of queue. It is
	// called with the message's envelope, payload inline (before an
	// Offloader takes it). Default: nil, no tenant.
	Tenant func(*envelope.Envelope) string
	// DeduplicationID is a FIFO message's MessageDeduplicationId. Default:
	// the hex SHA-256 of the idempotency key and the request hash, so SQS
	// drops a re-send of the same work within its 5-minute window.
	DeduplicationID func(*envelope.Envelope) string
	// Now is the clock for occurredAt. Default: time.Now.
	Now func() time.Time
	// NewMessageID mints messageIds. Default: a random UUID (version 4).
	NewMessageID func() string
}

// Message is one unit of work to send. The producer adds messageId,
// schemaVersion, producer and occurredAt.
type Message struct {
	// MessageType names the operation (the consumer's handler). Required.
	MessageType string
	// IdempotencyKey identifies the work, from the domain (an order id and
	// what is done to it), never random: a re-send of the same work must
	// carry the same key. Required.
	IdempotencyKey string
	// AggregateType and AggregateID name the entity. Required.
	AggregateType, AggregateID string
	// AggregateVersion is the entity's version the work was decided on.
	// Optional; part of the request hash.
	AggregateVersion *int64
	// CausationID and CorrelationID are optional tracing ids.
	CausationID, CorrelationID string
	// AttemptPolicy optionally bounds the consumer's retries.
	AttemptPolicy *envelope.AttemptPolicy
	// Payload is marshalled with encoding/json; a json.RawMessage is sent
	// as it is. Required (not nil).
	Payload any
	// OccurredAt is when the work was decided. Default: Config.Now().
	OccurredAt time.Time
	// Attributes are SQS message attributes sent with the message (not
	// part of the envelope). Names must not start with "ddbworker.". The
	// context of Send's span is added as traceparent and tracestate
	// (package tracing) while the attributes leave room within SQS's 10;
	// a traceparent of the message's own is kept.
	Attributes map[string]types.MessageAttributeValue
	// Delay postpones delivery (standard queues only; at most 15 minutes).
	Delay time.Duration
	// Tenant is the message's tenant — the customer, client application or
	// account it is for — sent on a standard queue as its MessageGroupId
	// (SQS fair queues; see Config.Tenant, which it overrides). Optional.
	Tenant string
}

// Result is what became of one message of a Send.
type Result struct {
	// Envelope is the envelope as the worker will decode it (RequestHash
	// set), or nil when it could not be built.
	Envelope *envelope.Envelope
	// SQSMessageID and SequenceNumber (FIFO) are SQS's, when sent.
	SQSMessageID, SequenceNumber string
	// Offloaded reports that the payload travels as a payloadRef.
	Offloaded bool
	// Err is nil when SQS accepted the message, else an *EntryError.
	Err error
}

// Producer sends envelopes. It is safe for concurrent use.
type Producer struct {
	api  API
	cfg  Config
	dec  *envelope.Decoder
	fifo bool
}

// WithDefaults returns c with every zero field set to its default, and a
// DLQHeadroom of -1 (none) as 0: apply it once (New does).
func (c Config) WithDefaults() Config {
	c.OffloadAbove = cmp.Or(c.OffloadAbove, DefaultOffloadAbove)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, DefaultMaxMessageBytes)
	// At least a message's size: an invalid MaxMessageBytes is reported
	// once, for itself.
	c.MaxBatchBytes = cmp.Or(c.MaxBatchBytes, max(DefaultMaxBatchBytes, min(c.MaxMessageBytes, maxSQSBytes)))
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	switch c.DLQHeadroom {
	case 0:
		c.DLQHeadroom = DefaultDLQHeadroom
	case -1:
		c.DLQHeadroom = 0
	}
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	if c.GroupID == nil {
		c.GroupID = func(e *envelope.Envelope) string { return e.AggregateID }
	}
	if c.DeduplicationID == nil {
		c.DeduplicationID = deduplicationID
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewMessageID == nil {
		c.NewMessageID = newMessageID
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if c.QueueURL == "" {
		errs = append(errs, errors.New("producer: Config.QueueURL is required"))
	}
	if c.Producer == "" {
		errs = append(errs, errors.New("producer: Config.Producer is required"))
	}
	for _, l := range []struct {
		name   string
		v, max int
	}{{"OffloadAbove", c.OffloadAbove, maxSQSBytes}, {"MaxMessageBytes", c.MaxMessageBytes, maxSQSBytes},
		{"MaxBatchBytes", c.MaxBatchBytes, maxSQSBytes}, {"MaxAttempts", c.MaxAttempts, 100}} {
		if l.v < 1 || l.v > l.max {
			errs = append(errs, fmt.Errorf("producer: Config.%s %d must be within 1..%d", l.name, l.v, l.max))
		}
	}
	if c.DLQHeadroom < 0 {
		errs = append(errs, fmt.Errorf("producer: Config.DLQHeadroom %d must be positive, or -1 for none", c.DLQHeadroom))
	}
	if c.DLQHeadroom >= c.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("producer: Config.DLQHeadroom %d leaves no room under MaxMessageBytes %d", c.DLQHeadroom, c.MaxMessageBytes))
	}
	if c.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("producer: Config.RetryDelay %s must not be negative", c.RetryDelay))
	}
	return errs
}

// New applies cfg's defaults (WithDefaults), validates it and returns a
// Producer; all problems are reported together.
func New(api API, cfg Config) (*Producer, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("producer: API is required"))
	}
	cfg = cfg.WithDefaults()
	errs = append(errs, cfg.validate()...)
	dec, err := envelope.NewDecoder(cfg.Envelope)
	if err != nil {
		errs = append(errs, fmt.Errorf("producer: Config.Envelope: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Producer{api: api, cfg: cfg, dec: dec, fifo: strings.HasSuffix(cfg.QueueURL, ".fifo")}, nil
}

// deduplicationID is the default FIFO MessageDeduplicationId: the hex
// SHA-256 of the idempotency key and the request hash (64 characters, as
// SQS allows at most 128).
func deduplicationID(e *envelope.Envelope) string {
	h := sha256.New()
	h.Write([]byte(e.IdempotencyKey))
	h.Write([]byte{0})
	h.Write([]byte(e.RequestHash))
	return hex.EncodeToString(h.Sum(nil))
}

// newMessageID returns a random (version 4) UUID.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Envelope builds m's envelope as Send would (a new messageId, occurredAt,
// the producer) and validates it with the worker's decoder, without
// offloading or sending it. The error is an *envelope.Error.
func (p *Producer) Envelope(m Message) (*envelope.Envelope, error) {
	e, err := p.build(m)
	if err != nil {
		return nil, err
	}
	body, err := envelope.Encode(e)
	if err != nil {
		return nil, err
	}
	return p.dec.Decode(body)
}

func (p *Producer) build(m Message) (*envelope.Envelope, error) {
	var payload []byte
	switch v := m.Payload.(type) {
	case nil:
	case json.RawMessage:
		payload = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &envelope.Error{Code: envelope.CodeInvalidField, Field: "payload", Reason: "cannot marshal the payload", Err: err}
		}
		payload = b
	}
	occurred := m.OccurredAt
	if occurred.IsZero() {
		occurred = p.cfg.Now()
	}
	return &envelope.Envelope{
		MessageID: p.cfg.NewMessageID(), SchemaVersion: envelope.SchemaV1, MessageType: m.MessageType,
		Producer: p.cfg.Producer, OccurredAt: occurred, IdempotencyKey: m.IdempotencyKey,
		AggregateType: m.AggregateType, AggregateID: m.AggregateID, AggregateVersion: m.AggregateVersion,
		CausationID: m.CausationID, CorrelationID: m.CorrelationID, AttemptPolicy: m.AttemptPolicy,
		Payload: payload,
	}, nil
}

// entry is one message on its way.
type entry struct {
	index    int
	env      *envelope.Envelope // as decoded from body
	req      types.SendMessageBatchRequestEntry
	size     int
	group    string
	attempts int
}

// Send builds, validates and sends msgs, in order, in as few
// SendMessageBatch calls as the limits allow. It returns one Result per
// message, in msgs' order, and an error joining every Result's Err (nil
// when all were sent). A message that fails never stops the others, except
// that on a FIFO queue the later messages of its group are held back
// (ErrGroupBlocked), whatever the failure (an invalid message too).
func (p *Producer) Send(ctx context.Context, msgs ...Message) ([]Result, error) {
	envs := make([]*envelope.Envelope, len(msgs))
	results := make([]Result, len(msgs))
	for i, m := range msgs {
		e, err := p.build(m)
		if err != nil {
			results[i].Err = &EntryError{Index: i, IdempotencyKey: m.IdempotencyKey, Kind: ErrInvalid, Err: err,
				group: p.cfg.GroupID(&envelope.Envelope{MessageType: m.MessageType, IdempotencyKey: m.IdempotencyKey,
					AggregateType: m.AggregateType, AggregateID: m.AggregateID})}
			continue
		}
		envs[i] = e
	}
	extra := func(i int) extras {
		return extras{attrs: msgs[i].Attributes, delay: msgs[i].Delay, tenant: msgs[i].Tenant}
	}
	return p.send(ctx, envs, results, extra)
}

// SendEnvelopes sends envelopes built elsewhere (by an outbox, or by hand):
// a missing messageId, occurredAt or producer is filled in (on a copy),
// everything else is sent as given after the same validation as Send.
func (p *Producer) SendEnvelopes(ctx context.Context, envs ...*envelope.Envelope) ([]Result, error) {
	own := make([]*envelope.Envelope, len(envs))
	results := make([]Result, len(envs))
	for i, e := range envs {
		if e == nil {
			results[i].Err = &EntryError{Index: i, Kind: ErrInvalid, Err: errors.New("nil envelope")}
			continue
		}
		c := *e
		if c.MessageID == "" {
			c.MessageID = p.cfg.NewMessageID()
		}
		if c.OccurredAt.IsZero() {
			c.OccurredAt = p.cfg.Now()
		}
		if c.Producer == "" {
			c.Producer = p.cfg.Producer
		}
		own[i] = &c
	}
	return p.send(ctx, own, results, func(int) extras { return extras{} })
}

// extras are what a Message says beside its envelope.
type extras struct {
	attrs  map[string]types.MessageAttributeValue
	delay  time.Duration
	tenant string // "": Config.Tenant's
}

func (p *Producer) send(ctx context.Context, envs []*envelope.Envelope, results []Result, extra func(int) extras) ([]Result, error) {
	// blocked maps a FIFO group to the index of its first message that was
	// not sent: its later messages are held back.
	blocked := map[string]int{}
	block := func(group string, index int) {
		if first, ok := blocked[group]; p.fifo && (!ok || index < first) {
			blocked[group] = index
		}
	}
	var pending []*entry
	for i, e := range envs {
		if e == nil {
			var ee *EntryError
			if errors.As(results[i].Err, &ee) {
				block(ee.group, i)
			}
			continue
		}
		en, offloaded, err := p.prepare(ctx, i, e, extra(i))
		results[i].Offloaded = offloaded
		if err != nil {
			results[i].Err = err
			block(p.cfg.GroupID(e), i)
			continue
		}
		results[i].Envelope = en.env
		pending = append(pending, en)
	}
	fail := func(en *entry, err *EntryError) {
		err.Index, err.MessageID, err.IdempotencyKey, err.Attempts = en.index, en.env.MessageID, en.env.IdempotencyKey, en.attempts
		results[en.index].Err = err
		block(en.group, en.index)
	}
	delay := p.cfg.RetryDelay
	for len(pending) > 0 {
		var retry []*entry
		deferred := map[string]bool{} // FIFO groups with a message to offer again
		for len(pending) > 0 {
			batch, rest, held, later := p.nextBatch(pending, blocked, deferred)
			for _, en := range held {
				fail(en, &EntryError{Kind: ErrGroupBlocked})
			}
			retry = append(retry, later...)
			pending = rest
			if len(batch) == 0 {
				break
			}
			again := p.sendBatch(ctx, batch, results, fail)
			for _, en := range again {
				if p.fifo {
					deferred[en.group] = true
				}
			}
			retry = append(retry, again...)
		}
		if len(retry) == 0 {
			break
		}
		// In their original order: a FIFO group's messages follow each other.
		sortByIndex(retry)
		if err := sleep(ctx, delay); err != nil {
			for _, en := range retry {
				fail(en, &EntryError{Kind: ErrSend, Err: err})
			}
			break
		}
		delay *= 2
		pending = retry
	}
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return results, errors.Join(errs...)
}

// prepare offloads, encodes, validates and sizes one envelope.
func (p *Producer) prepare(ctx context.Context, i int, e *envelope.Envelope, x extras) (*entry, bool, error) {
	attrs, delay := x.attrs, x.delay
	ee := &EntryError{Index: i, MessageID: e.MessageID, IdempotencyKey: e.IdempotencyKey}
	offloaded := false
	// The tenant first: Config.Tenant sees the payload inline, and nothing
	// is offloaded for a message that is not sent.
	tenant := x.tenant
	if tenant == "" && p.cfg.Tenant != nil {
		tenant = p.cfg.Tenant(e)
	}
	if tenant != "" {
		// Refused here, for itself: SQS would refuse the whole entry with
		// a bare InvalidParameterValue, and a tenant quietly left out would
		// put the message in no tenant's share.
		if reason := groupid.Problem(tenant); reason != "" {
			ee.Kind, ee.Err = ErrInvalid, &TenantError{Tenant: tenant, Reason: reason}
			return nil, false, ee
		}
	}
	if p.cfg.Offloader != nil && e.PayloadRef == nil && len(e.Payload) > p.cfg.OffloadAbove {
		// Validate before storing anything.
		if _, err := envelope.Encode(e); err != nil {
			ee.Kind, ee.Err = ErrInvalid, err
			return nil, false, ee
		}
		ref, err := p.cfg.Offloader.Offload(ctx, e.MessageType, e.Payload)
		if err != nil {
			ee.Kind, ee.Err = ErrOffload, err
			return nil, false, ee
		}
		e.Payload, e.PayloadRef, offloaded = nil, &ref, true
	}
	body, err := envelope.Encode(e)
	if err == nil {
		e, err = p.dec.Decode(body)
	}
	if err != nil {
		ee.Kind, ee.Err = ErrInvalid, err
		return nil, offloaded, ee
	}
	for name := range attrs {
		if strings.HasPrefix(name, "ddbworker.") {
			ee.Kind, ee.Err = ErrInvalid, fmt.Errorf("message attribute %q: the ddbworker. prefix is the worker's", name)
			return nil, offloaded, ee
		}
	}
	// The sender's trace context (ctx's span) travels as traceparent and
	// tracestate, unless the message carries its own traceparent or its
	// attributes leave no room (tracing.Inject).
	attrs = tracing.Inject(ctx, attrs)
	size := sqsbatch.MessageSize(string(body), attrs)
	if limit := p.cfg.MaxMessageBytes - p.cfg.DLQHeadroom; size > limit {
		ee.Kind, ee.Err = ErrTooLarge, fmt.Errorf("%d bytes with attributes, limit %d (MaxMessageBytes %d less DLQHeadroom %d)",
			size, limit, p.cfg.MaxMessageBytes, p.cfg.DLQHeadroom)
		return nil, offloaded, ee
	}
	req := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)), MessageAttributes: attrs}
	en := &entry{index: i, env: e, size: size}
	if p.fifo {
		if delay > 0 {
			ee.Kind, ee.Err = ErrInvalid, errors.New("a FIFO queue has no per-message delay")
			return nil, offloaded, ee
		}
		en.group = p.cfg.GroupID(e)
		req.MessageGroupId = aws.String(en.group)
		req.MessageDeduplicationId = aws.String(p.cfg.DeduplicationID(e))
	} else {
		if delay > maxDelay {
			ee.Kind, ee.Err = ErrInvalid, fmt.Errorf("delay %s is longer than SQS's 15 minutes", delay)
			return nil, offloaded, ee
		}
		if delay > 0 {
			req.DelaySeconds = int32(delay / time.Second)
		}
		if tenant != "" {
			// A standard queue's MessageGroupId is the message's tenant
			// (SQS fair queues); messages of one tenant are still
			// delivered in parallel and in no order.
			req.MessageGroupId = aws.String(tenant)
		}
	}
	en.req = req
	return en, offloaded, nil
}

// nextBatch takes, in order, the entries of the next call: at most 10 and
// MaxBatchBytes (sqsbatch's rule: the call's first entry always, so a
// message larger than MaxBatchBytes goes alone), on FIFO queues at most one
// per group, none of a blocked group (returned as held: they fail) and none
// of a deferred group (a message before them will be offered again:
// returned as later, to follow it). The others stay pending, in order.
func (p *Producer) nextBatch(pending []*entry, blocked map[string]int, deferred map[string]bool) (batch, rest, held, later []*entry) {
	size := 0
	limits := sqsbatch.Limits{Bytes: p.cfg.MaxBatchBytes}
	groups := map[string]bool{}
	for _, en := range pending {
		first, isBlocked := blocked[en.group]
		switch {
		case p.fifo && isBlocked && en.index > first:
			held = append(held, en)
		case p.fifo && deferred[en.group]:
			later = append(later, en)
		case limits.Fits(len(batch), size, en.size) && !(p.fifo && groups[en.group]):
			batch = append(batch, en)
			size += en.size
			groups[en.group] = true
		default:
			rest = append(rest, en)
		}
	}
	return batch, rest, held, later
}

// sendBatch makes one call and records its outcome; it returns the entries
// to offer again.
func (p *Producer) sendBatch(ctx context.Context, batch []*entry, results []Result, fail func(*entry, *EntryError)) []*entry {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.cfg.QueueURL)}
	byID := make(map[string]*entry, len(batch))
	for _, en := range batch {
		en.attempts++
		in.Entries = append(in.Entries, en.req)
		byID[aws.ToString(en.req.Id)] = en
	}
	out, err := p.api.SendMessageBatch(ctx, in)
	if err != nil {
		for _, en := range batch {
			fail(en, &EntryError{Kind: ErrSend, Err: err})
		}
		return nil
	}
	for _, ok := range out.Successful {
		en := byID[aws.ToString(ok.Id)]
		if en == nil {
			continue
		}
		delete(byID, aws.ToString(ok.Id))
		results[en.index].SQSMessageID = aws.ToString(ok.MessageId)
		results[en.index].SequenceNumber = aws.ToString(ok.SequenceNumber)
	}
	var retry []*entry
	for _, f := range out.Failed {
		en := byID[aws.ToString(f.Id)]
		if en == nil {
			continue
		}
		delete(byID, aws.ToString(f.Id))
		if !f.SenderFault && en.attempts < p.cfg.MaxAttempts {
			retry = append(retry, en)
			continue
		}
		var cause error
		if m := aws.ToString(f.Message); m != "" {
			cause = errors.New(m)
		}
		fail(en, &EntryError{Kind: ErrSend, Code: aws.ToString(f.Code), SenderFault: f.SenderFault, Err: cause})
	}
	for _, en := range batch { // in neither list: SQS said nothing about it
		if byID[aws.ToString(en.req.Id)] != nil {
			fail(en, &EntryError{Kind: ErrSend, Err: errors.New("SQS reported no result for the entry")})
		}
	}
	return retry
}

func sortByIndex(es []*entry) {
	for k := 1; k < len(es); k++ {
		for j := k; j > 0 && es[j-1].index > es[j].index; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// sleep waits d with ±25 % jitter, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	d = d*3/4 + time.Duration(mrand.Int64N(int64(d)/2+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
