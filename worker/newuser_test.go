package worker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// What a new user met (issue 24): events that carry a timestamp and no
// version, ordered by a NewerThan guard; and the handler re-runs an
// ExpectVersion guard costs, counted.

const typeOrderStatus = "OrderStatusChanged"

// orderStatus is an event a new user's producer sends: an order's status at
// an instant (RFC 3339, fixed width, UTC), no version.
type orderStatus struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
	At      string `json:"at"`
}

func orderEnvelope(t *testing.T, key string, p orderStatus) *envelope.Envelope {
	t.Helper()
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	env := &envelope.Envelope{
		MessageID: caseflow.NewID("m-"), SchemaVersion: envelope.SchemaV1, MessageType: typeOrderStatus,
		Producer: "orders", OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		IdempotencyKey: key, AggregateType: "Order", AggregateID: p.OrderID, Payload: raw,
	}
	env.RequestHash, err = envelope.RequestHash(env)
	require.NoError(t, err)
	return env
}

func statusOrderKey(id string) ddbworker.Key {
	return ddbworker.Key{"PK": "ORDER#" + id, "SK": "ORDER"}
}

func statusOrderItemKey(id string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "ORDER#" + id}, "SK": &ddbtypes.AttributeValueMemberS{Value: "ORDER"}}
}

// TestNewerThanOrdersByTimestamp: an order's status events, guarded by
// NewerThan on their timestamp, on the gated and the fused route: the
// first (no item) and a newer one apply; an older and an equal one are
// superseded, each in one handler run — no read, no re-run — and the item
// keeps the newest status.
func TestNewerThanOrdersByTimestamp(t *testing.T) {
	for _, route := range []struct {
		name string
		opts []ddbworker.RouteOption
	}{
		{"gated", nil},
		{"fused", []ddbworker.RouteOption{ddbworker.Fused()}},
	} {
		t.Run(route.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			var runs atomic.Int32
			reg := ddbworker.NewRegistry()
			require.NoError(t, reg.Register(typeOrderStatus, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p orderStatus) (ddbworker.Result, error) {
				runs.Add(1)
				return ddbworker.Apply(ddbworker.Update(h.env.Table, statusOrderKey(p.OrderID)).Set("orderStatus", p.Status).Set("statusAt", p.At).
					Guard(ddbworker.NewerThan("statusAt", p.At))), nil
			}), route.opts...))
			metrics := metricstest.New()
			h.start(h.testConfig(), worker.Deps{Handlers: reg, Metrics: metrics})

			const t1, t2, t3 = "2025-06-01T12:00:00.000Z", "2025-06-01T12:00:01.000Z", "2025-06-01T12:00:02.000Z"
			for i, step := range []struct {
				name   string
				key    string
				event  orderStatus
				want   string
				status string
			}{
				{"absent: applies", "e-1", orderStatus{"o1", "PAID", t2}, worker.OutcomeApplied, "PAID"},
				{"older: superseded", "e-2", orderStatus{"o1", "PLACED", t1}, worker.OutcomeSuperseded, "PAID"},
				{"equal: superseded", "e-3", orderStatus{"o1", "CANCELLED", t2}, worker.OutcomeSuperseded, "PAID"},
				{"newer: applies", "e-4", orderStatus{"o1", "SHIPPED", t3}, worker.OutcomeApplied, "SHIPPED"},
			} {
				h.send(orderEnvelope(t, step.key, step.event))
				ev := h.waitEvents(i+1, 20*time.Second, final)[i]
				require.Equal(t, step.key, ev.IdempotencyKey, step.name)
				require.Equal(t, step.want, ev.Outcome, "%s: %+v", step.name, ev)
				require.Empty(t, ev.Code, step.name)
				item := h.item(statusOrderItemKey("o1"))
				require.Equal(t, step.status, str(item, "orderStatus"), step.name)
				require.EqualValues(t, i+1, runs.Load(), "%s: one handler run per message", step.name)
			}
			require.Equal(t, t3, str(h.item(statusOrderItemKey("o1")), "statusAt"))
			require.Zero(t, metrics.Value("ddbworker_handler_reruns_total", typeOrderStatus), "no re-run")
			h.requireQueueEmpty()
		})
	}
}

// TestHandlerRerunsCounted: a handler whose ExpectVersion guard loses its
// optimistic race (it read version 0; the item is at 1) is re-run by the
// worker, and ddbworker_handler_reruns_total counts the re-run by message
// type. Before it, 47 re-runs in 2,500 deliveries showed in no metric.
func TestHandlerRerunsCounted(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	seed := statusOrderItemKey("o1")
	seed["v"] = &ddbtypes.AttributeValueMemberN{Value: "1"}
	_, err := h.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.env.Table), Item: seed})
	require.NoError(t, err)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(typeOrderStatus, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p orderStatus) (ddbworker.Result, error) {
		read := int64(m.Run) // the first run read a stale version 0; the re-run reads 1
		return ddbworker.Apply(ddbworker.Update(h.env.Table, statusOrderKey(p.OrderID)).Set("orderStatus", p.Status).Set("v", read+1).
			Guard(ddbworker.ExpectVersion("v", read))), nil
	})))
	metrics := metricstest.New()
	h.start(h.testConfig(), worker.Deps{Handlers: reg, Metrics: metrics})
	h.send(orderEnvelope(t, "e-rerun", orderStatus{"o1", "PAID", "2025-06-01T12:00:00.000Z"}))
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", ev)
	require.Equal(t, 1.0, metrics.Value("ddbworker_handler_reruns_total", typeOrderStatus), "one re-run, counted")
	require.EqualValues(t, 2, num(t, h.item(statusOrderItemKey("o1")), "v"))
}
