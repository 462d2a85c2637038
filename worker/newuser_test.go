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
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tracing"
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
// NewerThan on their timestamp, on the gated, the fused and the
// single-write route (where the timestamp is the fence's version): the
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
		{"single-write", []ddbworker.RouteOption{ddbworker.SingleWrite()}},
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
			item := h.item(statusOrderItemKey("o1"))
			require.Equal(t, t3, str(item, "statusAt"))
			if route.name == "single-write" {
				require.Equal(t, "e-4", str(item, ddbworker.FenceKeyAttr("statusAt")), "the fence names the newest event's work")
				require.Nil(t, h.record("e-4", typeOrderStatus), "no inbox record")
			}
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

// TestTraceSNSNotification: a traceparent (and tracestate) the publisher
// sends as an SNS message attribute reaches the worker, through a real
// SNS→SQS subscription, inside the notification's MessageAttributes with
// raw delivery off and as an SQS message attribute with it on; either way
// the consumer span links to it. Before, with raw delivery off, no span
// linked to it (2,801 spans, issue 24).
func TestTraceSNSNotification(t *testing.T) {
	producer := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xa1, 2, 3, 4}, SpanID: trace.SpanID{0xb1, 2, 3},
		TraceFlags: trace.FlagsSampled, TraceState: mustTraceState(t, "vendor=sns"), Remote: true})
	carried := tracing.Carry(producer)
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "notification", true: "raw delivery"}[raw], func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			reg := ddbworker.NewRegistry()
			require.NoError(t, reg.Register("OrderPlaced", orderHandler(h.env.Table), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
				TypeAttribute: "eventType", Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId"}))))
			sp := newSpans(t)
			c := testenv.SNS(t)
			topic := testenv.Topic(t, c, h.env.SQS, h.env.Queues.URL, raw)
			attrs := map[string]snstypes.MessageAttributeValue{"eventType": {DataType: aws.String("String"), StringValue: aws.String("OrderPlaced")}}
			for _, name := range []string{tracing.AttrTraceparent, tracing.AttrTracestate} {
				attrs[name] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: carried[name].StringValue}
			}
			_, err := c.Publish(context.Background(), &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(`{"orderId":"o-9","amountCents":1999}`),
				MessageAttributes: attrs})
			require.NoError(t, err)
			h.start(h.testConfig(), worker.Deps{Handlers: reg, TracerProvider: sp.tp})
			// Applied (or, on a loaded machine, applied by a commit whose
			// deadline passed and found a duplicate on the redelivery).
			require.Contains(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate}, h.waitEvents(1, 20*time.Second, final)[0].Outcome, "%+v", h.allEvents())
			require.EqualValues(t, 1, num(t, h.item(orderKey("o-9")), "applications"))
			consumer := sp.wait(1, consumerOf(h.env.Queues.URL))[0]
			requireConsumer(t, consumer, h.env.Queues.URL, producer)
			require.Equal(t, "vendor=sns", consumer.Links()[0].SpanContext.TraceState().String(), "the tracestate too")
		})
	}
}

func mustTraceState(t *testing.T, s string) trace.TraceState {
	ts, err := trace.ParseTraceState(s)
	require.NoError(t, err)
	return ts
}
