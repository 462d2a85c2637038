package ddbworker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

func TestRegisterAdaptRefuses(t *testing.T) {
	h := ddbworker.JSON(placeOrder)
	valid := ddbworker.JSONBody{Type: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}
	catchAll := ddbworker.JSONBody{Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}
	for _, tc := range []struct {
		name    string
		first   ddbworker.BodyAdapter // registered as "First" before, when set
		typ     string
		adapter ddbworker.BodyAdapter
		adapt   bool // an *envelope.AdapterError
	}{
		{"nil", nil, "T", nil, false},
		{"SNS of nothing", nil, "T", ddbworker.SNS(nil), false},
		{"SNS of SNS", nil, "T", ddbworker.SNS(ddbworker.SNS(valid)), false},
		{"no key", nil, "T", ddbworker.JSONBody{AggregateType: "'order'", AggregateID: "orderId"}, true},
		{"an event without a key", nil, "T", ddbworker.EventBridge{AggregateType: "'order'", AggregateID: "detail.orderId"}, true},
		{"no expression", nil, "T", ddbworker.JSONBody{Key: "[orderId", AggregateType: "'order'", AggregateID: "orderId"}, true},
		{"type and attribute", nil, "T", ddbworker.JSONBody{Type: "t", TypeAttribute: "t", Key: "k", AggregateType: "'o'", AggregateID: "k"}, true},
		{"a message type with spaces", nil, "Order Placed", ddbworker.EventBridge{Key: "detail.orderId", AggregateType: "'order'", AggregateID: "detail.orderId"}, true},
		{"after a catch-all", catchAll, "T", valid, true},
		{"after a catch-all via SNS, an SNS route", ddbworker.SNS(catchAll), "T", ddbworker.SNS(valid), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ddbworker.NewRegistry()
			if tc.first != nil {
				require.NoError(t, reg.Register("First", h, ddbworker.Adapt(tc.first)))
			}
			err := reg.Register(tc.typ, h, ddbworker.Adapt(tc.adapter))
			require.Error(t, err)
			if tc.adapt {
				require.ErrorIs(t, err, envelope.ErrAdapter)
			}
			_, ok := reg.Lookup(tc.typ)
			require.False(t, ok, "a refused route is not registered")
			require.Equal(t, tc.first != nil, reg.Adapters().Len() == 1)
		})
	}
}

func TestRegisterAdapted(t *testing.T) {
	reg := ddbworker.NewRegistry()
	h := ddbworker.JSON(placeOrder)
	orders := ddbworker.SNS(ddbworker.JSONBody{Type: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"})
	require.NoError(t, reg.Register("OrderPlaced", h, ddbworker.Adapt(orders)))
	require.NoError(t, reg.Register("plain", h))
	require.NoError(t, reg.Register("OrderShipped", h, ddbworker.Adapt(orders), ddbworker.Fused()))
	require.NoError(t, reg.Register("Order.Event", h, ddbworker.Adapt(ddbworker.EventBridge{DetailType: "Order Event", Key: "detail.id", AggregateType: "'order'", AggregateID: "detail.id"})))
	require.Equal(t, []string{"OrderPlaced", "OrderShipped", "Order.Event"}, reg.Adapters().Types(), "in registration order")
	rt, ok := reg.Lookup("OrderShipped")
	require.True(t, ok)
	require.True(t, rt.Fused)
	require.Equal(t, "SNS(JSON)", rt.Adapter.String())
	plain, _ := reg.Lookup("plain")
	require.Nil(t, plain.Adapter)
}

// The code of an adapted body no route takes is the worker's own.
func TestUnknownMessageTypeCode(t *testing.T) {
	require.Equal(t, failure.CodeUnknownMessageType, string(envelope.CodeUnknownMessageType))
}
