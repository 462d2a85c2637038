package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newEnvelope(id, aggregate string, version *int64) *envelope.Envelope {
	return &envelope.Envelope{MessageID: id, SchemaVersion: envelope.SchemaV1, MessageType: "OrderShipped", Producer: "orders",
		OccurredAt: time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC), IdempotencyKey: "ship-" + id,
		AggregateType: "Order", AggregateID: aggregate, AggregateVersion: version, Payload: []byte(`{"orderId":"` + aggregate + `"}`)}
}

func ptr[T any](v T) *T { return &v }

func TestNewValidates(t *testing.T) {
	_, err := outbox.New(outbox.Config{Shards: 101, Layout: tables.Layout{PartitionKey: "x", SortKey: "x"}, PendingTTL: -time.Hour})
	require.Error(t, err)
	for _, want := range []string{"Config.Table is required", "Config.Shards 101", `names attribute "x" twice`, "Config.PendingTTL must not be negative"} {
		require.ErrorContains(t, err, want)
	}
}

func TestRecord(t *testing.T) {
	now := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	w, err := outbox.New(outbox.Config{Table: "t", Now: func() time.Time { return now }})
	require.NoError(t, err)
	tests := []struct {
		name    string
		ev      outbox.Event
		pk, sk  string
		invalid string // the InvalidError's field, when refused
	}{
		{name: "version orders", ev: outbox.Event{Envelope: newEnvelope("m1", "o-1", ptr(int64(42)))},
			pk: "OUTBOX#Order#o-1", sk: "EVENT#V00000000000000000042#m1"},
		{name: "time without version", ev: outbox.Event{Envelope: newEnvelope("m2", "o-1", nil)},
			pk: "OUTBOX#Order#o-1", sk: "EVENT#T01796292000123456789#m2"},
		{name: "explicit sequence", ev: outbox.Event{Envelope: newEnvelope("m3", "o-2", nil), Sequence: "0007"},
			pk: "OUTBOX#Order#o-2", sk: "EVENT#0007#m3"},
		{name: "no envelope", ev: outbox.Event{}, invalid: "Envelope"},
		{name: "invalid envelope", ev: outbox.Event{Envelope: &envelope.Envelope{MessageID: "x"}}, invalid: "Envelope"},
		{name: "sequence with #", ev: outbox.Event{Envelope: newEnvelope("m4", "o-1", nil), Sequence: "a#b"}, invalid: "Sequence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := w.Record(context.Background(), tt.ev)
			if tt.invalid != "" {
				var inv *outbox.InvalidError
				require.ErrorAs(t, err, &inv)
				require.Equal(t, tt.invalid, inv.Field)
				require.ErrorIs(t, err, outbox.ErrInvalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.pk, rec.PK)
			require.Equal(t, tt.sk, rec.SK)
			require.Equal(t, outbox.StatusPending, rec.Status)
			require.Equal(t, now, rec.CreatedAt)
			decoded, err := envelope.NewDecoder(envelope.Config{})
			require.NoError(t, err)
			e, err := decoded.Decode([]byte(rec.Body))
			require.NoError(t, err)
			require.Equal(t, tt.ev.Envelope.MessageID, e.MessageID)
		})
	}
}

func TestPendingPKIsStablePerAggregate(t *testing.T) {
	a := outbox.PendingPK("OUTBOX#Order#o-1", 16)
	require.Equal(t, a, outbox.PendingPK("OUTBOX#Order#o-1", 16))
	require.Regexp(t, `^OUTBOX#PENDING#(0[0-9]|1[0-5])$`, a)
	require.Equal(t, "OUTBOX#PENDING#00", outbox.PendingPK("OUTBOX#Order#o-1", 1))
	seen := map[string]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		seen[outbox.PendingPK("OUTBOX#Order#"+id, 16)] = true
	}
	require.Greater(t, len(seen), 1, "aggregates spread over the partitions")
}

// The outbox record commits with the producer's state change or not at
// all, and the same event cannot be written twice.
func TestPutCommitsWithTheProducersTransaction(t *testing.T) {
	env := testenv.New(t, testenv.Options{NoQueue: true})
	ctx := context.Background()
	w, err := outbox.New(outbox.Config{Table: env.Table})
	require.NoError(t, err)
	ship := func(orderID string, version int64, msgID string) error {
		put, err := w.Put(context.Background(), outbox.Event{Envelope: newEnvelope(msgID, orderID, ptr(version))})
		require.NoError(t, err)
		// The producer's own change: ship the order if it is at version-1.
		upd := expression.Set(expression.Name("version"), expression.Value(version)).Set(expression.Name("state"), expression.Value("SHIPPED"))
		cond := expression.Name("version").Equal(expression.Value(version - 1))
		expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
		require.NoError(t, err)
		_, err = env.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String(env.Table), Key: key("ORDER#"+orderID, "ORDER"),
				UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
				ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}},
			put,
		}})
		return err
	}
	_, err = env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: map[string]types.AttributeValue{
		"PK": s("ORDER#o-1"), "SK": s("ORDER"), "version": &types.AttributeValueMemberN{Value: "0"}}})
	require.NoError(t, err)

	require.NoError(t, ship("o-1", 1, "m-1"))
	recs := outboxRecords(t, env, "OUTBOX#Order#o-1")
	require.Len(t, recs, 1)
	require.Equal(t, outbox.StatusPending, recs[0].Status)
	require.Equal(t, "m-1", recs[0].EventID)

	// The domain condition fails (the order is at version 1, not 4): no
	// outbox record.
	var canceled *types.TransactionCanceledException
	require.ErrorAs(t, ship("o-1", 5, "m-2"), &canceled)
	require.Equal(t, "ConditionalCheckFailed", aws.ToString(canceled.CancellationReasons[0].Code))
	require.Len(t, outboxRecords(t, env, "OUTBOX#Order#o-1"), 1)

	// The same event again (the producer retried a committed transaction
	// whose state condition would pass): the outbox Put's condition fails.
	_, err = env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: map[string]types.AttributeValue{
		"PK": s("ORDER#o-1"), "SK": s("ORDER"), "version": &types.AttributeValueMemberN{Value: "0"}}})
	require.NoError(t, err)
	err = ship("o-1", 1, "m-1")
	require.ErrorAs(t, err, &canceled)
	require.Equal(t, "None", aws.ToString(canceled.CancellationReasons[0].Code))
	require.Equal(t, "ConditionalCheckFailed", aws.ToString(canceled.CancellationReasons[1].Code))
	require.Len(t, outboxRecords(t, env, "OUTBOX#Order#o-1"), 1)

	// The record is in the PENDING index.
	out, err := env.DynamoDB.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(env.Table), IndexName: aws.String("GSI2"),
		KeyConditionExpression: aws.String("GSI2PK = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": s(outbox.PendingPK("OUTBOX#Order#o-1", outbox.DefaultShards))}})
	require.NoError(t, err)
	require.Len(t, out.Items, 1)
}

func outboxRecords(t *testing.T, env *testenv.Env, pk string) []outbox.Record {
	t.Helper()
	out, err := env.DynamoDB.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(env.Table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("PK = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(pk)}})
	require.NoError(t, err)
	var recs []outbox.Record
	for _, it := range out.Items {
		r, err := outbox.Decode(it, tables.DefaultLayout())
		require.NoError(t, err)
		recs = append(recs, r)
	}
	return recs
}

func TestDecodeRefusesOtherItems(t *testing.T) {
	_, err := outbox.Decode(map[string]types.AttributeValue{"PK": s("IDEMP#k"), "SK": s("WORKER#T")}, tables.DefaultLayout())
	require.True(t, errors.Is(err, outbox.ErrDecode))
	_, err = outbox.Decode(map[string]types.AttributeValue{"PK": s("OUTBOX#Order#1"), "SK": s("EVENT#1#m")}, tables.DefaultLayout())
	require.ErrorIs(t, err, outbox.ErrDecode)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": s(pk), "SK": s(sk)}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func TestPendingTTL(t *testing.T) {
	now := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		ttl  time.Duration
		want types.AttributeValue
	}{
		{0, nil},
		{72 * time.Hour, &types.AttributeValueMemberN{Value: "1796554800"}},
	} {
		w, err := outbox.New(outbox.Config{Table: "t", PendingTTL: tt.ttl, Now: func() time.Time { return now }})
		require.NoError(t, err)
		put, err := w.Put(context.Background(), outbox.Event{Envelope: newEnvelope("m1", "o-1", nil)})
		require.NoError(t, err)
		require.Equal(t, tt.want, put.Put.Item["ttl"])
	}
}

// An aggregate type named PENDING is a valid envelope's (the type-name
// rule allows it); its records' partition key starts with OUTBOX#PENDING#,
// which is also the prefix of the attention index partitions — an index
// attribute, never a table key. Decode must still read them, or the relay
// (stream and sweep) skips them forever.
func TestDecodeReadsAnAggregateTypeNamedPending(t *testing.T) {
	w, err := outbox.New(outbox.Config{Table: "t"})
	require.NoError(t, err)
	e := newEnvelope("m1", "o-1", nil)
	e.AggregateType = "PENDING"
	put, err := w.Put(context.Background(), outbox.Event{Envelope: e})
	require.NoError(t, err)
	r, err := outbox.Decode(put.Put.Item, tables.DefaultLayout())
	require.NoError(t, err)
	require.Equal(t, "OUTBOX#PENDING#o-1", r.PK)
	require.Equal(t, outbox.StatusPending, r.Status)
}

// SQS refuses a message body with characters outside XML's (U+FFFE,
// U+FFFF among valid UTF-8): such a record, once committed, could never be
// sent and would stop its stream shard. Put refuses it before the commit.
func TestPutRefusesABodySQSWouldRefuse(t *testing.T) {
	w, err := outbox.New(outbox.Config{Table: "t"})
	require.NoError(t, err)
	for _, c := range []string{"\uffff", "\ufffe"} {
		e := newEnvelope("m1", "o-1", nil)
		e.Payload = []byte(`{"note":"` + c + `"}`)
		_, err = w.Put(context.Background(), outbox.Event{Envelope: e})
		require.ErrorIs(t, err, outbox.ErrInvalid, "%U", []rune(c)[0])
	}
	e := newEnvelope("m1", "o-1", nil)
	e.Payload = []byte(`{"note":"\uffff ok: escaped, é, 😀"}`)
	_, err = w.Put(context.Background(), outbox.Event{Envelope: e})
	require.NoError(t, err)
}
