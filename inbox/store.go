package inbox

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/tables"
)

// The defaults of Store and TTL. The daemon's flags and the Lambda
// adapter's variables read these; nothing restates them.
const (
	DefaultAttentionShards = 16
	DefaultCompletedTTL    = 35 * 24 * time.Hour
	DefaultFailedTTL       = 35 * 24 * time.Hour
	DefaultProcessingTTL   = 7 * 24 * time.Hour
)

// Store is the one configuration of the inbox: where its records live, how
// their keys, indexes and TTL attribute are named, how long records live,
// how the attention index is spread, and whether PROCESSING records are
// indexed. The gate, the committer, the renewer, the sweeper and the
// operator reads all take the same Store, so none can read records another
// wrote under other names or shards; the daemon builds it once from its
// flags and records its settings in the table (ReadRecorded,
// RecordSettings).
type Store struct {
	// Table holds the inbox records. Required.
	Table string
	// Layout names the key, index and TTL attributes. Default:
	// tables.DefaultLayout() (PK, SK, GSI1, GSI2, ttl).
	Layout tables.Layout
	// TTL per status. Default: TTL{} with its defaults.
	TTL TTL
	// AttentionShards spreads the attention index's partitions of one
	// status. Default: DefaultAttentionShards; 1..100.
	AttentionShards int
	// IndexProcessing also puts PROCESSING records in the attention index,
	// sorted by lease expiry, so the sweeper pages an index instead of
	// scanning: an index write on every acquisition and completion.
	// Default: false.
	IndexProcessing bool
	// RequestHashVersion is the version of the request hash new records
	// are written with (envelope.HashVersion: 2 or 3); records of every
	// version are read. Every worker sharing the table must read the
	// version written — a worker of an older release judges a record in a
	// version it does not know a hash mismatch, a terminal failure of
	// healthy work — so a table moves to 3 only once every worker runs a
	// release that reads it: `tables create` records 3 for a new table,
	// `tables adopt --request-hash-version 3` moves an existing one.
	// Default: DefaultRequestHashVersion (a table whose record predates
	// the setting).
	RequestHashVersion int
}

// DefaultRequestHashVersion is the request hash version written to a
// table that records none: 2, which every release since hash versioning
// reads.
const DefaultRequestHashVersion = 2

// WithDefaults fills zero fields and validates.
func (s Store) WithDefaults() (Store, error) {
	var errs []error
	if s.Table == "" {
		errs = append(errs, errors.New("inbox: Store.Table is required"))
	}
	var err error
	if s.Layout, err = s.Layout.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if s.TTL, err = s.TTL.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if s.AttentionShards == 0 {
		s.AttentionShards = DefaultAttentionShards
	}
	if s.AttentionShards < 1 || s.AttentionShards > 100 {
		errs = append(errs, fmt.Errorf("inbox: Store.AttentionShards %d must be within 1..100", s.AttentionShards))
	}
	if s.RequestHashVersion == 0 {
		s.RequestHashVersion = DefaultRequestHashVersion
	}
	if s.RequestHashVersion != 2 && s.RequestHashVersion != 3 {
		errs = append(errs, fmt.Errorf("inbox: Store.RequestHashVersion %d must be 2 or 3", s.RequestHashVersion))
	}
	return s, errors.Join(errs...)
}

// The store's settings with their defaults, for a Store used without
// WithDefaults (the components call WithDefaults; a zero field here must
// never mean an empty attribute name or a TTL of now).
func (s Store) layout() tables.Layout {
	l, _ := s.Layout.WithDefaults()
	return l
}

func (s Store) ttl() TTL {
	t, _ := s.TTL.WithDefaults()
	return t
}

func (s Store) shards() int {
	if s.AttentionShards == 0 {
		return DefaultAttentionShards
	}
	return s.AttentionShards
}

// Key is the primary key of the record for (key, messageType).
func (s Store) Key(key, messageType string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		s.layout().PartitionKey: &types.AttributeValueMemberS{Value: PK(key)},
		s.layout().SortKey:      &types.AttributeValueMemberS{Value: SK(messageType)},
	}
}

// RejectionKey is the primary key of the rejection record of an SQS message
// that could not be filed under an idempotency key.
func (s Store) RejectionKey(sqsMessageID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		s.layout().PartitionKey: &types.AttributeValueMemberS{Value: prefixRejection + sqsMessageID},
		s.layout().SortKey:      &types.AttributeValueMemberS{Value: rejectionSK},
	}
}

// Encode renders r as an item for PutItem.
//
// It is written out by hand, not by reflection: the gate and the fused
// commit encode a record for every fresh message. It stores each fact once
// — a record of a 256-byte key and a 100-byte type stays under 1 KB, one
// write unit — leaving out what the keys already hold (the idempotency key
// and the message type, in the table's key; the aggregate, in the
// aggregate index key) and what another timestamp says (startedAt and
// lastSeenAt equal to firstSeenAt), and empty attributes, exactly as Decode
// derives them back, so Decode reads back what Encode wrote.
func (s Store) Encode(r *Record) map[string]types.AttributeValue {
	item := make(map[string]types.AttributeValue, 24)
	str := func(name, v string) {
		if v != "" {
			item[name] = &types.AttributeValueMemberS{Value: v}
		}
	}
	num := func(name string, v int64) {
		if v != 0 {
			item[name] = &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
		}
	}
	l := s.layout()
	item[l.PartitionKey] = &types.AttributeValueMemberS{Value: r.PK}
	item[l.SortKey] = &types.AttributeValueMemberS{Value: r.SK}
	item[attr.Status] = &types.AttributeValueMemberS{Value: string(r.Status)}
	if r.PK != PK(r.Key) {
		str(attr.IdempotencyKey, r.Key)
	}
	if r.SK != SK(r.MessageType) {
		str(attr.MessageType, r.MessageType)
	}
	str(attr.RequestHash, r.RequestHash)
	num(attr.SchemaVersion, int64(r.SchemaVersion))
	if r.GSI1PK == "" || r.GSI1PK != AggregatePK(r.AggregateType, r.AggregateID) {
		str(attr.AggregateType, r.AggregateType)
		str(attr.AggregateID, r.AggregateID)
	}
	str(attr.CorrelationID, r.CorrelationID)
	str(attr.CausationID, r.CausationID)
	str(attr.Producer, r.Producer)
	str(attr.SQSMessageID, r.SQSMessageID)
	str(attr.FirstSeenAt, r.FirstSeenAt)
	if r.LastSeenAt != r.FirstSeenAt {
		str(attr.LastSeenAt, r.LastSeenAt)
	}
	if r.StartedAt != r.FirstSeenAt {
		str(attr.StartedAt, r.StartedAt)
	}
	str(attr.CompletedAt, r.CompletedAt)
	str(attr.FailedAt, r.FailedAt)
	num(attr.Attempts, int64(r.Attempts))
	num(attr.Deliveries, int64(r.Deliveries))
	num(attr.Takeovers, int64(r.Takeovers))
	str(attr.LeaseOwner, r.LeaseOwner)
	str(attr.LeaseToken, r.LeaseToken)
	num(attr.LeaseExpiresAt, r.LeaseExpiresAt)
	str(attr.FailureCode, r.FailureCode)
	str(attr.FailureMessage, r.FailureMessage)
	str(attr.Outcome, r.Outcome)
	str(attr.ResultRef, r.ResultRef)
	str(attrReopenedAt, r.ReopenedAt)
	str(attrReopenedBy, r.ReopenedBy)
	str(attrReopenReason, r.ReopenReason)
	str(attr.DiscardedAt, r.DiscardedAt)
	str(attr.DiscardedBy, r.DiscardedBy)
	str(attr.DiscardReason, r.DiscardReason)
	num(l.TTL, r.TTL)
	str(l.AggregatePK, r.GSI1PK)
	str(l.AggregateSK, r.GSI1SK)
	str(l.AttentionPK, r.GSI2PK)
	str(l.AttentionSK, r.GSI2SK)
	return item
}

// canonical names of the layout's attributes in Record's encoding tags.
const (
	canonPK, canonSK       = "PK", "SK"
	canonGSI1PK, canonGSI1 = "GSI1PK", "GSI1SK"
	canonGSI2PK, canonGSI2 = "GSI2PK", "GSI2SK"
	canonTTL               = "ttl"
)

// Decode reads an item (a GetItem result, a query item, or the ALL_OLD image
// of a failed condition) into a Record.
func (s Store) Decode(item map[string]types.AttributeValue) (*Record, error) {
	if len(item) == 0 {
		return nil, fmt.Errorf("%w: empty item", ErrDecode)
	}
	l := s.layout()
	if l != tables.DefaultLayout() {
		renamed := make(map[string]types.AttributeValue, len(item))
		for k, v := range item {
			renamed[k] = v
		}
		for canon, name := range map[string]string{canonPK: l.PartitionKey, canonSK: l.SortKey, canonGSI1PK: l.AggregatePK,
			canonGSI1: l.AggregateSK, canonGSI2PK: l.AttentionPK, canonGSI2: l.AttentionSK, canonTTL: l.TTL} {
			delete(renamed, canon)
			if v, ok := item[name]; ok {
				renamed[canon] = v
			}
		}
		item = renamed
	}
	var r Record
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return r.finish()
}

// TTL holds how long records live after their last write, per status: the
// value of the layout's TTL attribute. TTL is garbage collection only; no
// decision depends on DynamoDB deleting a record on time.
type TTL struct {
	// Processing records of abandoned work disappear after this. It must be
	// far beyond any lease. Default: DefaultProcessingTTL (7 days).
	Processing time.Duration
	// Completed records must outlive every possible redelivery: SQS retention
	// (≤ 14 days) + DLQ retention (≤ 14 days) + margin. Default:
	// DefaultCompletedTTL (35 days).
	Completed time.Duration
	// Failed records (retryable and terminal) stay for investigation and
	// redrive. Default: DefaultFailedTTL (35 days).
	Failed time.Duration
}

// WithDefaults fills zero fields and validates.
func (t TTL) WithDefaults() (TTL, error) {
	if t.Processing == 0 {
		t.Processing = DefaultProcessingTTL
	}
	if t.Completed == 0 {
		t.Completed = DefaultCompletedTTL
	}
	if t.Failed == 0 {
		t.Failed = DefaultFailedTTL
	}
	var errs []error
	if t.Processing < time.Hour {
		errs = append(errs, fmt.Errorf("inbox: TTL.Processing %s must be at least 1h (far beyond any lease)", t.Processing))
	}
	if t.Completed < 28*24*time.Hour {
		errs = append(errs, fmt.Errorf("inbox: TTL.Completed %s must be at least 28 days (SQS + DLQ retention), or a late redelivery applies twice", t.Completed))
	}
	if t.Failed < time.Hour {
		errs = append(errs, fmt.Errorf("inbox: TTL.Failed %s must be at least 1h", t.Failed))
	}
	return t, errors.Join(errs...)
}

// For returns the TTL attribute's value (epoch seconds) of a record written
// in status at now.
func (t TTL) For(status Status, now time.Time) int64 {
	switch status {
	case StatusCompleted:
		return now.Add(t.Completed).Unix()
	case StatusProcessing:
		return now.Add(t.Processing).Unix()
	default:
		return now.Add(t.Failed).Unix()
	}
}
