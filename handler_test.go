package ddbworker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
)

// Copies of one work item that hash the same decode the same, whichever
// spelling arrives first: JSON decodes the canonical payload. Pure logic:
// no emulator involved.
func TestJSONDecodesCanonicalPayload(t *testing.T) {
	type price struct {
		Cents int64   `json:"cents"`
		Rate  float64 `json:"rate"`
		Tags  []any   `json:"tags"`
	}
	decode := func(payload string) (*envelope.Envelope, price, error) {
		t.Helper()
		e, err := (*envelope.Decoder)(nil).Decode([]byte(`{"messageId":"m","schemaVersion":1,"messageType":"PriceSet","producer":"p",` +
			`"occurredAt":"2026-03-01T12:00:00Z","idempotencyKey":"k","aggregateType":"sku","aggregateId":"A-1","payload":` + payload + `}`))
		require.NoError(t, err)
		var got price
		_, err = ddbworker.JSON(func(_ context.Context, _ *ddbworker.Message, p price) (ddbworker.Result, error) {
			got = p
			return ddbworker.Result{}, nil
		}).Handle(context.Background(), &ddbworker.Message{Envelope: e})
		return e, got, err
	}
	first, want, err := decode(`{"cents":1234,"rate":0.25,"tags":[1,"x"]}`)
	require.NoError(t, err)
	require.Equal(t, price{Cents: 1234, Rate: 0.25, Tags: []any{float64(1), "x"}}, want)
	for _, payload := range []string{
		`{"cents":1234.0,"rate":0.250,"tags":[1.0,"x"]}`,
		`{"tags":[10e-1,"\u0078"],"rate":25e-2,"cents":1.234e3}`,
		` { "cents" : 12340e-1 , "rate" : 2.5E-1 , "tags" : [ 1 , "x" ] } `,
	} {
		e, got, err := decode(payload)
		require.NoError(t, err, payload)
		require.Equal(t, first.RequestHash, e.RequestHash, payload)
		require.Equal(t, want, got, payload)
	}
	// Not integral: no int64 however it is written.
	_, _, err = decode(`{"cents":1234.5}`)
	require.ErrorIs(t, err, ddbworker.ErrPayload)
}

// Middleware order: the registry's (Use) in the order added, the first
// outermost, then the route's (With), then the handler — for routes
// registered before Use too; a route without middleware of its own gets
// only the registry's.
func TestMiddlewareOrder(t *testing.T) {
	var calls []string
	mw := func(name string) ddbworker.Middleware {
		return func(next ddbworker.Handler) ddbworker.Handler {
			return ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
				calls = append(calls, name+">")
				res, err := next.Handle(ctx, msg)
				calls = append(calls, "<"+name)
				return res, err
			})
		}
	}
	handler := func(name string) ddbworker.Handler {
		return ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
			calls = append(calls, name)
			return ddbworker.Result{}, nil
		})
	}
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("A", handler("a"), ddbworker.With(mw("r1"), mw("r2"))))
	reg.Use(mw("u1"), mw("u2"))
	require.NoError(t, reg.Register("B", handler("b"), ddbworker.Fused()))
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"A", []string{"u1>", "u2>", "r1>", "r2>", "a", "<r2", "<r1", "<u2", "<u1"}},
		{"B", []string{"u1>", "u2>", "b", "<u2", "<u1"}},
	} {
		calls = nil
		rt, ok := reg.Lookup(tc.typ)
		require.True(t, ok)
		_, err := rt.Handler.Handle(context.Background(), &ddbworker.Message{})
		require.NoError(t, err)
		require.Equal(t, tc.want, calls, tc.typ)
	}
	rt, _ := reg.Lookup("B")
	require.True(t, rt.Fused, "options still apply")
}

// A middleware may answer in the handler's place: its failure means what a
// handler's means.
func TestMiddlewareShortCircuits(t *testing.T) {
	ran := false
	reg := ddbworker.NewRegistry()
	reg.Use(func(ddbworker.Handler) ddbworker.Handler {
		return ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
			return ddbworker.Result{}, ddbworker.Terminal("TENANT_SUSPENDED", "tenant suspended")
		})
	})
	require.NoError(t, reg.Register("A", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		ran = true
		return ddbworker.Result{}, nil
	})))
	rt, _ := reg.Lookup("A")
	_, err := rt.Handler.Handle(context.Background(), &ddbworker.Message{})
	require.True(t, ddbworker.IsTerminal(err))
	require.False(t, ran)
}
