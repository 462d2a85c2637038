package ddbworkertest_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

func adaptBody(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../envelope/testdata/adapt/" + name)
	require.NoError(t, err)
	return b
}

type placed struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
}

// A handler author's test of an adapted route: the bodies the queue
// receives go through the route's adapter, as in the worker.
func TestAdaptedBodies(t *testing.T) {
	var seen []*ddbworker.Message
	h := ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p placed) (ddbworker.Result, error) {
		seen = append(seen, m)
		return ddbworker.Apply(ddbworker.Put("app", ddbworker.Key{"PK": "ORDER#" + p.OrderID, "SK": "ORDER"}, ddbworker.Item{"amountCents": p.AmountCents})), nil
	})
	reg := ddbworker.NewRegistry()
	orders := ddbworker.SNS(ddbworker.JSONBody{Type: "eventType", Key: "join(':', [orderId, eventType])",
		AggregateType: "'order'", AggregateID: "orderId", AggregateVersion: "version"})
	require.NoError(t, reg.Register("OrderPlaced", h, ddbworker.Adapt(orders)))
	require.NoError(t, reg.Register("OrderPlacedEvent", h, ddbworker.Adapt(ddbworker.EventBridge{
		DetailType: "Order Placed", Key: "join(':', [detail.orderId, 'OrderPlaced'])", AggregateType: "'order'", AggregateID: "detail.orderId"})))
	require.NoError(t, reg.Register("OrderTagged", h, ddbworker.Adapt(ddbworker.JSONBody{TypeAttribute: "kind", Key: "orderId",
		AggregateType: "'order'", AggregateID: "orderId"})))
	kit := ddbworkertest.NewRegistry(reg)

	var hashes []string
	for _, name := range []string{"sns-notification.json", "sns-republished.json", "sns-raw.json"} {
		res := kit.RequireWork(t, ddbworkertest.FromBody(adaptBody(t, name)))
		res.RequireApplied(t)
		require.Equal(t, "o-1042:OrderPlaced", res.Message.Key())
		require.Equal(t, "OrderPlaced", res.Message.Type())
		v, ok := res.Message.AggregateVersion()
		require.True(t, ok)
		require.EqualValues(t, 3, v)
		hashes = append(hashes, res.Envelope.RequestHash)
	}
	require.Equal(t, hashes[0], hashes[1], "a re-publish is the same work")
	require.Equal(t, hashes[0], hashes[2], "so is the raw delivery")
	require.Equal(t, "test-sqs-message", seen[2].Envelope.MessageID, "raw: the delivery's SQS MessageId")
	require.Equal(t, ddbworkertest.DefaultOccurredAt, seen[2].OccurredAt(), "raw: the delivery's SentTimestamp")

	ev := kit.RequireWork(t, ddbworkertest.FromBody(adaptBody(t, "eventbridge-event.json")))
	ev.RequireApplied(t)
	require.Equal(t, "OrderPlacedEvent", ev.Message.Type())
	require.EqualValues(t, 1999, ev.RequireWrite(t, "app", ddbworker.Key{"PK": "ORDER#o-1042", "SK": "ORDER"}).Item["amountCents"])

	tagged := kit.RequireWork(t, ddbworkertest.FromBody([]byte(`{"orderId":"o-9"}`), ddbworkertest.Attribute("kind", "OrderTagged")))
	tagged.RequireApplied(t)
	require.Equal(t, "OrderTagged", tagged.Message.Type())

	for _, tc := range []struct {
		name string
		msg  ddbworkertest.Message
		code string
	}{
		{"no key", ddbworkertest.FromBody([]byte(`{"eventType":"OrderPlaced","version":1}`)), string(envelope.CodeMissingField)},
		{"no type", ddbworkertest.FromBody([]byte(`{"orderId":"o-1"}`)), string(envelope.CodeMissingField)},
		{"a type no route has", ddbworkertest.FromBody([]byte(`{"eventType":"OrderShipped","orderId":"o-1"}`)), failure.CodeUnknownMessageType},
		{"an event no route takes", ddbworkertest.FromBody([]byte(`{"detail-type":"Order Shipped","source":"s","detail":{}}`)), failure.CodeUnknownMessageType},
		{"a repeated member", ddbworkertest.FromBody([]byte(`{"eventType":"OrderPlaced","orderId":"o-1","orderId":"o-2"}`)), string(envelope.CodeInvalidJSON)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := kit.RequireWork(t, tc.msg)
			f := res.RequireTerminal(t, tc.code)
			require.Nil(t, res.Message, "the handler did not run")
			var ee *envelope.Error
			require.ErrorAs(t, f.Err, &ee, "the adapter's error is reachable")
		})
	}

	// The adapted route still takes ddbworker envelopes of its type.
	res := kit.RequireWork(t, ddbworkertest.NewMessage("OrderPlaced", placed{OrderID: "o-1", AmountCents: 5}))
	res.RequireApplied(t)
}
