package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

// secret appears in test payloads; it must never show up in error text.
const secret = "s3cr3t-payload-value"

// fields is a valid envelope as an ordered list of members, so that tests can
// remove, replace or add members and still control the exact bytes.
type fields []member

type member struct {
	key string
	raw string // raw JSON value
}

func validFields() fields {
	return fields{
		{"messageId", `"msg-0001"`},
		{"schemaVersion", `1`},
		{"messageType", `"order.created"`},
		{"producer", `"orders-service"`},
		{"occurredAt", `"2024-05-01T12:00:00Z"`},
		{"idempotencyKey", `"order-42:create"`},
		{"aggregateType", `"order"`},
		{"aggregateId", `"42"`},
		{"aggregateVersion", `7`},
		{"causationId", `"cmd-9"`},
		{"correlationId", `"corr-1"`},
		{"attemptPolicy", `{"maxBusinessAttempts":5,"notBefore":"2024-05-01T12:00:00Z","retryableUntil":"2024-05-02T12:00:00+02:00","terminalAfterCodes":["OUT_OF_STOCK"]}`},
		{"payload", `{"sku":"A-1","qty":2,"price":19.99,"note":"` + secret + `"}`},
	}
}

// with returns a copy with key set to raw (appended when absent).
func (f fields) with(key, raw string) fields {
	out := append(fields(nil), f...)
	for i := range out {
		if out[i].key == key {
			out[i].raw = raw
			return out
		}
	}
	return append(out, member{key, raw})
}

// without returns a copy without key.
func (f fields) without(key string) fields {
	var out fields
	for _, m := range f {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

func (f fields) body() []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(m.raw)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func defaultDecoder(t testing.TB) *envelope.Decoder {
	t.Helper()
	d, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	return d
}

// requireCode asserts err is a *Error with the given code and field and
// that it honours the error contract.
func requireCode(t *testing.T, err error, code envelope.Code, field string) *envelope.Error {
	t.Helper()
	require.Error(t, err)
	var e *envelope.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, code, e.Code, "error: %v", err)
	require.Equal(t, field, e.Field, "error: %v", err)
	require.ErrorIs(t, err, envelope.ErrInvalid)
	require.True(t, strings.HasPrefix(err.Error(), "envelope: "+string(code)), err.Error())
	require.NotContains(t, err.Error(), secret)
	require.NotEmpty(t, e.Reason)
	return e
}

func mustDecode(t testing.TB, body []byte) *envelope.Envelope {
	t.Helper()
	e, err := defaultDecoder(t).Decode(body)
	require.NoError(t, err)
	return e
}
