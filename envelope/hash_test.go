package envelope_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

func hashOf(t *testing.T, f fields) string {
	t.Helper()
	return mustDecode(t, f.body()).RequestHash
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// goldenHash pins the canonical form of validFields(). If this changes,
// every stored idempotency record's hash changes with it: do not update it
// casually.
const goldenHash = "3ee666fc9143de4490442fc2cfa19996eba897a0c04a4f137b979f5c4d837893"

func TestRequestHashGolden(t *testing.T) {
	e := mustDecode(t, validFields().body())
	// The canonical document, spelled out.
	canonical := `{"aggregateId":"42","aggregateType":"order","messageType":"order.created",` +
		`"payload":{"note":"` + secret + `","price":1999e-2,"qty":2,"sku":"A-1"},"schemaVersion":1}`
	require.Equal(t, sha(canonical), e.RequestHash)
	require.Equal(t, goldenHash, e.RequestHash)
}

func TestRequestHashIgnoresDeliveryMetadata(t *testing.T) {
	base := validFields()
	want := hashOf(t, base)
	resent := base.
		with("messageId", `"msg-0002"`).
		with("occurredAt", `"2025-01-01T00:00:00.5-07:00"`).
		with("correlationId", `"corr-2"`).
		with("causationId", `"cmd-10"`).
		with("producer", `"orders-service-v2"`).
		with("idempotencyKey", `"another-key"`).
		with("aggregateVersion", `8`).
		with("attemptPolicy", `{"maxBusinessAttempts":1}`).
		with("unknown", `true`)
	require.Equal(t, want, hashOf(t, resent))
	require.Equal(t, want, hashOf(t, base.without("attemptPolicy").without("correlationId").without("causationId").without("aggregateVersion")))
}

func TestRequestHashPayloadFormatting(t *testing.T) {
	base := validFields()
	want := hashOf(t, base)
	for _, p := range []string{
		`{"qty":2,"sku":"A-1","note":"` + secret + `","price":19.99}`,
		"{\n  \"note\" : \"" + secret + "\",\r\n\t\"price\": 19.990, \"qty\":2.0 ,\"sku\":\"A\\u002d1\"\n}",
		`{"price":1999e-2,"sku":"\u0041-1","qty":0.2e1,"note":"` + secret + `"}`,
	} {
		require.Equal(t, want, hashOf(t, base.with("payload", p)), "payload %s", p)
	}
}

func TestRequestHashNumberForms(t *testing.T) {
	base := validFields()
	hash := func(n string) string { return hashOf(t, base.with("payload", `{"n":`+n+`}`)) }

	one := hash("1")
	for _, n := range []string{"1.0", "1e0", "1E0", "1e+0", "10e-1", "1.00", "0.1e1", "0.001e3", "100e-2", "1.000000000000000000000000000000"} {
		require.Equal(t, one, hash(n), n)
	}
	zero := hash("0")
	for _, n := range []string{"-0", "0.0", "-0.0", "0e5", "-0e-5", "0.000E+99"} {
		require.Equal(t, zero, hash(n), n)
	}
	require.Equal(t, hash("1e999999999"), hash("10e999999998"))
	require.Equal(t, hash("12345678901234567890123456789"), hash("1.2345678901234567890123456789e28"))
	require.Equal(t, hash("-2.5"), hash("-25e-1"))

	distinct := []string{"1", "2", "10", "0.1", "-1", "1e999999999", "1.0000000000000000000001", "0", "12345678901234567890123456789", "12345678901234567890123456788"}
	seen := map[string]string{}
	for _, n := range distinct {
		h := hash(n)
		require.NotContains(t, seen, h, "%s collides with %s", n, seen[h])
		seen[h] = n
	}

	// The canonical forms themselves.
	payloadHash := func(canonicalPayload string) string {
		return sha(`{"aggregateId":"42","aggregateType":"order","messageType":"order.created","payload":` +
			canonicalPayload + `,"schemaVersion":1}`)
	}
	for in, want := range map[string]string{
		"1.0": "1", "100": "1e2", "0.25": "25e-2", "-0.0": "0", "-1200.50": "-12005e-1",
		"1e999999999": "1e999999999", "0.000123E-7": "123e-13", "120e-1": "12",
	} {
		require.Equal(t, payloadHash("["+want+"]"), hashOf(t, base.with("payload", "["+in+"]")), in)
	}
}

func TestRequestHashCanonicalStringsAndStructure(t *testing.T) {
	base := validFields()
	payloadHash := func(canonicalPayload string) string {
		return sha(`{"aggregateId":"42","aggregateType":"order","messageType":"order.created","payload":` +
			canonicalPayload + `,"schemaVersion":1}`)
	}
	for in, want := range map[string]string{
		`{"b":1,"a":{"d":[3,{"z":0,"y":true}],"c":null}}`: `{"a":{"c":null,"d":[3,{"y":true,"z":0}]},"b":1}`,
		`{"é":1,"z":2,"Z":3,"a":4}`:                       `{"Z":3,"a":4,"z":2,"é":1}`, // UTF-8 byte order
		`"\u0041\/\u00e9\ud83d\ude00"`:                    `"A/é😀"`,
		`"<&>"`:                                           `"<&>"`,
		`"\u2028\u2029"`:                                  `"\u2028\u2029"`,
		"\"\u2028\"":                                      `"\u2028"`,
		`"\b\f\n\r\t\u0001\u001f\"\\"`:                    `"\b\f\n\r\t\u0001\u001f\"\\"`,
		`"\u007f"`:                                        "\"\x7f\"",
		` [ 1 , [ ] , { } , "x" ] `:                       `[1,[],{},"x"]`,
		`true`:                                            `true`,
	} {
		require.Equal(t, payloadHash(want), hashOf(t, base.with("payload", in)), in)
	}
	// Escaped keys sort and compare by their decoded form.
	require.Equal(t, payloadHash(`{"a":1,"b":2}`), hashOf(t, base.with("payload", `{"\u0062":2,"a":1}`)))
}

func TestRequestHashDistinguishesWork(t *testing.T) {
	base := validFields()
	want := hashOf(t, base)
	for name, f := range map[string]fields{
		"payload value":     base.with("payload", `{"sku":"A-1","qty":3,"price":19.99,"note":"`+secret+`"}`),
		"payload key":       base.with("payload", `{"SKU":"A-1","qty":2,"price":19.99,"note":"`+secret+`"}`),
		"payload extra key": base.with("payload", `{"sku":"A-1","qty":2,"price":19.99,"note":"`+secret+`","x":null}`),
		"payload type":      base.with("payload", `{"sku":"A-1","qty":"2","price":19.99,"note":"`+secret+`"}`),
		"aggregateId":       base.with("aggregateId", `"43"`),
		"aggregateType":     base.with("aggregateType", `"invoice"`),
		"messageType":       base.with("messageType", `"order.updated"`),
		"array order":       base.with("payload", `[1,2]`),
	} {
		require.NotEqual(t, want, hashOf(t, f), name)
	}
	require.NotEqual(t, hashOf(t, base.with("payload", `[1,2]`)), hashOf(t, base.with("payload", `[2,1]`)))
	// Field boundaries are unambiguous.
	require.NotEqual(t,
		hashOf(t, base.with("aggregateId", `"ab"`).with("aggregateType", `"c"`)),
		hashOf(t, base.with("aggregateId", `"a"`).with("aggregateType", `"bc"`)))
}

func TestRequestHashOnBuiltEnvelope(t *testing.T) {
	decoded := mustDecode(t, validFields().body())
	built := &envelope.Envelope{
		SchemaVersion: envelope.SchemaV1,
		MessageType:   "order.created",
		AggregateType: "order",
		AggregateID:   "42",
		Payload:       []byte(`{"sku":"A-1","qty":2,"price":19.99,"note":"` + secret + `"}`),
	}
	h, err := envelope.RequestHash(built)
	require.NoError(t, err)
	require.Equal(t, decoded.RequestHash, h)

	for name, tc := range map[string]struct {
		payload string
		code    envelope.Code
	}{
		"empty":     {"", envelope.CodeMissingField},
		"null":      {" null ", envelope.CodeInvalidField},
		"malformed": {`{"a":}`, envelope.CodeInvalidField},
		"trailing":  {`{} {}`, envelope.CodeInvalidField},
		"dup":       {`{"a":1,"a":1}`, envelope.CodeInvalidField},
	} {
		built.Payload = []byte(tc.payload)
		_, err := envelope.RequestHash(built)
		requireCode(t, err, tc.code, "payload")
		_ = name
	}
	_, err = envelope.RequestHash(nil)
	requireCode(t, err, envelope.CodeInvalidJSON, "")
}

func TestEncodeRoundTrip(t *testing.T) {
	v := int64(3)
	nb := time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	e := &envelope.Envelope{
		MessageID:        "m-1",
		SchemaVersion:    envelope.SchemaV1,
		MessageType:      "thing.done",
		Producer:         "tool",
		OccurredAt:       time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		IdempotencyKey:   "k<&>",
		AggregateType:    "thing",
		AggregateID:      "t-1",
		AggregateVersion: &v,
		AttemptPolicy:    &envelope.AttemptPolicy{MaxBusinessAttempts: 3, NotBefore: &nb, TerminalAfterCodes: []string{"NOPE"}},
		Payload:          []byte(`{ "b": [1, 2.0], "a": "<&>" }`),
	}
	body, err := envelope.Encode(e)
	require.NoError(t, err)
	require.Contains(t, string(body), `"idempotencyKey":"k<&>"`)
	require.NotContains(t, string(body), "\n")
	require.Empty(t, e.RequestHash, "Encode must not modify its argument")

	got := mustDecode(t, body)
	want, err := envelope.RequestHash(e)
	require.NoError(t, err)
	require.Equal(t, want, got.RequestHash)
	require.Equal(t, e.IdempotencyKey, got.IdempotencyKey)
	require.True(t, got.AttemptPolicy.NotBefore.Equal(nb))
	require.EqualValues(t, 3, *got.AggregateVersion)
}

func TestEncodeValidates(t *testing.T) {
	valid := func() *envelope.Envelope {
		return &envelope.Envelope{
			MessageID: "m", SchemaVersion: 1, MessageType: "t", Producer: "p",
			OccurredAt: time.Unix(1, 0).UTC(), IdempotencyKey: "k", AggregateType: "a",
			AggregateID: "i", Payload: []byte(`{}`),
		}
	}
	_, err := envelope.Encode(valid())
	require.NoError(t, err)

	neg := int64(-1)
	zero := time.Time{}
	for _, tc := range []struct {
		name   string
		mutate func(*envelope.Envelope)
		code   envelope.Code
		field  string
	}{
		{"schemaVersion zero", func(e *envelope.Envelope) { e.SchemaVersion = 0 }, envelope.CodeMissingField, "schemaVersion"},
		{"schemaVersion 2", func(e *envelope.Envelope) { e.SchemaVersion = 2 }, envelope.CodeUnknownSchemaVersion, "schemaVersion"},
		{"no messageId", func(e *envelope.Envelope) { e.MessageID = "" }, envelope.CodeMissingField, "messageId"},
		{"zero occurredAt", func(e *envelope.Envelope) { e.OccurredAt = time.Time{} }, envelope.CodeMissingField, "occurredAt"},
		{"occurredAt year 10000", func(e *envelope.Envelope) { e.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, envelope.CodeInvalidField, "occurredAt"},
		{"nil payload", func(e *envelope.Envelope) { e.Payload = nil }, envelope.CodeMissingField, "payload"},
		{"null payload", func(e *envelope.Envelope) { e.Payload = []byte("null") }, envelope.CodeInvalidField, "payload"},
		{"malformed payload", func(e *envelope.Envelope) { e.Payload = []byte("{") }, envelope.CodeInvalidField, "payload"},
		{"long key", func(e *envelope.Envelope) { e.IdempotencyKey = strings.Repeat("k", 513) }, envelope.CodeKeyTooLong, "idempotencyKey"},
		{"invalid UTF-8", func(e *envelope.Envelope) { e.AggregateID = "\xff" }, envelope.CodeInvalidField, "aggregateId"},
		{"bad charset", func(e *envelope.Envelope) { e.AggregateType = "a b" }, envelope.CodeInvalidField, "aggregateType"},
		{"negative version", func(e *envelope.Envelope) { e.AggregateVersion = &neg }, envelope.CodeInvalidField, "aggregateVersion"},
		{"zero notBefore", func(e *envelope.Envelope) { e.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &zero} }, envelope.CodeInvalidField, "attemptPolicy.notBefore"},
		{"attempts", func(e *envelope.Envelope) { e.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 101} }, envelope.CodeInvalidField, "attemptPolicy.maxBusinessAttempts"},
		{"too large", func(e *envelope.Envelope) {
			e.Payload = []byte(`"` + strings.Repeat("a", envelope.DefaultMaxBodyBytes) + `"`)
		}, envelope.CodeInvalidJSON, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := valid()
			tc.mutate(e)
			_, err := envelope.Encode(e)
			requireCode(t, err, tc.code, tc.field)
		})
	}
	_, err = envelope.Encode(nil)
	requireCode(t, err, envelope.CodeInvalidJSON, "")
}
