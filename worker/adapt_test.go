package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// Bodies teams already send, read by a route's body adapter (an SNS
// subscription with raw message delivery off and on, through fauxqs's SNS;
// an EventBridge rule's SQS target and a service's own JSON, sent as they
// arrive): everything after admit is the envelope's path. Each scenario:
// the work applied once; the same work again in a new SQS message (a
// re-publish: new SNS MessageId and Timestamp, a new event id and time, a
// new sentAt) a duplicate; a changed body under the same key
// IDEMPOTENCY_HASH_MISMATCH; a body without a key terminal MISSING_FIELD,
// and one over the limits terminal with the limit's code, each recorded
// as a rejection with a DLQ copy that carries its code.

// orderPlaced is the test domain's event.
type orderPlaced struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
}

// orderHandler writes the order and counts its applications.
func orderHandler(table string) ddbworker.Handler {
	return ddbworker.JSON(func(_ context.Context, _ *ddbworker.Message, p orderPlaced) (ddbworker.Result, error) {
		return ddbworker.Apply(ddbworker.Update(table, ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "PLACED"}).
			Set("amountCents", p.AmountCents).Add("applications", 1)), nil
	})
}

func orderKey(id string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: "ORDER#" + id}, "SK": &ddbtypes.AttributeValueMemberS{Value: "PLACED"}}
}

// adaptScenario is one adapter's run against the emulators.
type adaptScenario struct {
	messageType string
	adapter     ddbworker.BodyAdapter
	// deliver puts one body on the queue as its producer does.
	deliver func(h *harness, body string)
	// first and again are the same work; changed is other work under the
	// same key; keyless yields no key; oversized breaks limit (code).
	first, again, changed, keyless, oversized string
	limit                                     string
	key, orderID                              string
}

const adaptMaxBodyBytes = 8 << 10

func (s adaptScenario) run(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(s.messageType, orderHandler(h.env.Table), ddbworker.Adapt(s.adapter)))
	cfg := h.testConfig()
	cfg.Envelope.MaxBodyBytes = adaptMaxBodyBytes
	h.start(cfg, worker.Deps{Handlers: reg})

	s.deliver(h, s.first)
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", ev)
	require.Equal(t, s.key, ev.IdempotencyKey)
	require.Equal(t, s.messageType, ev.MessageType)
	rec := h.record(s.key, s.messageType)
	require.NotNil(t, rec)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, "order", rec.AggregateType)
	require.Equal(t, s.orderID, rec.AggregateID)
	require.EqualValues(t, 1, num(t, h.item(orderKey(s.orderID)), "applications"))

	s.deliver(h, s.again)
	ev = h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeDuplicate, ev.Outcome, "the same work in a new message: %+v", ev)
	require.Equal(t, s.key, ev.IdempotencyKey)
	require.Equal(t, rec, h.record(s.key, s.messageType), "a duplicate writes nothing")
	require.EqualValues(t, 1, num(t, h.item(orderKey(s.orderID)), "applications"), "applied once")

	var rejected []worker.Event
	s.deliver(h, s.changed)
	ev = h.waitEvents(3, 20*time.Second, final)[2]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, failure.CodeHashMismatch, ev.Code, "%+v", ev)
	require.Equal(t, rec, h.record(s.key, s.messageType), "the work's record is untouched")
	item := h.item(orderKey(s.orderID))
	require.EqualValues(t, 1, num(t, item, "applications"))
	require.EqualValues(t, 1999, num(t, item, "amountCents"), "the changed body was not applied")
	rejected = append(rejected, ev)

	s.deliver(h, s.keyless)
	ev = h.waitEvents(4, 20*time.Second, final)[3]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, string(envelope.CodeMissingField), ev.Code, "a body without a key never defaults one: %+v", ev)
	require.Empty(t, ev.IdempotencyKey)
	rejected = append(rejected, ev)

	s.deliver(h, s.oversized)
	ev = h.waitEvents(5, 20*time.Second, final)[4]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, s.limit, ev.Code, "%+v", ev)
	rejected = append(rejected, ev)

	copies := map[string]string{}
	for _, m := range h.dlq(len(rejected)) {
		copies[aws.ToString(m.MessageAttributes[dlq.AttrSourceMessageID].StringValue)] = aws.ToString(m.MessageAttributes[dlq.AttrFailureCode].StringValue)
	}
	for _, ev := range rejected {
		require.Equal(t, worker.PolicyDLQ, ev.Policy)
		rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
		require.NoError(t, err, "a rejection record for %s", ev.Code)
		require.True(t, rej.Rejection)
		require.Equal(t, inbox.StatusFailedTerminal, rej.Status)
		require.Equal(t, ev.Code, rej.FailureCode)
		require.Equal(t, ev.Code, copies[ev.SQSMessageID], "the DLQ copy carries the code")
	}
	h.requireQueueEmpty()
}

// snsMessage is the orders service's own event, as it publishes it.
func snsMessage(orderID string, amountCents int64, pad int) string {
	b, _ := json.Marshal(map[string]any{"eventType": "OrderPlaced", "orderId": orderID, "version": 3, "amountCents": amountCents, "currency": "EUR",
		"note": strings.Repeat("x", pad)})
	return string(b)
}

// publish publishes body to the topic, with the eventType attribute an SNS
// filter policy would match.
func publish(t *testing.T, c *sns.Client, topic, body string) {
	t.Helper()
	_, err := c.Publish(context.Background(), &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(body),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{"eventType": {DataType: aws.String("String"), StringValue: aws.String("OrderPlaced")}}})
	require.NoError(t, err)
}

// TestAdaptSNS publishes through fauxqs's SNS to a topic the queue is
// subscribed to: a notification JSON with raw message delivery off, the
// message itself with it on. A re-publish is a new SNS message (new
// MessageId and Timestamp) and a new SQS message.
func TestAdaptSNS(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "notification", true: "raw delivery"}[raw], func(t *testing.T) {
			var topic string
			c := testenv.SNS(t)
			adaptScenario{
				messageType: "OrderPlaced",
				adapter: ddbworker.SNS(ddbworker.JSONBody{Type: "eventType", Key: "join(':', ['order', orderId, 'placed'])",
					AggregateType: "'order'", AggregateID: "orderId", AggregateVersion: "version"}),
				deliver: func(h *harness, body string) {
					if topic == "" {
						topic = testenv.Topic(t, c, h.env.SQS, h.env.Queues.URL, raw)
					}
					publish(t, c, topic, body)
				},
				first:     snsMessage("o-1042", 1999, 0),
				again:     snsMessage("o-1042", 1999, 0),
				changed:   snsMessage("o-1042", 2999, 0),
				keyless:   `{"eventType":"OrderPlaced","version":3,"amountCents":1999}`,
				oversized: snsMessage("o-1043", 1999, adaptMaxBodyBytes),
				limit:     string(envelope.CodeInvalidJSON),
				key:       "order:o-1042:placed", orderID: "o-1042",
			}.run(t)
		})
	}
}

// TestAdaptEventBridge sends the events an EventBridge rule's SQS target
// delivers (fauxqs has no EventBridge): the documented event, and the
// same event put again (new id, new time).
func TestAdaptEventBridge(t *testing.T) {
	event, err := os.ReadFile("../envelope/testdata/adapt/eventbridge-event.json")
	require.NoError(t, err)
	again, err := os.ReadFile("../envelope/testdata/adapt/eventbridge-event-again.json")
	require.NoError(t, err)
	edit := func(f func(detail map[string]any)) string {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(event, &ev))
		ev["id"] = testenv.Unique("event")
		f(ev["detail"].(map[string]any))
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		return string(b)
	}
	adaptScenario{
		messageType: "OrderPlaced",
		adapter: ddbworker.EventBridge{DetailType: "Order Placed", Source: "com.example.orders",
			Key:           "join(':', ['order', detail.orderId, 'placed'])",
			AggregateType: "'order'", AggregateID: "detail.orderId", AggregateVersion: "detail.version"},
		deliver:   func(h *harness, body string) { h.sendRaw(body) },
		first:     string(event),
		again:     string(again),
		changed:   edit(func(d map[string]any) { d["amountCents"] = 2999 }),
		keyless:   edit(func(d map[string]any) { delete(d, "orderId") }),
		oversized: edit(func(d map[string]any) { d["orderId"] = strings.Repeat("o", 600) }),
		limit:     string(envelope.CodeKeyTooLong),
		key:       "order:o-1042:placed", orderID: "o-1042",
	}.run(t)
}

// TestAdaptJSON sends a service's own JSON; what changes per send
// (sentAt) is outside the payload.
func TestAdaptJSON(t *testing.T) {
	body := func(orderID string, amountCents int64, sentAt string) string {
		b, _ := json.Marshal(map[string]any{"kind": "order.placed", "order": map[string]any{"orderId": orderID, "amountCents": amountCents}, "sentAt": sentAt})
		return string(b)
	}
	adaptScenario{
		messageType: "order.placed",
		adapter: ddbworker.JSONBody{Type: "kind", Key: "order.orderId", AggregateType: "'order'", AggregateID: "order.orderId",
			Payload: "order", OccurredAt: "sentAt"},
		deliver:   func(h *harness, b string) { h.sendRaw(b) },
		first:     body("o-1042", 1999, "2026-03-29T05:12:16Z"),
		again:     body("o-1042", 1999, "2026-03-29T05:13:40Z"),
		changed:   body("o-1042", 2999, "2026-03-29T05:14:00Z"),
		keyless:   `{"kind":"order.placed","order":{"amountCents":1999}}`,
		oversized: `{"kind":"order.placed","order":{"orderId":"o-1","amountCents":1,"pad":"` + strings.Repeat("p", adaptMaxBodyBytes) + `"}}`,
		limit:     string(envelope.CodeInvalidJSON),
		key:       "o-1042", orderID: "o-1042",
	}.run(t)
}

// TestAdaptJSONSchemaVersion sends a service's own JSON that carries a
// top-level schemaVersion of its own (not ddbworker's envelope): its
// adapter reads it, by its type member. Old behaviour: every such body was
// taken for a malformed envelope (terminal MISSING_FIELD messageId).
func TestAdaptJSONSchemaVersion(t *testing.T) {
	body := func(orderID string, amountCents int64, sentAt string) string {
		b, _ := json.Marshal(map[string]any{"schemaVersion": 1, "eventType": "OrderPlaced", "orderId": orderID, "amountCents": amountCents,
			"sentAt": sentAt})
		return string(b)
	}
	adaptScenario{
		messageType: "OrderPlaced",
		adapter: ddbworker.JSONBody{Type: "eventType", Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId",
			Payload: "{orderId: orderId, amountCents: amountCents}", OccurredAt: "sentAt"},
		deliver:   func(h *harness, b string) { h.sendRaw(b) },
		first:     body("o-1042", 1999, "2026-03-29T05:12:16Z"),
		again:     body("o-1042", 1999, "2026-03-29T05:13:40Z"),
		changed:   body("o-1042", 2999, "2026-03-29T05:14:00Z"),
		keyless:   `{"schemaVersion":1,"eventType":"OrderPlaced","amountCents":1999}`,
		oversized: `{"schemaVersion":1,"eventType":"OrderPlaced","orderId":"` + strings.Repeat("o", 600) + `","amountCents":1}`,
		limit:     string(envelope.CodeKeyTooLong),
		key:       "order:o-1042:placed", orderID: "o-1042",
	}.run(t)
}

// TestLambdaAdaptedBody: under Lambda (HandleSQSEvent) an adapted body
// takes the same path: here a raw SNS delivery whose type is the message
// attribute an SNS filter policy matches, carried into the Lambda event's
// messageAttributes. Published again, it is a duplicate.
func TestLambdaAdaptedBody(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPlaced", orderHandler(h.env.Table), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
		TypeAttribute: "eventType", Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId"}))))
	w := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: reg})
	c := testenv.SNS(t)
	topic := testenv.Topic(t, c, h.env.SQS, h.env.Queues.URL, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, want := range []string{worker.OutcomeApplied, worker.OutcomeDuplicate} {
		publish(t, c, topic, `{"orderId":"o-7","amountCents":1999}`)
		ev := h.sqsEvent(1, 30*time.Second)
		require.Equal(t, "OrderPlaced", aws.ToString(ev[0].MessageAttributes["eventType"].StringValue), "raw delivery carries the SNS attributes")
		resp, err := w.HandleSQSEvent(ctx, ev)
		require.NoError(t, err)
		require.Empty(t, resp, "%+v", h.allEvents())
		got := h.waitEvents(i+1, 10*time.Second, final)[i]
		require.Equal(t, want, got.Outcome, "%+v", got)
		require.Equal(t, "order:o-7:placed", got.IdempotencyKey)
	}
	require.EqualValues(t, 1, num(t, h.item(orderKey("o-7")), "applications"))
	rec := h.record("order:o-7:placed", "OrderPlaced")
	require.Equal(t, "sns", rec.Producer, "raw delivery names no topic")
}
