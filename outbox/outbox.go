package outbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/groupid"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/tracing"
)

// Record statuses.
const (
	// StatusPending: written by the producer, not yet published.
	StatusPending = "PENDING"
	// StatusPublished: a relay sent it to its queue and marked it.
	StatusPublished = "PUBLISHED"
)

// Key prefixes.
const (
	// pkPrefix starts every outbox record's partition key; a stream filter
	// (EventBridge Pipes, a Lambda event filter) selects outbox records by it.
	pkPrefix = "OUTBOX#"
	// skPrefix starts every outbox record's sort key.
	skPrefix = "EVENT#"
	// PendingPrefix starts the attention index partition of PENDING
	// records: OUTBOX#PENDING#00 … OUTBOX#PENDING#<Shards-1>.
	PendingPrefix = "OUTBOX#PENDING#"
)

// DefaultShards is the default number of attention index partitions that
// PENDING records are spread over.
const DefaultShards = 16

// TimeLayout is the layout of createdAt and publishedAt: UTC, fixed width,
// so text order is time order.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Sentinel errors.
var (
	// ErrInvalid reports an Event that cannot become an outbox record.
	ErrInvalid = errors.New("outbox: invalid event")
	// ErrDecode reports an item that is not an outbox record.
	ErrDecode = errors.New("outbox: not an outbox record")
)

// Config configures a Writer.
type Config struct {
	// Table is the table the outbox records go to (the producer's own,
	// usually). Required.
	Table string
	// Layout names the key, attention index and TTL attributes. Default:
	// tables.DefaultLayout().
	Layout tables.Layout
	// Shards is the number of attention index partitions PENDING records
	// are spread over; the relay's sweep must use the same. 1..100.
	// Default: DefaultShards (16).
	Shards int
	// PendingTTL, when set, gives every record a TTL at write time, so a
	// record nobody marks still expires: for a stream consumer that does
	// not mark records (EventBridge Pipes). A relay's mark replaces it with
	// its PublishedTTL. Set it well beyond the time a record may wait to
	// be published. Default: 0 (no TTL until published).
	PendingTTL time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Writer builds outbox records. It is safe for concurrent use.
type Writer struct{ cfg Config }

// WithDefaults returns c with every zero field set to its default (the
// Layout's too; what it cannot fix, validate reports).
func (c Config) WithDefaults() Config {
	c.Layout, _ = c.Layout.WithDefaults()
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if c.Table == "" {
		errs = append(errs, errors.New("outbox: Config.Table is required"))
	}
	if _, err := c.Layout.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.Shards < 1 || c.Shards > 100 {
		errs = append(errs, fmt.Errorf("outbox: Config.Shards %d must be 1..100", c.Shards))
	}
	if c.PendingTTL < 0 {
		errs = append(errs, errors.New("outbox: Config.PendingTTL must not be negative"))
	}
	return errs
}

// New applies cfg's defaults (WithDefaults) and validates it; every
// problem is reported, joined.
func New(cfg Config) (*Writer, error) {
	cfg = cfg.WithDefaults()
	if err := errors.Join(cfg.validate()...); err != nil {
		return nil, err
	}
	return &Writer{cfg: cfg}, nil
}

// Event is one message to publish.
type Event struct {
	// Envelope is the message. Required; it must pass envelope.Encode.
	Envelope *envelope.Envelope
	// Destination is the queue URL to send it to. Default: the relay's
	// queue.
	Destination string
	// Sequence orders the aggregate's records (text order). Default: the
	// envelope's aggregateVersion, else its occurredAt (see the package
	// documentation). At most 64 bytes, no '#'.
	Sequence string
	// Tenant is the message's tenant — the customer, client application or
	// account it is for. The relay sends it as the MessageGroupId on a
	// standard queue, which makes the queue an SQS fair queue (on a FIFO
	// queue the aggregate is the group, as without it). Optional; SQS's
	// rule for a MessageGroupId applies: at most 128 characters, ASCII
	// letters, digits and punctuation.
	Tenant string
}

// InvalidError says why an Event was refused.
type InvalidError struct {
	Field  string
	Reason string
	Err    error
}

func (e *InvalidError) Error() string {
	s := "outbox: invalid event: " + e.Field + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalid and the underlying error.
func (e *InvalidError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// defaultSequence is the default sequence of e (see Event.Sequence).
func defaultSequence(e *envelope.Envelope) string {
	if e.AggregateVersion != nil {
		return fmt.Sprintf("V%020d", *e.AggregateVersion)
	}
	return fmt.Sprintf("T%020d", e.OccurredAt.UnixNano())
}

// keys returns an outbox record's partition and sort key.
func keys(aggregateType, aggregateID, sequence, eventID string) (pk, sk string) {
	return pkPrefix + aggregateType + "#" + aggregateID, skPrefix + sequence + "#" + eventID
}

// PendingPK is the attention index partition of a PENDING record of the
// aggregate's partition key pk, with shards partitions.
func PendingPK(pk string, shards int) string {
	shard := 0
	if shards > 1 {
		h := sha256.Sum256([]byte(pk))
		shard = int(binary.BigEndian.Uint32(h[:4]) % uint32(shards))
	}
	return fmt.Sprintf("%s%02d", PendingPrefix, shard)
}

// Record returns the outbox record of ev: what Put writes. The trace
// context of ctx's span, if any, is the record's (Traceparent,
// Tracestate).
func (w *Writer) Record(ctx context.Context, ev Event) (Record, error) {
	if ev.Envelope == nil {
		return Record{}, &InvalidError{Field: "Envelope", Reason: "required"}
	}
	body, err := envelope.Encode(ev.Envelope)
	if err != nil {
		return Record{}, &InvalidError{Field: "Envelope", Reason: "does not encode", Err: err}
	}
	if i := strings.IndexFunc(string(body), notSQSChar); i >= 0 {
		return Record{}, &InvalidError{Field: "Envelope", Reason: fmt.Sprintf("the body has %U at byte %d, which SQS refuses in a message", []rune(string(body[i:]))[0], i)}
	}
	seq := ev.Sequence
	if seq == "" {
		seq = defaultSequence(ev.Envelope)
	}
	if len(seq) > 64 || strings.Contains(seq, "#") {
		return Record{}, &InvalidError{Field: "Sequence", Reason: "at most 64 bytes without '#'"}
	}
	if ev.Tenant != "" {
		// Refused here, with the producer's transaction, not at the relay:
		// SQS would refuse the message there (the relay then sends it
		// under a hash of the value, still one tenant per value).
		if reason := groupid.Problem(ev.Tenant); reason != "" {
			return Record{}, &InvalidError{Field: "Tenant", Reason: "SQS refuses it as a MessageGroupId: " + reason}
		}
	}
	e := ev.Envelope
	pk, sk := keys(e.AggregateType, e.AggregateID, seq, e.MessageID)
	rec := Record{PK: pk, SK: sk, EventID: e.MessageID, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
		MessageType: e.MessageType, Body: string(body), Destination: ev.Destination, Tenant: ev.Tenant, Status: StatusPending,
		CreatedAt: w.cfg.Now().UTC().Truncate(time.Millisecond)}
	if tc := tracing.Carry(trace.SpanContextFromContext(ctx)); tc != nil {
		rec.Traceparent = aws.ToString(tc[tracing.AttrTraceparent].StringValue)
		rec.Tracestate = aws.ToString(tc[tracing.AttrTracestate].StringValue)
	}
	return rec, nil
}

// Put returns the TransactWriteItem that writes ev's PENDING outbox record,
// to add to the transaction that changes the producer's state. Its
// condition, attribute_not_exists on the partition key, cancels the
// transaction when the same event (aggregate, sequence, event id) was
// written before. The record keeps the trace context of ctx's span — the
// producer's, inside its transaction — and the relay sends it with the
// message: the consumer's span links to the producer's across the
// transaction and the relay.
func (w *Writer) Put(ctx context.Context, ev Event) (types.TransactWriteItem, error) {
	rec, err := w.Record(ctx, ev)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	l := w.cfg.Layout
	cond := expression.AttributeNotExists(expression.Name(l.PartitionKey))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("outbox: condition: %w", err)
	}
	item := map[string]types.AttributeValue{
		l.PartitionKey:       str(rec.PK),
		l.SortKey:            str(rec.SK),
		attr.Status:          str(rec.Status),
		attr.OutboxEventID:   str(rec.EventID),
		attr.AggregateType:   str(rec.AggregateType),
		attr.AggregateID:     str(rec.AggregateID),
		attr.MessageType:     str(rec.MessageType),
		attr.OutboxBody:      str(rec.Body),
		attr.OutboxCreatedAt: str(rec.CreatedAt.Format(TimeLayout)),
		l.AttentionPK:        str(PendingPK(rec.PK, w.cfg.Shards)),
		l.AttentionSK:        str(rec.CreatedAt.Format(TimeLayout)),
	}
	if rec.Destination != "" {
		item[attr.OutboxDestination] = str(rec.Destination)
	}
	if rec.Tenant != "" {
		item[attr.OutboxTenant] = str(rec.Tenant)
	}
	if rec.Traceparent != "" {
		item[attr.OutboxTraceparent] = str(rec.Traceparent)
		if rec.Tracestate != "" {
			item[attr.OutboxTracestate] = str(rec.Tracestate)
		}
	}
	if w.cfg.PendingTTL > 0 {
		item[l.TTL] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.CreatedAt.Add(w.cfg.PendingTTL).Unix(), 10)}
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                 aws.String(w.cfg.Table),
		Item:                      item,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}, nil
}

// notSQSChar reports a character SQS refuses in a message body: outside
// #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func notSQSChar(r rune) bool {
	switch {
	case r == 0x9 || r == 0xA || r == 0xD:
		return false
	case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return false
	}
	return true
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// Record is an outbox record as stored.
type Record struct {
	PK, SK        string
	EventID       string
	AggregateType string
	AggregateID   string
	MessageType   string
	// Body is the encoded envelope.
	Body string
	// Destination is the queue URL, or "" for the relay's default.
	Destination string
	// Tenant is the message's tenant ("": none): its MessageGroupId on a
	// standard queue.
	Tenant    string
	Status    string
	CreatedAt time.Time
	// Traceparent and Tracestate are the W3C trace context of the span
	// that wrote the record ("": none).
	Traceparent, Tracestate string
}

// IsKey reports whether pk is an outbox record's partition key. The
// attention index partitions (PendingPrefix) are index attributes, never
// table keys, so a key under them is a record too: that of an aggregate type
// named PENDING.
func IsKey(pk string) bool {
	return strings.HasPrefix(pk, pkPrefix)
}

// Decode reads an outbox record from an item (or a stream record's image,
// converted) of a table with layout l. An item that is not one is
// ErrDecode.
func Decode(item map[string]types.AttributeValue, l tables.Layout) (Record, error) {
	get := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	r := Record{PK: get(l.PartitionKey), SK: get(l.SortKey), EventID: get(attr.OutboxEventID),
		AggregateType: get(attr.AggregateType), AggregateID: get(attr.AggregateID),
		MessageType: get(attr.MessageType), Body: get(attr.OutboxBody),
		Destination: get(attr.OutboxDestination), Tenant: get(attr.OutboxTenant), Status: get(attr.Status),
		Traceparent: get(attr.OutboxTraceparent), Tracestate: get(attr.OutboxTracestate)}
	if !IsKey(r.PK) || !strings.HasPrefix(r.SK, skPrefix) {
		return Record{}, fmt.Errorf("%w: key %q/%q", ErrDecode, r.PK, r.SK)
	}
	if r.EventID == "" || r.AggregateID == "" || r.Body == "" || r.Status == "" {
		return Record{}, fmt.Errorf("%w: %s/%s lacks eventId, aggregateId, body or status", ErrDecode, r.PK, r.SK)
	}
	if t, err := time.Parse(TimeLayout, get(attr.OutboxCreatedAt)); err == nil {
		r.CreatedAt = t
	}
	return r, nil
}
