package inbox_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/tables"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func TestRecordRoundTrip(t *testing.T) {
	exp := time.Date(2026, 3, 1, 12, 0, 30, 250_000_000, time.UTC).UnixMilli()
	full := &inbox.Record{
		Key: "k-1", MessageType: "CaseOpened", Status: inbox.StatusFailedRetryable, RequestHash: "abc",
		SchemaVersion: 2, AggregateType: "Case", AggregateID: "c-1", CorrelationID: "corr", CausationID: "cause",
		Producer: "intake", SQSMessageID: "m-1", FirstSeenAt: "2026-03-01T12:00:00.000Z", LastSeenAt: "2026-03-01T12:00:01.000Z",
		StartedAt: "2026-03-01T12:00:00.000Z", CompletedAt: "", FailedAt: "2026-03-01T12:00:01.000Z",
		Attempts: 2, Deliveries: 3, LeaseOwner: "w-1", LeaseToken: "tok", LeaseExpiresAt: exp,
		FailureCode: "DOWNSTREAM", FailureMessage: "down", Outcome: "", ResultRef: "", TTL: 1_790_000_000,
		PK: inbox.PK("k-1"), SK: inbox.SK("CaseOpened"), GSI1PK: "AGG#Case#c-1", GSI1SK: "x#CaseOpened#k-1",
		GSI2PK: "FAILED_RETRYABLE#03", GSI2SK: "2026-03-01T12:00:01.000Z",
	}
	minimal := &inbox.Record{Status: inbox.StatusProcessing, PK: inbox.PK("k-2"), SK: inbox.SK("CaseClosed")}

	tests := []struct {
		name   string
		rec    *inbox.Record
		want   *inbox.Record
		absent []string
	}{
		{"every field", full, withExpiry(full), []string{attr.CompletedAt, attr.Outcome, attr.ResultRef}},
		{"minimal record: key and type come from PK/SK", minimal, func() *inbox.Record {
			r := *minimal
			r.Key, r.MessageType = "k-2", "CaseClosed"
			return &r
		}(), []string{attr.IdempotencyKey, attr.MessageType, attr.LeaseExpiresAt, tables.DefaultLayout().TTL, tables.DefaultLayout().AttentionPK, attr.Attempts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item, err := (inbox.Store{}).Encode(tt.rec), error(nil)
			require.NoError(t, err)
			require.Equal(t, s(string(tt.rec.Status)), item[attr.Status])
			require.Equal(t, s(tt.rec.PK), item[tables.DefaultLayout().PartitionKey])
			require.Equal(t, s(tt.rec.SK), item[tables.DefaultLayout().SortKey])
			for _, a := range tt.absent {
				require.NotContains(t, item, a, "empty %s must be omitted", a)
			}
			require.NotContains(t, item, "Rejection")
			require.NotContains(t, item, "LeaseExpiry")

			got, err := (inbox.Store{}).Decode(item)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.False(t, got.Rejection)
		})
	}

	t.Run("numbers are stored as numbers", func(t *testing.T) {
		item, err := (inbox.Store{}).Encode(full), error(nil)
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}, item[attr.LeaseExpiresAt])
		require.Equal(t, &types.AttributeValueMemberN{Value: "1790000000"}, item[tables.DefaultLayout().TTL])
		require.Equal(t, &types.AttributeValueMemberN{Value: "2"}, item[attr.Attempts])
	})
}

func withExpiry(r *inbox.Record) *inbox.Record {
	c := *r
	c.LeaseExpiry = time.UnixMilli(r.LeaseExpiresAt)
	return &c
}

func TestNewRecord(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 7_000_000, time.FixedZone("CET", 3600))
	w := &inbox.Work{Key: "k-1", MessageType: "CaseOpened", RequestHash: "h", SchemaVersion: 1,
		AggregateType: "Case", AggregateID: "c-1", CorrelationID: "corr", CausationID: "cause", Producer: "intake"}
	r := inbox.NewRecord(w, now)
	ts := "2026-03-01T11:00:00.007Z"
	require.Equal(t, &inbox.Record{
		PK: "IDEMP#k-1", SK: "WORKER#CaseOpened", MessageType: "CaseOpened", RequestHash: "h", SchemaVersion: 1,
		AggregateType: "Case", AggregateID: "c-1", CorrelationID: "corr", CausationID: "cause", Producer: "intake",
		FirstSeenAt: ts, LastSeenAt: ts, StartedAt: ts, Deliveries: 1,
		GSI1PK: "AGG#Case#c-1", GSI1SK: ts,
	}, r)
	item, err := (inbox.Store{}).Encode(r), error(nil)
	require.NoError(t, err)
	got, err := (inbox.Store{}).Decode(item)
	require.NoError(t, err)
	require.Equal(t, "k-1", got.Key)
	require.Equal(t, "CaseOpened", got.MessageType)
}

func TestDecodeRejection(t *testing.T) {
	item := (inbox.Store{}).RejectionKey("m-42")
	require.Equal(t, s("REJECT#m-42"), item[tables.DefaultLayout().PartitionKey])
	require.Equal(t, s("REJECT"), item[tables.DefaultLayout().SortKey])
	item[attr.Status] = s(string(inbox.StatusFailedTerminal))
	item[attr.FailureCode] = s("INVALID_ENVELOPE")
	item[attr.SQSMessageID] = s("m-42")

	r, err := (inbox.Store{}).Decode(item)
	require.NoError(t, err)
	require.True(t, r.Rejection)
	require.Equal(t, inbox.StatusFailedTerminal, r.Status)
	require.Equal(t, "INVALID_ENVELOPE", r.FailureCode)
	require.Equal(t, "m-42", r.SQSMessageID)
	require.Empty(t, r.Key, "a rejection has no idempotency key unless one was read")
	require.Empty(t, r.MessageType)
}

func TestDecodeForeignItems(t *testing.T) {
	tests := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{"nil", nil},
		{"empty", map[string]types.AttributeValue{}},
		{"domain item", map[string]types.AttributeValue{"PK": s("CASE#c-1"), "SK": s("STATE"), "status": s("OPEN")}},
		{"idempotency PK with a foreign SK", map[string]types.AttributeValue{"PK": s("IDEMP#k"), "SK": s("STATE")}},
		{"worker SK with a foreign PK", map[string]types.AttributeValue{"PK": s("CASE#k"), "SK": s("WORKER#CaseOpened")}},
		{"rejection PK with a foreign SK", map[string]types.AttributeValue{"PK": s("REJECT#m"), "SK": s("OTHER")}},
		{"no keys", map[string]types.AttributeValue{"status": s("COMPLETED")}},
		{"attribute of the wrong type", map[string]types.AttributeValue{"PK": s("IDEMP#k"), "SK": s("WORKER#T"), "attempts": s("many")}},
		{"key of the wrong type", map[string]types.AttributeValue{"PK": &types.AttributeValueMemberN{Value: "1"}, "SK": s("WORKER#T")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := (inbox.Store{}).Decode(tt.item)
			require.ErrorIs(t, err, inbox.ErrDecode)
			require.Nil(t, r)
		})
	}
}

func TestKeys(t *testing.T) {
	require.Equal(t, "IDEMP#order-7", inbox.PK("order-7"))
	require.Equal(t, "WORKER#CaseOpened", inbox.SK("CaseOpened"))
	require.Equal(t, map[string]types.AttributeValue{"PK": s("IDEMP#order-7"), "SK": s("WORKER#CaseOpened")}, (inbox.Store{}).Key("order-7", "CaseOpened"))
	require.Equal(t, "AGG#Case#c-1", inbox.AggregatePK("Case", "c-1"))
	require.Equal(t, "2026-03-01T12:00:00.000Z", inbox.AggregateSK("2026-03-01T12:00:00.000Z", "CaseOpened", "k-1"),
		"the KEYS_ONLY index carries the type and the key beside the sort key")
}

func TestShard(t *testing.T) {
	tests := []struct {
		n int
	}{{2}, {4}, {16}, {100}}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.n), func(t *testing.T) {
			seen := map[int]bool{}
			for i := range 2000 {
				key := "key-" + strconv.Itoa(i)
				sh := inbox.Shard(key, tt.n)
				require.GreaterOrEqual(t, sh, 0)
				require.Less(t, sh, tt.n)
				require.Equal(t, sh, inbox.Shard(key, tt.n), "stable for a key")
				seen[sh] = true
			}
			require.Len(t, seen, tt.n, "every shard is used")
		})
	}
	for _, n := range []int{1, 0, -3} {
		require.Zero(t, inbox.Shard("anything", n), "n=%d", n)
	}
	// Stable across processes and releases (records already written are
	// found under these shards): pinned values of SHA-256's first 32 bits.
	require.Equal(t, 2, inbox.Shard("order-7", 16))
	require.Equal(t, 2, inbox.Shard("", 16))
	require.Equal(t, 87, inbox.Shard("msg-0001", 100))
}

func TestFormatTime(t *testing.T) {
	require.Empty(t, inbox.FormatTime(time.Time{}))
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "2026-03-01T12:00:00.000Z"},
		{time.Date(2026, 3, 1, 12, 0, 0, 999_999_999, time.UTC), "2026-03-01T12:00:00.999Z"},
		{time.Date(2026, 3, 1, 12, 0, 0, 10_000_000, time.UTC), "2026-03-01T12:00:00.010Z"},
		{time.Date(2026, 3, 1, 1, 0, 0, 0, time.FixedZone("X", 2*3600)), "2026-02-28T23:00:00.000Z"},
		{time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC), "0999-01-01T00:00:00.000Z"},
	}
	for _, tt := range tests {
		got := inbox.FormatTime(tt.in)
		require.Equal(t, tt.want, got)
		require.Len(t, got, len(inbox.TimeLayout))
		back, err := time.Parse(inbox.TimeLayout, got)
		require.NoError(t, err)
		require.Equal(t, tt.in.Truncate(time.Millisecond).UTC(), back)
	}

	// Lexical order is time order (index sort keys rely on it).
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	times := make([]time.Time, 500)
	for i := range times {
		times[i] = base.Add(time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	strs := make([]string, len(times))
	for i, tm := range times {
		strs[i] = inbox.FormatTime(tm)
		require.Len(t, strs[i], 24)
	}
	require.True(t, sort.StringsAreSorted(strs))
}

func TestAttentionPK(t *testing.T) {
	tests := []struct {
		status inbox.Status
		shard  int
		want   string
	}{
		{inbox.StatusFailedTerminal, 7, "FAILED_TERMINAL#07"},
		{inbox.StatusFailedRetryable, 0, "FAILED_RETRYABLE#00"},
		{inbox.StatusProcessing, 15, "PROCESSING#15"},
		{inbox.StatusFailedTerminal, 99, "FAILED_TERMINAL#99"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, inbox.AttentionPK(tt.status, tt.shard))
	}
}

func ExampleStore_Decode() {
	// An item as GetItem, a query or a failed condition's ALL_OLD returns it.
	item := map[string]types.AttributeValue{
		"PK":             &types.AttributeValueMemberS{Value: "IDEMP#order-7"},
		"SK":             &types.AttributeValueMemberS{Value: "WORKER#CaseOpened"},
		"status":         &types.AttributeValueMemberS{Value: "PROCESSING"},
		"attempts":       &types.AttributeValueMemberN{Value: "2"},
		"leaseExpiresAt": &types.AttributeValueMemberN{Value: "1772366430000"},
	}
	r, err := (inbox.Store{}).Decode(item)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Key, r.MessageType, r.Status, r.Attempts)
	fmt.Println(inbox.FormatTime(r.LeaseExpiry))
	fmt.Println(inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(r.Key, 1)))
	// Output:
	// order-7 CaseOpened PROCESSING 2
	// 2026-03-01T12:00:30.000Z
	// FAILED_TERMINAL#00
}

// Item is hand-written; it must say exactly what the dynamodbav tags say.
func TestItemMatchesTags(t *testing.T) {
	full := inbox.Record{Key: "k", MessageType: "T", Status: inbox.StatusFailedRetryable, RequestHash: "h", SchemaVersion: 1,
		AggregateType: "A", AggregateID: "a", CorrelationID: "c", CausationID: "z", Producer: "p", SQSMessageID: "m",
		FirstSeenAt: "1", LastSeenAt: "2", StartedAt: "3", CompletedAt: "4", FailedAt: "5", Attempts: 2, Deliveries: 3,
		LeaseOwner: "o", LeaseToken: "t", LeaseExpiresAt: 99, FailureCode: "F", FailureMessage: "fm", Outcome: "O",
		ResultRef: "r", TTL: 7, PK: "IDEMP#k", SK: "WORKER#T", GSI1PK: "g1", GSI1SK: "g1s", GSI2PK: "g2", GSI2SK: "g2s",
		ReopenedAt: "6", ReopenedBy: "ops", ReopenReason: "fixed"}
	for _, r := range []inbox.Record{full, {PK: "IDEMP#k", SK: "WORKER#T", Status: inbox.StatusProcessing}} {
		got, err := (inbox.Store{}).Encode(&r), error(nil)
		require.NoError(t, err)
		want, err := attributevalue.MarshalMap(r)
		require.NoError(t, err)
		if r.PK == inbox.PK(r.Key) {
			delete(want, attr.IdempotencyKey) // in PK
		}
		if r.SK == inbox.SK(r.MessageType) {
			delete(want, attr.MessageType) // in SK
		}
		require.Equal(t, want, got)
	}
}

// An inbox record stays under DynamoDB's 1 KB write unit for idempotency
// keys up to 256 bytes and message types up to 100, with the identity a
// producer usually sends (UUIDs, a service name): each fact is stored
// once. Before 0.9 the key was stored three times and the type three times
// (PK, attributes, the aggregate index sort key): such a record cost 2 WCU
// at the gate and 4 in the commit.
func TestRecordFitsOneWriteUnit(t *testing.T) {
	s, err := inbox.Store{Table: "t"}.WithDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC)
	w := &inbox.Work{Key: strings.Repeat("k", 256), MessageType: strings.Repeat("T", 100),
		RequestHash: "v2:" + strings.Repeat("a", 64), SchemaVersion: 1, AggregateType: "Order", AggregateID: "0f3c2a9e-7b1d-4c5e-9a8f-2d6b4e1c3a57",
		CorrelationID: "3e2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c", CausationID: "7c6b5a4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d", Producer: "orders-service"}
	fresh := inbox.NewRecord(w, now)
	fresh.Status, fresh.LeaseOwner, fresh.LeaseToken = inbox.StatusProcessing, "ip-10-0-12-34.eu-west-1.compute.internal/4242", strings.Repeat("f", 32)
	fresh.LeaseExpiresAt, fresh.TTL = now.Add(30*time.Second).UnixMilli(), now.Add(7*24*time.Hour).Unix()
	item := s.Encode(fresh)
	require.Less(t, tables.ItemSize(item), 1024, "the gate's record: one write unit")

	// As the commit leaves it: COMPLETED, the lease expiry and attention
	// keys gone, completedAt, outcome and a long TTL added.
	done := s.CompletedRecord(fresh, now.Add(time.Second), "", "")
	require.Less(t, tables.ItemSize(s.Encode(done)), 1024, "the completed record: one write unit (two in a transaction)")

	back, err := s.Decode(item)
	require.NoError(t, err)
	require.Equal(t, w.Key, back.Key)
	require.Equal(t, w.MessageType, back.MessageType)
	require.Equal(t, w.AggregateType, back.AggregateType)
	require.Equal(t, w.AggregateID, back.AggregateID)
	require.Equal(t, inbox.FormatTime(now), back.StartedAt)
	require.Equal(t, inbox.FormatTime(now), back.LastActivity())

	// Records written before 0.9 (every fact stored, a long aggregate sort
	// key) read the same.
	old := s.Encode(fresh)
	old[attr.IdempotencyKey] = &types.AttributeValueMemberS{Value: w.Key}
	old[attr.MessageType] = &types.AttributeValueMemberS{Value: w.MessageType}
	old[attr.AggregateType] = &types.AttributeValueMemberS{Value: w.AggregateType}
	old[attr.AggregateID] = &types.AttributeValueMemberS{Value: w.AggregateID}
	old[attr.StartedAt] = &types.AttributeValueMemberS{Value: inbox.FormatTime(now)}
	old[tables.DefaultLayout().AggregateSK] = &types.AttributeValueMemberS{Value: inbox.FormatTime(now) + "#" + w.MessageType + "#" + w.Key}
	oldRec, err := s.Decode(old)
	require.NoError(t, err)
	require.Equal(t, back.Key, oldRec.Key)
	require.Equal(t, back.AggregateID, oldRec.AggregateID)
	require.Greater(t, tables.ItemSize(old), 1024, "what such a record cost before: two write units")
}

func BenchmarkItem(b *testing.B) {
	r := inbox.NewRecord(&inbox.Work{Key: "k-123", MessageType: "CaseNoteRecorded", RequestHash: "0123456789abcdef", SchemaVersion: 1,
		AggregateType: "Case", AggregateID: "c-1", Producer: "p"}, time.Now())
	r.Status, r.LeaseToken, r.LeaseExpiresAt, r.TTL = inbox.StatusProcessing, "tok", 1, 2
	b.ReportAllocs()
	for b.Loop() {
		_, _ = (inbox.Store{}).Encode(r), error(nil)
	}
}
