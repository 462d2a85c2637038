package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// hashWriteRun is one worker writing records in the store's request hash
// version, on a table where a worker of the previous release (v2) and one
// of this release writing v3 already recorded work: every redelivery of
// recorded work is a duplicate, whichever version recorded it and
// whichever this worker writes, and new work is recorded in the store's
// version. The payloads hold a U+2028, which v2 escapes and v3 does not:
// the two versions' canonical texts differ, not only their prefixes.
func hashWriteRun(t *testing.T, store func(*inbox.Store), opts ...ddbworker.RouteOption) (fresh string) {
	h := newHarness(t, testenv.Options{})
	var calls atomic.Int64
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(typePriceSet, ddbworker.JSON(func(_ context.Context, _ *ddbworker.Message, p struct {
		SKU   string `json:"sku"`
		Cents int64  `json:"cents"`
	}) (ddbworker.Result, error) {
		calls.Add(1)
		return ddbworker.Apply(ddbworker.Update(h.env.Table, ddbworker.Key{"PK": "PRICE#" + p.SKU, "SK": "PRICE"}).
			Set("cents", p.Cents).Add("applied", 1)), nil
	}), opts...))

	put := func(v envelope.HashVersion, key, payload string) {
		stored, err := envelope.RequestHashVersion(priceEnvelope(key, payload), v)
		require.NoError(t, err)
		rec := inbox.NewRecord(&inbox.Work{Key: key, MessageType: typePriceSet, RequestHash: stored, SchemaVersion: 1,
			AggregateType: "sku", AggregateID: "A-1"}, time.Now().Add(-time.Minute))
		rec.Status = inbox.StatusCompleted
		_, err = h.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(h.env.Table), Item: (inbox.Store{Table: h.env.Table}).Encode(rec)})
		require.NoError(t, err)
	}
	const note = `"note":"` + "\u2028" + `"`
	put(envelope.HashV2, "old-release", `{"sku":"A-1","cents":500,`+note+`}`)
	put(envelope.HashV3, "v3-writer", `{"sku":"A-1","cents":600,`+note+`}`)

	cfg := h.testConfig()
	store(&cfg.Store)
	h.start(cfg, worker.Deps{Handlers: reg})
	h.send(priceEnvelope("fresh", `{"sku":"B-2","cents":700,`+note+`}`))
	require.Equal(t, worker.OutcomeApplied, h.waitEvents(1, 30*time.Second, final)[0].Outcome)
	h.send(
		priceEnvelope("old-release", `{`+note+`,"cents":5e2,"sku":"A-1"}`),
		priceEnvelope("v3-writer", `{"sku":"A-1","cents":600.0,`+note+`}`),
		priceEnvelope("fresh", `{"cents":700,"sku":"B-2",`+note+`}`),
	)
	byKey := map[string]worker.Event{}
	for n := 4; len(byKey) < 3; n++ {
		clear(byKey)
		for _, ev := range h.waitEvents(n, 30*time.Second, final)[1:] {
			if _, seen := byKey[ev.IdempotencyKey]; !seen {
				byKey[ev.IdempotencyKey] = ev
			}
		}
	}
	for key, ev := range byKey {
		require.Equal(t, worker.OutcomeDuplicate, ev.Outcome, "%s: %+v", key, ev)
	}
	// A fused route runs the handler before its commit finds the record:
	// the domain items say what was applied.
	require.GreaterOrEqual(t, calls.Load(), int64(1))
	_, applied := h.price("B-2")
	require.EqualValues(t, 1, applied, "the fresh work, once")
	_, applied = h.price("A-1")
	require.Zero(t, applied, "recorded work is never applied again")
	return h.record("fresh", typePriceSet).RequestHash
}

// A worker writes new records in the request hash version its store
// names — v2 unless told v3, the version a table records when it records
// none (a table of an earlier release): a worker of the previous release,
// which knows v1 and v2 only, shares the table through a rolling deploy
// and must be able to read every record written. Old code wrote v3
// whatever the table, which the old worker judged a hash mismatch.
func TestHashVersionWrittenByDefaultIsV2(t *testing.T) {
	for name, opts := range map[string][]ddbworker.RouteOption{"gated": nil, "fused": {ddbworker.Fused()}} {
		t.Run(name, func(t *testing.T) {
			stored := hashWriteRun(t, func(s *inbox.Store) { s.RequestHashVersion = 0 }, opts...)
			require.True(t, strings.HasPrefix(stored, "v2:"), "new work recorded %q, want v2:", stored)
		})
	}
}

// A table recorded v3 (inbox.Store.RequestHashVersion 3) is written v3,
// and records of the previous release (v2) stay duplicates.
func TestHashVersionWrittenV3WhenStoreSays(t *testing.T) {
	for name, opts := range map[string][]ddbworker.RouteOption{"gated": nil, "fused": {ddbworker.Fused()}} {
		t.Run(name, func(t *testing.T) {
			stored := hashWriteRun(t, func(s *inbox.Store) { s.RequestHashVersion = 3 }, opts...)
			require.True(t, strings.HasPrefix(stored, "v3:"), "new work recorded %q, want v3:", stored)
		})
	}
}

// The envelope's limits may name the version only as the store does: one
// version is written, the one the table records.
func TestHashVersionConfigDisagreement(t *testing.T) {
	cfg := worker.Config{Store: inbox.Store{Table: "t", RequestHashVersion: 2}, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q",
		DLQURL: "https://sqs.eu-west-1.amazonaws.com/1/d", Envelope: envelope.Config{HashVersion: envelope.HashV3}}
	_, err := cfg.WithDefaults()
	require.ErrorContains(t, err, "Config.Envelope.HashVersion v3 differs from Config.Store.RequestHashVersion 2")
	cfg.Envelope.HashVersion = 0
	cfg, err = cfg.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, envelope.HashV2, cfg.Envelope.HashVersion)
	cfg.Store.RequestHashVersion = 4
	_, err = cfg.WithDefaults()
	require.ErrorContains(t, err, "RequestHashVersion 4 must be 2 or 3")
}
