package envelope_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

// A decoder writes RequestHash in its configured version (a worker's
// table's), and HashLike compares a stored hash of any version like with
// like: a decoder writing v2 recognises a v3 record of the same work, and
// one writing v3 a v2 record. The payload holds a U+2028, which v2
// escapes and v3 does not, so the two canonical texts differ.
func TestDecoderHashVersion(t *testing.T) {
	body := []byte(`{"schemaVersion":1,"messageId":"m-1","messageType":"PriceSet","producer":"p","occurredAt":"2026-01-01T00:00:00Z",` +
		`"idempotencyKey":"k-1","aggregateType":"sku","aggregateId":"A-1","payload":{"note":"` + "\u2028" + `","cents":1234}}`)
	for _, v := range []envelope.HashVersion{0, envelope.HashV2, envelope.HashV3} {
		d, err := envelope.NewDecoder(envelope.Config{HashVersion: v})
		require.NoError(t, err)
		e, err := d.Decode(body)
		require.NoError(t, err)
		want := v
		if v == 0 {
			want = envelope.CurrentHashVersion
		}
		require.Equal(t, want, d.Config().HashVersion)
		got, ok := envelope.HashVersionOf(e.RequestHash)
		require.True(t, ok)
		require.Equal(t, want, got)
		inV, err := envelope.RequestHashVersion(e, want)
		require.NoError(t, err)
		require.Equal(t, inV, e.RequestHash)
		require.Equal(t, `{"cents":1234,"note":"`+"\u2028"+`"}`, string(must(e.CanonicalPayload())), "the canonical payload is v3's whatever the hash version")
		for _, stored := range []envelope.HashVersion{envelope.HashV1, envelope.HashV2, envelope.HashV3} {
			h, err := envelope.RequestHashVersion(e, stored)
			require.NoError(t, err)
			like, err := e.HashLike(h)
			require.NoError(t, err)
			require.Equal(t, h, like, "decoder %v, stored %v", want, stored)
		}
	}
	v2, err := envelope.RequestHashVersion(&envelope.Envelope{SchemaVersion: 1, MessageType: "t", AggregateType: "a", AggregateID: "i",
		Payload: []byte(`{"note":"` + "\u2028" + `"}`)}, envelope.HashV2)
	require.NoError(t, err)
	v3, err := envelope.RequestHashVersion(&envelope.Envelope{SchemaVersion: 1, MessageType: "t", AggregateType: "a", AggregateID: "i",
		Payload: []byte(`{"note":"` + "\u2028" + `"}`)}, envelope.HashV3)
	require.NoError(t, err)
	require.NotEqual(t, v2[3:], v3[3:], "the versions' texts differ here")

	for _, v := range []envelope.HashVersion{envelope.HashV1, 4} {
		_, err := envelope.NewDecoder(envelope.Config{HashVersion: v})
		require.ErrorContains(t, err, "new hashes are written in v2 or v3")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
