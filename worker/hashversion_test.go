package worker_test

import (
	"context"
	"strings"
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

// A record written by an older worker carries the hash of its version: v1
// (before hash versioning) or v2 (before v3). A redelivery of the same work
// decoded today is compared in the record's version and is a duplicate
// (COMPLETED) or taken over (FAILED_RETRYABLE: the inbox's conditions
// compare the stored hash); changed work under the key is still
// IDEMPOTENCY_HASH_MISMATCH. The v2 payloads hold a U+2028, which v2
// escapes and v3 does not: their canonical texts differ, not only the
// prefix.
func TestHashVersionV1Records(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	var calls atomic.Int64
	store := inbox.Store{Table: h.env.Table}

	// What an older worker wrote: the hash of the work as first sent.
	put := func(v envelope.HashVersion, key, payload string, status inbox.Status) string {
		e := priceEnvelope(key, payload)
		stored, err := envelope.RequestHashVersion(e, v)
		require.NoError(t, err)
		got, ok := envelope.HashVersionOf(stored)
		require.True(t, ok)
		require.Equal(t, v, got)
		rec := inbox.NewRecord(&inbox.Work{Key: key, MessageType: typePriceSet, RequestHash: stored, SchemaVersion: 1,
			AggregateType: "sku", AggregateID: "A-1"}, time.Now().Add(-time.Minute))
		rec.Status = status
		if status == inbox.StatusFailedRetryable {
			rec.FailureCode, rec.FailureMessage, rec.Attempts = "HANDLER_ERROR", "older worker failed", 1
		}
		_, err = h.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(h.env.Table), Item: store.Encode(rec)})
		require.NoError(t, err)
		return stored
	}
	v1Done := put(envelope.HashV1, "v1-done", `{"sku":"A-1","cents":500}`, inbox.StatusCompleted)
	v1Retry := put(envelope.HashV1, "v1-retry", `{"sku":"B-2","cents":700}`, inbox.StatusFailedRetryable)
	put(envelope.HashV1, "v1-other", `{"sku":"A-1","cents":500}`, inbox.StatusCompleted)
	v2Done := put(envelope.HashV2, "v2-done", `{"sku":"A-1","cents":500,"note":"\u2028"}`, inbox.StatusCompleted)
	v2Retry := put(envelope.HashV2, "v2-retry", `{"sku":"C-3","cents":900,"note":"\u2028"}`, inbox.StatusFailedRetryable)
	put(envelope.HashV2, "v2-other", `{"sku":"A-1","cents":500,"note":"\u2028"}`, inbox.StatusCompleted)

	h.start(h.testConfig(), worker.Deps{Handlers: priceHandlers(t, h.env.Table, &calls)})
	h.send(
		priceEnvelope("v1-done", `{"cents":500.0,"sku":"A-1"}`), // same work, new messageId, other spelling
		priceEnvelope("v1-retry", `{"sku":"B-2","cents":700}`),  // same work, retried after an older worker failed
		priceEnvelope("v1-other", `{"sku":"A-1","cents":501}`),  // another payload under a used key
		priceEnvelope("v2-done", `{"note":"`+"\u2028"+`","cents":5e2,"sku":"A-1"}`),
		priceEnvelope("v2-retry", `{"sku":"C-3","cents":900,"note":"\u2028"}`),
		priceEnvelope("v2-other", `{"sku":"A-1","cents":500,"note":"\u2029"}`),
	)
	// The first final event of each key: a slow machine may redeliver a
	// message before its delete lands, and that copy is a duplicate.
	byKey := map[string]worker.Event{}
	for n := 6; len(byKey) < 6; n++ {
		clear(byKey)
		for _, ev := range h.waitEvents(n, 30*time.Second, final) {
			if _, seen := byKey[ev.IdempotencyKey]; !seen {
				byKey[ev.IdempotencyKey] = ev
			}
		}
	}
	for _, v := range []string{"v1", "v2"} {
		require.Equal(t, worker.OutcomeDuplicate, byKey[v+"-done"].Outcome, "%+v", byKey[v+"-done"])
		require.Equal(t, worker.OutcomeApplied, byKey[v+"-retry"].Outcome, "%+v", byKey[v+"-retry"])
		require.Equal(t, worker.OutcomeTerminal, byKey[v+"-other"].Outcome, "%+v", byKey[v+"-other"])
		require.Equal(t, failure.CodeHashMismatch, byKey[v+"-other"].Code)
	}

	require.EqualValues(t, 2, calls.Load(), "only the retried work ran")
	for _, sku := range []string{"B-2", "C-3"} {
		_, applied := h.price(sku)
		require.EqualValues(t, 1, applied, sku)
	}
	cents, _ := h.price("B-2")
	require.EqualValues(t, 700, cents)
	_, appliedA := h.price("A-1")
	require.Zero(t, appliedA)

	// The records keep the hash their first writer stored.
	for key, stored := range map[string]string{"v1-done": v1Done, "v1-retry": v1Retry, "v2-done": v2Done, "v2-retry": v2Retry} {
		rec := h.record(key, typePriceSet)
		require.Equal(t, stored, rec.RequestHash, key)
		if strings.HasSuffix(key, "-retry") {
			require.Equal(t, inbox.StatusCompleted, rec.Status, key)
			require.Equal(t, 1, rec.Attempts, "%s: the older worker's failure; the commit counts none", key)
		}
	}
}
