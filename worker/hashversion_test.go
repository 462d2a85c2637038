package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

const typePriceSet = "PriceSet"

// priceHandlers registers PriceSet: an int64 payload field written to the
// price item, with a counter of applications. calls counts handler runs.
func priceHandlers(t *testing.T, table string, calls *atomic.Int64) *ddbworker.Registry {
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(typePriceSet, ddbworker.JSON(func(_ context.Context, _ *ddbworker.Message, p struct {
		SKU   string `json:"sku"`
		Cents int64  `json:"cents"`
	}) (ddbworker.Result, error) {
		calls.Add(1)
		return ddbworker.Apply(ddbworker.Update(table, ddbworker.Key{"PK": "PRICE#" + p.SKU, "SK": "PRICE"}).
			Set("cents", p.Cents).Add("applied", 1)), nil
	})))
	return reg
}

func priceEnvelope(key, payload string) *envelope.Envelope {
	return &envelope.Envelope{MessageID: testenv.Unique("m"), SchemaVersion: envelope.SchemaV1, MessageType: typePriceSet,
		Producer: "test", OccurredAt: time.Now(), IdempotencyKey: key, AggregateType: "sku", AggregateID: "A-1",
		Payload: []byte(payload)}
}

func (h *harness) price(sku string) (cents, applied int64) {
	item := h.item(map[string]ddbtypes.AttributeValue{
		"PK": &ddbtypes.AttributeValueMemberS{Value: "PRICE#" + sku}, "SK": &ddbtypes.AttributeValueMemberS{Value: "PRICE"}})
	return num(h.t, item, "cents"), num(h.t, item, "applied")
}

// Work that hashes the same decodes the same: a copy with 1234.0 arriving
// first is applied by a handler of an int64 field (it decodes the
// canonical payload), and the copy with 1234 after it is a duplicate.
func TestTypedHandlerAppliesIntegralNumberForms(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	var calls atomic.Int64
	h.start(h.testConfig(), worker.Deps{Handlers: priceHandlers(t, h.env.Table, &calls)})

	first := priceEnvelope("price-1", `{"sku":"A-1","cents":1234.0}`)
	h.send(first)
	ev := h.waitEvents(1, 20*time.Second, final)
	require.Equal(t, worker.OutcomeApplied, ev[0].Outcome, "%+v", ev[0])

	second := priceEnvelope("price-1", `{"cents":1.234e3,"sku":"A-1"}`)
	third := priceEnvelope("price-1", `{"sku":"A-1","cents":1234}`)
	h.send(second, third)
	evs := h.waitEvents(3, 20*time.Second, final)
	for _, ev := range evs[1:] {
		require.Equal(t, worker.OutcomeDuplicate, ev.Outcome, "%+v", ev)
	}
	cents, applied := h.price("A-1")
	require.EqualValues(t, 1234, cents)
	require.EqualValues(t, 1, applied)
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, inbox.StatusCompleted, h.record("price-1", typePriceSet).Status)
}

// A record written by a worker before hash versioning carries a v1 hash.
// A redelivery of the same work decoded today is compared in v1 and is a
// duplicate (COMPLETED) or taken over (FAILED_RETRYABLE: the inbox's
// conditions compare the stored hash); changed work under the key is
// still IDEMPOTENCY_HASH_MISMATCH.
func TestHashVersionV1Records(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	var calls atomic.Int64
	store := inbox.Store{Table: h.env.Table}

	// What an older worker wrote: the v1 hash of the work as first sent.
	putV1 := func(key, payload string, status inbox.Status) string {
		e := priceEnvelope(key, payload)
		v1, err := envelope.RequestHashVersion(e, envelope.HashV1)
		require.NoError(t, err)
		_, ok := envelope.HashVersionOf(v1)
		require.True(t, ok)
		rec := inbox.NewRecord(&inbox.Work{Key: key, MessageType: typePriceSet, RequestHash: v1, SchemaVersion: 1,
			AggregateType: "sku", AggregateID: "A-1"}, time.Now().Add(-time.Minute))
		rec.Status = status
		if status == inbox.StatusFailedRetryable {
			rec.FailureCode, rec.FailureMessage, rec.Attempts = "HANDLER_ERROR", "older worker failed", 1
		}
		_, err = h.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(h.env.Table), Item: store.Encode(rec)})
		require.NoError(t, err)
		return v1
	}
	v1Done := putV1("v1-done", `{"sku":"A-1","cents":500}`, inbox.StatusCompleted)
	v1Retry := putV1("v1-retry", `{"sku":"B-2","cents":700}`, inbox.StatusFailedRetryable)
	putV1("v1-other", `{"sku":"A-1","cents":500}`, inbox.StatusCompleted)

	h.start(h.testConfig(), worker.Deps{Handlers: priceHandlers(t, h.env.Table, &calls)})
	h.send(
		priceEnvelope("v1-done", `{"cents":500.0,"sku":"A-1"}`), // same work, new messageId, other spelling
		priceEnvelope("v1-retry", `{"sku":"B-2","cents":700}`),  // same work, retried after an older worker failed
		priceEnvelope("v1-other", `{"sku":"A-1","cents":501}`),  // another payload under a used key
	)
	evs := h.waitEvents(3, 30*time.Second, final)
	byKey := map[string]worker.Event{}
	for _, ev := range evs {
		byKey[ev.IdempotencyKey] = ev
	}
	require.Equal(t, worker.OutcomeDuplicate, byKey["v1-done"].Outcome, "%+v", byKey["v1-done"])
	require.Equal(t, worker.OutcomeApplied, byKey["v1-retry"].Outcome, "%+v", byKey["v1-retry"])
	require.Equal(t, worker.OutcomeTerminal, byKey["v1-other"].Outcome, "%+v", byKey["v1-other"])
	require.Equal(t, failure.CodeHashMismatch, byKey["v1-other"].Code)

	require.EqualValues(t, 1, calls.Load(), "only the retried work ran")
	cents, applied := h.price("B-2")
	require.EqualValues(t, 700, cents)
	require.EqualValues(t, 1, applied)
	_, appliedA := h.price("A-1")
	require.Zero(t, appliedA)

	// The records keep the hash their first writer stored.
	require.Equal(t, v1Done, h.record("v1-done", typePriceSet).RequestHash)
	retried := h.record("v1-retry", typePriceSet)
	require.Equal(t, inbox.StatusCompleted, retried.Status)
	require.Equal(t, v1Retry, retried.RequestHash)
	require.Equal(t, 1, retried.Attempts, "the older worker's failure; the commit counts none")
}
