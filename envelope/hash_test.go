package envelope_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
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

// goldenHashV1, goldenHashV2 and goldenHashV3 pin the canonical forms of
// validFields(). If one changes, every stored idempotency record of that
// version stops matching its redeliveries: never update them. A new
// canonical form is a new HashVersion. (V2's and V3's texts of
// validFields() are the same bytes: see TestHashV3MatchesV2.)
const (
	goldenHashV1 = "3ee666fc9143de4490442fc2cfa19996eba897a0c04a4f137b979f5c4d837893"
	goldenHashV2 = "v2:5bc5e65662436f088e590b73b319efad0ad03ac5100b9b5e9b693a879a29e30a"
	goldenHashV3 = "v3:5bc5e65662436f088e590b73b319efad0ad03ac5100b9b5e9b693a879a29e30a"
)

// hashV returns the request hash of f in version v.
func hashV(t *testing.T, f fields, v envelope.HashVersion) string {
	t.Helper()
	h, err := envelope.RequestHashVersion(mustDecode(t, f.body()), v)
	require.NoError(t, err)
	return h
}

func TestRequestHashGolden(t *testing.T) {
	e := mustDecode(t, validFields().body())
	// The canonical documents, spelled out.
	canonicalV3 := `{"aggregateId":"42","aggregateType":"order","aggregateVersion":7,"messageType":"order.created",` +
		`"payload":{"note":"` + secret + `","price":19.99,"qty":2,"sku":"A-1"},"schemaVersion":1}`
	require.Equal(t, "v3:"+sha(canonicalV3), e.RequestHash)
	require.Equal(t, goldenHashV3, e.RequestHash)
	v2, err := envelope.RequestHashVersion(e, envelope.HashV2)
	require.NoError(t, err)
	require.Equal(t, "v2:"+sha(canonicalV3), v2)
	require.Equal(t, goldenHashV2, v2)

	canonicalV1 := `{"aggregateId":"42","aggregateType":"order","messageType":"order.created",` +
		`"payload":{"note":"` + secret + `","price":1999e-2,"qty":2,"sku":"A-1"},"schemaVersion":1}`
	v1, err := envelope.RequestHashVersion(e, envelope.HashV1)
	require.NoError(t, err)
	require.Equal(t, sha(canonicalV1), v1)
	require.Equal(t, goldenHashV1, v1)

	cp, err := e.CanonicalPayload()
	require.NoError(t, err)
	require.Equal(t, `{"note":"`+secret+`","price":19.99,"qty":2,"sku":"A-1"}`, string(cp))
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
		with("attemptPolicy", `{"maxBusinessAttempts":1}`).
		with("unknown", `true`)
	require.Equal(t, want, hashOf(t, resent))
	require.Equal(t, want, hashOf(t, base.without("attemptPolicy").without("correlationId").without("causationId")))
}

// A key re-used with another aggregateVersion is other work: its hash
// differs, so the gate reports IDEMPOTENCY_HASH_MISMATCH, not a duplicate.
// Absent and present (even 0) differ too.
func TestRequestHashCoversAggregateVersion(t *testing.T) {
	base := validFields()
	seen := map[string]string{}
	for _, f := range []struct {
		name string
		f    fields
	}{
		{"7", base},
		{"8", base.with("aggregateVersion", `8`)},
		{"0", base.with("aggregateVersion", `0`)},
		{"absent", base.without("aggregateVersion")},
	} {
		h := hashOf(t, f.f)
		require.NotContains(t, seen, h, "%s collides with %s", f.name, seen[h])
		seen[h] = f.name
	}
	require.Equal(t, hashOf(t, base.without("aggregateVersion")), hashOf(t, base.with("aggregateVersion", `null`)))

	// Version 1 ignored it: records written by older workers compare as before.
	v1 := func(f fields) string {
		h, err := envelope.RequestHashVersion(mustDecode(t, f.body()), envelope.HashV1)
		require.NoError(t, err)
		return h
	}
	require.Equal(t, v1(base), v1(base.with("aggregateVersion", `8`)))
	require.Equal(t, goldenHashV1, v1(base.without("aggregateVersion")))
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
	payloadHash := func(v envelope.HashVersion, canonicalPayload string) string {
		return v.String() + ":" + sha(`{"aggregateId":"42","aggregateType":"order","aggregateVersion":7,"messageType":"order.created","payload":`+
			canonicalPayload+`,"schemaVersion":1}`)
	}
	for in, want := range map[string]string{
		"1.0": "1", "100": "100", "0.25": "0.25", "-0.0": "0", "-1200.50": "-1200.5", "-0": "0",
		"1234.0": "1234", "1.2340e3": "1234", "1e20": "100000000000000000000", "1e21": "1000000000000000000000",
		"123456789012345678901": "123456789012345678901", "1234567890123456789012": "1234567890123456789012",
		"12345678901234567890120": "12345678901234567890120", "123456789012345678901200e1": "1234567890123456789012000",
		"1e22": "1e+22", "15e21": "15000000000000000000000", "1e43": "1e+43", "1.5e43": "1.5e+43", "98765432109876543210987654321e30": "9.8765432109876543210987654321e+58",
		"1e-6": "0.000001", "1e-7": "1e-7", "-12.5e-7": "-0.00000125", "0.000000125": "1.25e-7",
		"1e999999999": "1e+999999999", "0.000123E-7": "1.23e-11", "120e-1": "12", "19.990": "19.99",
		"9223372036854775807.0": "9223372036854775807", "0.1000000000000000000001": "0.1000000000000000000001",
		"9007199254740993": "9007199254740993", "9007199254740993.0": "9007199254740993",
	} {
		require.Equal(t, payloadHash(envelope.HashV3, "["+want+"]"), hashOf(t, base.with("payload", "["+in+"]")), in)
	}
	// Version 2's forms, kept for records written before version 3.
	for in, want := range map[string]string{
		"1.0": "1", "100": "100", "0.25": "0.25", "-0.0": "0", "-1200.50": "-1200.5",
		"1234.0": "1234", "1.2340e3": "1234", "1e20": "100000000000000000000", "1e21": "1e21",
		"123456789012345678901": "123456789012345678901", "1234567890123456789012": "1234567890123456789012",
		"12345678901234567890120": "1234567890123456789012e1", "123456789012345678901200e1": "1234567890123456789012e3",
		"1e-6": "0.000001", "1e-7": "1e-7", "-12.5e-7": "-0.00000125", "0.000000125": "125e-9",
		"1e999999999": "1e999999999", "0.000123E-7": "123e-13", "120e-1": "12", "19.990": "19.99",
		"9223372036854775807.0": "9223372036854775807",
	} {
		require.Equal(t, payloadHash(envelope.HashV2, "["+want+"]"), hashV(t, base.with("payload", "["+in+"]"), envelope.HashV2), in)
	}
	// Version 1's forms, kept for records written before version 2.
	payloadHashV1 := func(canonicalPayload string) string {
		return sha(`{"aggregateId":"42","aggregateType":"order","messageType":"order.created","payload":` +
			canonicalPayload + `,"schemaVersion":1}`)
	}
	for in, want := range map[string]string{
		"1.0": "1", "100": "1e2", "0.25": "25e-2", "-0.0": "0", "-1200.50": "-12005e-1",
		"1e999999999": "1e999999999", "0.000123E-7": "123e-13", "120e-1": "12",
	} {
		h, err := envelope.RequestHashVersion(mustDecode(t, base.with("payload", "["+in+"]").body()), envelope.HashV1)
		require.NoError(t, err)
		require.Equal(t, payloadHashV1("["+want+"]"), h, in)
	}
}

func TestRequestHashCanonicalStringsAndStructure(t *testing.T) {
	base := validFields()
	payloadHash := func(v envelope.HashVersion, canonicalPayload string) string {
		return v.String() + ":" + sha(`{"aggregateId":"42","aggregateType":"order","aggregateVersion":7,"messageType":"order.created","payload":`+
			canonicalPayload+`,"schemaVersion":1}`)
	}
	for _, tc := range []struct{ in, v3, v2 string }{
		{`{"b":1,"a":{"d":[3,{"z":0,"y":true}],"c":null}}`, `{"a":{"c":null,"d":[3,{"y":true,"z":0}]},"b":1}`, ""},
		{`{"é":1,"z":2,"Z":3,"a":4}`, `{"Z":3,"a":4,"z":2,"é":1}`, ""}, // UTF-8 byte order
		// V3 sorts by UTF-16 code units (RFC 8785), V2 by UTF-8 bytes.
		{`{"\ud83d\ude00":1,"\uffff":2}`, "{\"\U0001F600\":1,\"\uffff\":2}", "{\"\uffff\":2,\"\U0001F600\":1}"},
		{`"\u0041\/\u00e9\ud83d\ude00"`, `"A/é😀"`, ""},
		{`"<&>"`, `"<&>"`, ""},
		// V2 escapes U+2028 and U+2029 as encoding/json does; V3 does not.
		{`"\u2028\u2029"`, "\"\u2028\u2029\"", `"\u2028\u2029"`},
		{"\"\u2028\"", "\"\u2028\"", `"\u2028"`},
		{`"\b\f\n\r\t\u0001\u001f\"\\"`, `"\b\f\n\r\t\u0001\u001f\"\\"`, ""},
		{`"\u007f"`, "\"\x7f\"", ""},
		{` [ 1 , [ ] , { } , "x" ] `, `[1,[],{},"x"]`, ""},
		{`true`, `true`, ""},
	} {
		require.Equal(t, payloadHash(envelope.HashV3, tc.v3), hashOf(t, base.with("payload", tc.in)), tc.in)
		require.Equal(t, payloadHash(envelope.HashV2, cmp.Or(tc.v2, tc.v3)), hashV(t, base.with("payload", tc.in), envelope.HashV2), tc.in)
	}
	// Escaped keys sort and compare by their decoded form.
	require.Equal(t, payloadHash(envelope.HashV3, `{"a":1,"b":2}`), hashOf(t, base.with("payload", `{"\u0062":2,"a":1}`)))
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
	seven := int64(7)
	built := &envelope.Envelope{
		AggregateVersion: &seven,
		SchemaVersion:    envelope.SchemaV1,
		MessageType:      "order.created",
		AggregateType:    "order",
		AggregateID:      "42",
		Payload:          []byte(`{"sku":"A-1","qty":2,"price":19.99,"note":"` + secret + `"}`),
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

func TestHashVersionOf(t *testing.T) {
	hex := strings.Repeat("0a", 32)
	for stored, want := range map[string]envelope.HashVersion{
		hex:         envelope.HashV1,
		"v2:" + hex: envelope.HashV2,
		"v3:" + hex: envelope.HashV3,
	} {
		v, ok := envelope.HashVersionOf(stored)
		require.True(t, ok, stored)
		require.Equal(t, want, v, stored)
	}
	for _, stored := range []string{"", "v2:", "v3:", "v4:" + hex, "v1:" + hex, strings.ToUpper(hex), hex[:63], "v2:" + hex + "0"} {
		_, ok := envelope.HashVersionOf(stored)
		require.False(t, ok, stored)
	}
	require.Equal(t, "v3", envelope.CurrentHashVersion.String())
}

// A record written by an older worker carries a v1 hash; a redelivery of
// the same work decoded today compares like with like and is a duplicate,
// while changed work still mismatches.
func TestHashLike(t *testing.T) {
	orig := mustDecode(t, validFields().body())
	storedV1, err := envelope.RequestHashVersion(orig, envelope.HashV1)
	require.NoError(t, err)
	require.Equal(t, goldenHashV1, storedV1)

	redelivery := mustDecode(t, validFields().with("messageId", `"msg-0002"`).with("payload",
		`{"qty":2.0,"sku":"A-1","price":19.990,"note":"`+secret+`"}`).body())
	got, err := redelivery.HashLike(storedV1)
	require.NoError(t, err)
	require.Equal(t, storedV1, got, "same work against a v1 record")
	got, err = redelivery.HashLike(orig.RequestHash)
	require.NoError(t, err)
	require.Equal(t, orig.RequestHash, got, "same work against a v2 record")

	changed := mustDecode(t, validFields().with("payload", `{"qty":3,"sku":"A-1","price":19.99,"note":"`+secret+`"}`).body())
	got, err = changed.HashLike(storedV1)
	require.NoError(t, err)
	require.NotEqual(t, storedV1, got)

	_, err = redelivery.HashLike("v9:" + strings.Repeat("0", 64))
	require.ErrorIs(t, err, envelope.ErrUnknownHashVersion)

	// Workers before hash versioning already hashed a payloadRef
	// (unprefixed, its sha256 and size in place of the payload): a
	// redelivery of that work compares in that form.
	const goldenRefHashV1 = "2ea85b7f4c63e4bcc5945903cbb0f22fe2cf8ad4dc6a1f0e5b95e71219e03190"
	ref := mustDecode(t, refFields().with("messageId", `"msg-0003"`).body())
	got, err = ref.HashLike(goldenRefHashV1)
	require.NoError(t, err)
	require.Equal(t, goldenRefHashV1, got, "same payloadRef work against a v1 record")
	got, err = envelope.RequestHashVersion(ref, envelope.HashV1)
	require.NoError(t, err)
	require.Equal(t, goldenRefHashV1, got)
}

func TestCanonicalPayload(t *testing.T) {
	e := mustDecode(t, validFields().with("payload", `{ "b": 1234.0, "a": [1.50, -0] }`).body())
	cp, err := e.CanonicalPayload()
	require.NoError(t, err)
	require.Equal(t, `{"a":[1.5,0],"b":1234}`, string(cp))
	again, err := e.CanonicalPayload()
	require.NoError(t, err)
	require.Same(t, &cp[0], &again[0], "Decode keeps it")

	// Replaced payload: computed from the new bytes, never stale.
	e.Payload = []byte(`{"z":1e2}`)
	cp, err = e.CanonicalPayload()
	require.NoError(t, err)
	require.Equal(t, `{"z":100}`, string(cp))

	built := &envelope.Envelope{Payload: []byte(`[1.0]`)}
	cp, err = built.CanonicalPayload()
	require.NoError(t, err)
	require.Equal(t, `[1]`, string(cp))

	ref := mustDecode(t, refFields().body())
	_, err = ref.CanonicalPayload()
	requireCode(t, err, envelope.CodeMissingField, "payload")
	require.NoError(t, ref.ResolvePayload([]byte(refPayload)))
	cp, err = ref.CanonicalPayload()
	require.NoError(t, err)
	require.Equal(t, `{"qty":2,"sku":"A-1"}`, string(cp))

	_, err = (&envelope.Envelope{Payload: []byte(`{"a":1,"a":2}`)}).CanonicalPayload()
	requireCode(t, err, envelope.CodeInvalidField, "payload")
}

// Integral values beyond 21 digits: the canonical payload a handler
// decodes writes them as plain integers (a *big.Int, a json.Number parsed
// as an integer, read them), whatever the hash form; every spelling of the
// value still hashes the same and decodes the same.
func TestCanonicalPayloadLargeIntegers(t *testing.T) {
	for _, tc := range []struct {
		want     string
		spelling []string
	}{
		{"1000000000000000000000", []string{"1000000000000000000000", "1e21", "1.0e21", "10e20", "1000000000000000000000.000"}},
		{"123000000000000000000000", []string{"123000000000000000000000", "123e21", "1.23e23"}},
		{"123456789012345678901234567890", []string{"123456789012345678901234567890", "12345678901234567890123456789e1"}},
		{"-1234567890123456789012345000", []string{"-1234567890123456789012345000", "-1.234567890123456789012345e27", "-1234567890123456789012345e3"}},
	} {
		var hash string
		for _, s := range tc.spelling {
			e := mustDecode(t, validFields().with("payload", `{"n":`+s+`}`).body())
			if hash == "" {
				hash = e.RequestHash
			}
			require.Equal(t, hash, e.RequestHash, "%s hashes like %s", s, tc.spelling[0])
			cp, err := e.CanonicalPayload()
			require.NoError(t, err)
			require.Equal(t, `{"n":`+tc.want+`}`, string(cp), s)
			var v struct{ N *big.Int }
			require.NoError(t, json.Unmarshal(cp, &v), s)
			require.Equal(t, tc.want, v.N.String(), s)
			built := &envelope.Envelope{Payload: []byte(`{"n":` + s + `}`)}
			bp, err := built.CanonicalPayload()
			require.NoError(t, err)
			require.Equal(t, string(cp), string(bp), s)
		}
	}
}
