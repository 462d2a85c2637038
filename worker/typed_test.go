package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

type priced struct {
	SKU   string `json:"sku"`
	Cents int64  `json:"cents"`
}

func (p priced) Validate() error {
	if p.Cents < 0 {
		return errors.New("cents must not be negative")
	}
	return nil
}

type pointerValidated struct{ Name string }

func (p *pointerValidated) Validate() error {
	if p.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

// ddbworker.JSON decodes the payload into the handler's type, validates it,
// and ends a payload that fails either as terminal INVALID_PAYLOAD without
// calling the handler. Pure logic: no emulator involved.
func TestJSONHandler(t *testing.T) {
	msg := func(payload string) *ddbworker.Message {
		return &ddbworker.Message{Envelope: &envelope.Envelope{MessageType: "PriceSet", Payload: json.RawMessage(payload)}}
	}
	var got priced
	calls := 0
	h := ddbworker.JSON(func(_ context.Context, _ *ddbworker.Message, p priced) (ddbworker.Result, error) {
		calls++
		got = p
		return ddbworker.Result{Outcome: "APPLIED"}, nil
	})
	tests := []struct {
		name    string
		payload string
		want    priced
		wantErr string // "" = the handler runs
	}{
		{"decodes", `{"sku":"A-1","cents":250}`, priced{SKU: "A-1", Cents: 250}, ""},
		{"ignores unknown fields", `{"sku":"A-1","cents":1,"added":"later"}`, priced{SKU: "A-1", Cents: 1}, ""},
		{"wrong type", `{"sku":"A-1","cents":"ten"}`, priced{}, "cannot unmarshal"},
		{"not an object", `[1,2]`, priced{}, "cannot unmarshal array"},
		{"fails Validate", `{"sku":"A-1","cents":-5}`, priced{}, "cents must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, got = 0, priced{}
			res, err := h.Handle(context.Background(), msg(tt.payload))
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, 1, calls)
				require.Equal(t, tt.want, got)
				require.Equal(t, "APPLIED", res.Outcome)
				return
			}
			require.Zero(t, calls, "the handler must not run on a bad payload")
			f, ok := failure.As(err)
			require.True(t, ok)
			require.Equal(t, failure.Terminal, f.Kind)
			require.Equal(t, failure.CodeInvalidPayload, f.Code)
			require.ErrorIs(t, err, ddbworker.ErrPayload)
			var pe *ddbworker.PayloadError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "PriceSet", pe.MessageType)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}

	t.Run("pointer-receiver Validate", func(t *testing.T) {
		ph := ddbworker.JSON(func(context.Context, *ddbworker.Message, pointerValidated) (ddbworker.Result, error) {
			return ddbworker.Result{}, nil
		})
		_, err := ph.Handle(context.Background(), msg(`{}`))
		require.ErrorContains(t, err, "name is required")
		_, err = ph.Handle(context.Background(), msg(`{"Name":"x"}`))
		require.NoError(t, err)
	})
}
