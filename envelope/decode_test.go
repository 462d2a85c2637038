package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

func TestDecodeValid(t *testing.T) {
	e := mustDecode(t, validFields().body())

	require.Equal(t, "msg-0001", e.MessageID)
	require.Equal(t, envelope.SchemaV1, e.SchemaVersion)
	require.Equal(t, "order.created", e.MessageType)
	require.Equal(t, "orders-service", e.Producer)
	require.True(t, e.OccurredAt.Equal(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)))
	require.Equal(t, "order-42:create", e.IdempotencyKey)
	require.Equal(t, "order", e.AggregateType)
	require.Equal(t, "42", e.AggregateID)
	require.NotNil(t, e.AggregateVersion)
	require.EqualValues(t, 7, *e.AggregateVersion)
	require.Equal(t, "cmd-9", e.CausationID)
	require.Equal(t, "corr-1", e.CorrelationID)
	require.NotNil(t, e.AttemptPolicy)
	require.Equal(t, 5, e.AttemptPolicy.MaxBusinessAttempts)
	require.True(t, e.AttemptPolicy.NotBefore.Equal(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)))
	require.True(t, e.AttemptPolicy.RetryableUntil.Equal(time.Date(2024, 5, 2, 10, 0, 0, 0, time.UTC)))
	require.Equal(t, []string{"OUT_OF_STOCK"}, e.AttemptPolicy.TerminalAfterCodes)
	require.JSONEq(t, `{"sku":"A-1","qty":2,"price":19.99,"note":"`+secret+`"}`, string(e.Payload))
	require.Regexp(t, `^v3:[0-9a-f]{64}$`, e.RequestHash)

	h, err := envelope.RequestHash(e)
	require.NoError(t, err)
	require.Equal(t, e.RequestHash, h)
}

func TestDecodeAccepts(t *testing.T) {
	base := validFields()
	minimal := base.without("aggregateVersion").without("causationId").
		without("correlationId").without("attemptPolicy")
	cases := []struct {
		name string
		body []byte
	}{
		{"minimal", minimal.body()},
		{"surrounding whitespace", []byte(" \n\t" + string(base.body()) + " \r\n")},
		{"unknown fields ignored", base.with("futureField", `{"a":[1,2,{"b":null}]}`).with("x", `"y"`).body()},
		{"duplicate unknown fields ignored", append(base.with("x", `1`), member{"x", `2`}).body()},
		{"differently cased names are unknown", base.with("MessageId", `123`).body()},
		{"optional fields null", base.with("aggregateVersion", `null`).with("causationId", `null`).
			with("correlationId", `null`).with("attemptPolicy", `null`).body()},
		{"aggregateVersion zero", base.with("aggregateVersion", `0`).body()},
		{"aggregateVersion max int64", base.with("aggregateVersion", `9223372036854775807`).body()},
		{"empty attemptPolicy", base.with("attemptPolicy", `{}`).body()},
		{"attemptPolicy bounds", base.with("attemptPolicy", `{"maxBusinessAttempts":100,"terminalAfterCodes":["`+strings.Repeat("A", 64)+`","X_1"]}`).body()},
		{"escaped field name", []byte(strings.Replace(string(base.body()), `"messageId"`, `"messageI\u0064"`, 1))},
		{"payload scalar", base.with("payload", `"just a string"`).body()},
		{"payload number", base.with("payload", `-12.5e3`).body()},
		{"payload array", base.with("payload", `[1,"two",false,null,{}]`).body()},
		{"payload empty object", base.with("payload", `{}`).body()},
		{"payload huge exponent", base.with("payload", `{"n":1e999999999}`).body()},
		{"payload depth 128", base.with("payload", strings.Repeat("[", 128)+strings.Repeat("]", 128)).body()},
		{"unicode text fields", base.with("aggregateId", `"k\u00e9y-😀"`).with("producer", `"prodücer"`).body()},
		{"occurredAt with offset and fraction", base.with("occurredAt", `"2024-05-01T12:00:00.123456789+05:30"`).body()},
		{"fields at MaxFieldBytes", base.with("messageId", quote(strings.Repeat("m", 256))).
			with("aggregateId", quote(strings.Repeat("é", 128))).body()},
		{"type names at 128 chars", base.with("messageType", quote(strings.Repeat("a", 128))).
			with("aggregateType", quote(strings.Repeat("Z", 128))).body()},
		{"unknown field deeply nested", base.with("deep", strings.Repeat("[", 5000)+strings.Repeat("]", 5000)).body()},
	}
	d := defaultDecoder(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := d.Decode(tc.body)
			require.NoError(t, err)
			require.Regexp(t, `^v3:[0-9a-f]{64}$`, e.RequestHash)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	base := validFields()
	const (
		invalidJSON = envelope.CodeInvalidJSON
		missing     = envelope.CodeMissingField
		invalid     = envelope.CodeInvalidField
		unknownVer  = envelope.CodeUnknownSchemaVersion
		keyTooLong  = envelope.CodeKeyTooLong
	)
	type tc struct {
		name  string
		body  []byte
		code  envelope.Code
		field string
	}
	cases := []tc{
		// Structure.
		{"empty body", nil, invalidJSON, ""},
		{"whitespace body", []byte(" \n "), invalidJSON, ""},
		{"not JSON", []byte("hello"), invalidJSON, ""},
		{"truncated", base.body()[:40], invalidJSON, ""},
		{"array body", []byte(`[` + string(base.body()) + `]`), invalidJSON, ""},
		{"string body", []byte(`"{}"`), invalidJSON, ""},
		{"null body", []byte(`null`), invalidJSON, ""},
		{"number body", []byte(`42`), invalidJSON, ""},
		{"trailing garbage", append(base.body(), " x"...), invalidJSON, ""},
		{"trailing second object", append(base.body(), `{}`...), invalidJSON, ""},
		{"trailing comma", []byte(strings.TrimSuffix(string(base.body()), "}") + ",}"), invalidJSON, ""},
		{"invalid JSON inside unknown field", base.with("x", `[1,]`).body(), invalidJSON, ""},
		{"single quotes", []byte(`{'messageId':'x'}`), invalidJSON, ""},
		{"nesting beyond encoding/json limit", base.with("deep", strings.Repeat("[", 10001)+strings.Repeat("]", 10001)).body(), invalidJSON, ""},
		{"duplicate known field", append(append(fields(nil), base...), member{"idempotencyKey", `"other"`}).body(), invalidJSON, "idempotencyKey"},
		{"duplicate unknown field is fine but duplicate known is not", append(base.with("x", `1`).with("x2", `2`), member{"payload", `1`}).body(), invalidJSON, "payload"},
		{"too large", []byte(`{"pad":"` + strings.Repeat("a", envelope.DefaultMaxBodyBytes) + `"}`), invalidJSON, ""},

		// Schema version first.
		{"schemaVersion missing", base.without("schemaVersion").body(), missing, "schemaVersion"},
		{"schemaVersion null", base.with("schemaVersion", `null`).body(), missing, "schemaVersion"},
		{"schemaVersion string", base.with("schemaVersion", `"1"`).body(), invalidJSON, "schemaVersion"},
		{"schemaVersion fraction", base.with("schemaVersion", `1.0`).body(), invalidJSON, "schemaVersion"},
		{"schemaVersion overflow", base.with("schemaVersion", `99999999999999999999`).body(), invalidJSON, "schemaVersion"},
		{"schemaVersion 2", base.with("schemaVersion", `2`).body(), unknownVer, "schemaVersion"},
		{"schemaVersion 0", base.with("schemaVersion", `0`).body(), unknownVer, "schemaVersion"},
		{"schemaVersion negative", base.with("schemaVersion", `-1`).body(), unknownVer, "schemaVersion"},
		{"v2 message with other fields", []byte(`{"schemaVersion":2,"id":7,"kind":"x","payload":null}`), unknownVer, "schemaVersion"},
		{"duplicate schemaVersion", []byte(`{"schemaVersion":1,"schemaVersion":2}`), invalidJSON, "schemaVersion"},
		{"v2 message with duplicate v1 field", []byte(`{"schemaVersion":2,"payload":1,"payload":2}`), unknownVer, "schemaVersion"},
		{"v2 message with wrongly typed v1 fields", base.with("schemaVersion", `2`).with("messageId", `{}`).body(), unknownVer, "schemaVersion"},

		// Wrong JSON types.
		{"messageId number", base.with("messageId", `123`).body(), invalidJSON, "messageId"},
		{"messageType object", base.with("messageType", `{}`).body(), invalidJSON, "messageType"},
		{"producer bool", base.with("producer", `true`).body(), invalidJSON, "producer"},
		{"occurredAt number", base.with("occurredAt", `1714564800`).body(), invalidJSON, "occurredAt"},
		{"idempotencyKey array", base.with("idempotencyKey", `["k"]`).body(), invalidJSON, "idempotencyKey"},
		{"aggregateId number", base.with("aggregateId", `42`).body(), invalidJSON, "aggregateId"},
		{"aggregateVersion string", base.with("aggregateVersion", `"7"`).body(), invalidJSON, "aggregateVersion"},
		{"aggregateVersion fraction", base.with("aggregateVersion", `7.5`).body(), invalidJSON, "aggregateVersion"},
		{"aggregateVersion exponent", base.with("aggregateVersion", `7e0`).body(), invalidJSON, "aggregateVersion"},
		{"aggregateVersion overflow", base.with("aggregateVersion", `9223372036854775808`).body(), invalidJSON, "aggregateVersion"},
		{"causationId number", base.with("causationId", `1`).body(), invalidJSON, "causationId"},
		{"correlationId object", base.with("correlationId", `{}`).body(), invalidJSON, "correlationId"},
		{"attemptPolicy string", base.with("attemptPolicy", `"x"`).body(), invalidJSON, "attemptPolicy"},
		{"maxBusinessAttempts string", base.with("attemptPolicy", `{"maxBusinessAttempts":"3"}`).body(), invalidJSON, "attemptPolicy.maxBusinessAttempts"},
		{"notBefore number", base.with("attemptPolicy", `{"notBefore":1}`).body(), invalidJSON, "attemptPolicy.notBefore"},
		{"terminalAfterCodes string", base.with("attemptPolicy", `{"terminalAfterCodes":"X"}`).body(), invalidJSON, "attemptPolicy.terminalAfterCodes"},
		{"terminalAfterCodes numbers", base.with("attemptPolicy", `{"terminalAfterCodes":["X",1]}`).body(), invalidJSON, "attemptPolicy.terminalAfterCodes"},
		{"attemptPolicy duplicate member", base.with("attemptPolicy", `{"notBefore":null,"notBefore":null}`).body(), invalidJSON, "attemptPolicy.notBefore"},
		{"type error beats missing field", base.without("messageId").with("payload", `{}`).with("aggregateVersion", `"x"`).body(), invalidJSON, "aggregateVersion"},

		// Missing required fields: absent, null and empty.
		{"payload missing", base.without("payload").body(), missing, "payload"},
		{"occurredAt empty", base.with("occurredAt", `""`).body(), missing, "occurredAt"},
		{"messageId null", base.with("messageId", `null`).body(), missing, "messageId"},
		{"idempotencyKey empty", base.with("idempotencyKey", `""`).body(), missing, "idempotencyKey"},
		{"missing beats invalid", base.without("aggregateId").with("messageType", `"bad type"`).body(), missing, "aggregateId"},

		// Limits and charsets.
		{"key exactly at limit +1 byte", base.with("idempotencyKey", quote(strings.Repeat("k", 513))).body(), keyTooLong, "idempotencyKey"},
		{"multibyte key one byte over", base.with("idempotencyKey", quote(strings.Repeat("é", 256)+"k")).body(), keyTooLong, "idempotencyKey"},
		{"key control char", base.with("idempotencyKey", `"a\nb"`).body(), invalid, "idempotencyKey"},
		{"key DEL char", base.with("idempotencyKey", `"a`+"\x7f"+`b"`).body(), invalid, "idempotencyKey"},
		{"key C1 control char", base.with("idempotencyKey", `"a\u0085b"`).body(), invalid, "idempotencyKey"},
		{"key invalid UTF-8", base.with("idempotencyKey", "\"a\xffb\"").body(), invalid, "idempotencyKey"},
		{"key unpaired surrogate", base.with("idempotencyKey", `"a\ud800b"`).body(), invalid, "idempotencyKey"},
		{"messageType space", base.with("messageType", `"order created"`).body(), invalid, "messageType"},
		{"messageType slash", base.with("messageType", `"order/created"`).body(), invalid, "messageType"},
		{"messageType non-ASCII", base.with("messageType", `"ordér"`).body(), invalid, "messageType"},
		{"messageType 129 chars", base.with("messageType", quote(strings.Repeat("a", 129))).body(), invalid, "messageType"},
		{"aggregateType colon", base.with("aggregateType", `"order:x"`).body(), invalid, "aggregateType"},
		{"aggregateId NUL", base.with("aggregateId", `"4\u00002"`).body(), invalid, "aggregateId"},
		{"aggregateId too long", base.with("aggregateId", quote(strings.Repeat("a", 257))).body(), invalid, "aggregateId"},
		{"messageId too long", base.with("messageId", quote(strings.Repeat("a", 257))).body(), invalid, "messageId"},
		{"producer tab", base.with("producer", `"a\tb"`).body(), invalid, "producer"},
		{"causationId invalid UTF-8", base.with("causationId", "\"\xc3\"").body(), invalid, "causationId"},
		{"correlationId too long", base.with("correlationId", quote(strings.Repeat("c", 257))).body(), invalid, "correlationId"},
		{"occurredAt not RFC 3339", base.with("occurredAt", `"yesterday"`).body(), invalid, "occurredAt"},
		{"occurredAt without zone", base.with("occurredAt", `"2024-05-01T12:00:00"`).body(), invalid, "occurredAt"},
		{"occurredAt zero time", base.with("occurredAt", `"0001-01-01T00:00:00Z"`).body(), invalid, "occurredAt"},
		{"occurredAt very long", base.with("occurredAt", quote(strings.Repeat("9", 1000))).body(), invalid, "occurredAt"},
		{"negative aggregateVersion", base.with("aggregateVersion", `-1`).body(), invalid, "aggregateVersion"},
		{"maxBusinessAttempts 101", base.with("attemptPolicy", `{"maxBusinessAttempts":101}`).body(), invalid, "attemptPolicy.maxBusinessAttempts"},
		{"maxBusinessAttempts negative", base.with("attemptPolicy", `{"maxBusinessAttempts":-1}`).body(), invalid, "attemptPolicy.maxBusinessAttempts"},
		{"notBefore bad", base.with("attemptPolicy", `{"notBefore":"soon"}`).body(), invalid, "attemptPolicy.notBefore"},
		{"retryableUntil bad", base.with("attemptPolicy", `{"retryableUntil":"2024-13-01T00:00:00Z"}`).body(), invalid, "attemptPolicy.retryableUntil"},
		{"terminal code lowercase", base.with("attemptPolicy", `{"terminalAfterCodes":["out_of_stock"]}`).body(), invalid, "attemptPolicy.terminalAfterCodes"},
		{"terminal code empty", base.with("attemptPolicy", `{"terminalAfterCodes":[""]}`).body(), invalid, "attemptPolicy.terminalAfterCodes"},
		{"terminal code 65 chars", base.with("attemptPolicy", `{"terminalAfterCodes":["`+strings.Repeat("A", 65)+`"]}`).body(), invalid, "attemptPolicy.terminalAfterCodes"},

		// Payload.
		{"payload null", base.with("payload", `null`).body(), invalid, "payload"},
		{"payload duplicate key", base.with("payload", `{"a":1,"b":2,"a":1}`).body(), invalid, "payload"},
		{"payload duplicate key via escape", base.with("payload", `{"a":1,"\u0061":1}`).body(), invalid, "payload"},
		{"payload nested duplicate key", base.with("payload", `{"x":[{"k":1,"k":2}]}`).body(), invalid, "payload"},
		{"payload depth 129", base.with("payload", strings.Repeat(`{"a":`, 129)+"1"+strings.Repeat("}", 129)).body(), invalid, "payload"},
		{"payload exponent overflow", base.with("payload", `[1e2147483648]`).body(), invalid, "payload"},
		{"payload negative exponent overflow", base.with("payload", `[1e-2147483649]`).body(), invalid, "payload"},
		{"payload normalized exponent overflow", base.with("payload", `[10e2147483647]`).body(), invalid, "payload"},
		{"payload invalid UTF-8", base.with("payload", "{\"a\":\"\xff\"}").body(), invalid, "payload"},
		{"payload unpaired surrogate", base.with("payload", `{"a":"\udc00"}`).body(), invalid, "payload"},
		{"payload key invalid UTF-8", base.with("payload", "{\"\xfe\":1}").body(), invalid, "payload"},
		{"payload checked last", base.with("payload", `null`).with("aggregateVersion", `-5`).body(), invalid, "aggregateVersion"},
	}
	d := defaultDecoder(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := d.Decode(tc.body)
			require.Nil(t, e)
			requireCode(t, err, tc.code, tc.field)
		})
	}
}

func TestDecodeMissingEachRequiredField(t *testing.T) {
	d := defaultDecoder(t)
	for _, name := range []string{"messageId", "messageType", "producer", "occurredAt",
		"idempotencyKey", "aggregateType", "aggregateId", "payload"} {
		for _, variant := range []struct{ name, raw string }{{"absent", ""}, {"null", "null"}, {"empty", `""`}} {
			if name == "payload" && variant.raw != "" {
				continue // null payload is INVALID_FIELD; "" is a valid payload
			}
			t.Run(name+"/"+variant.name, func(t *testing.T) {
				f := validFields().without(name)
				if variant.raw != "" {
					f = f.with(name, variant.raw)
				}
				_, err := d.Decode(f.body())
				requireCode(t, err, envelope.CodeMissingField, name)
			})
		}
	}
}

func TestDecodeKeyLengthBoundary(t *testing.T) {
	d := defaultDecoder(t)
	at := strings.Repeat("k", envelope.DefaultMaxKeyBytes)
	e, err := d.Decode(validFields().with("idempotencyKey", quote(at)).body())
	require.NoError(t, err)
	require.Len(t, e.IdempotencyKey, envelope.DefaultMaxKeyBytes)

	_, err = d.Decode(validFields().with("idempotencyKey", quote(at+"k")).body())
	requireCode(t, err, envelope.CodeKeyTooLong, "idempotencyKey")

	// Counted in bytes, not characters: 256 two-byte runes are exactly 512.
	_, err = d.Decode(validFields().with("idempotencyKey", quote(strings.Repeat("é", 256))).body())
	require.NoError(t, err)

	small, err := envelope.NewDecoder(envelope.Config{MaxKeyBytes: 4})
	require.NoError(t, err)
	_, err = small.Decode(validFields().with("idempotencyKey", `"abcd"`).body())
	require.NoError(t, err)
	_, err = small.Decode(validFields().with("idempotencyKey", `"abcde"`).body())
	requireCode(t, err, envelope.CodeKeyTooLong, "idempotencyKey")
}

func TestDecodeBodyLimit(t *testing.T) {
	body := validFields().body()
	d, err := envelope.NewDecoder(envelope.Config{MaxBodyBytes: len(body)})
	require.NoError(t, err)
	_, err = d.Decode(body)
	require.NoError(t, err)

	_, err = d.Decode(append(body, ' '))
	requireCode(t, err, envelope.CodeInvalidJSON, "")

	// The size check comes before parsing.
	_, err = d.Decode([]byte(strings.Repeat("x", len(body)+1)))
	e := requireCode(t, err, envelope.CodeInvalidJSON, "")
	require.Nil(t, e.Err)
}

func TestDecodeSyntaxErrorIsJSONSyntaxError(t *testing.T) {
	_, err := defaultDecoder(t).Decode([]byte(`{"messageId": nope}`))
	requireCode(t, err, envelope.CodeInvalidJSON, "")
	var se *json.SyntaxError
	require.ErrorAs(t, err, &se)
}

func TestDecodeSupportedVersions(t *testing.T) {
	d, err := envelope.NewDecoder(envelope.Config{SupportedVersions: []int{envelope.SchemaV1}})
	require.NoError(t, err)
	_, err = d.Decode(validFields().body())
	require.NoError(t, err)
}

func TestNilDecoderUsesDefaults(t *testing.T) {
	var d *envelope.Decoder
	e, err := d.Decode(validFields().body())
	require.NoError(t, err)
	require.Equal(t, mustDecode(t, validFields().body()).RequestHash, e.RequestHash)
}

func TestDecodeDoesNotAliasBody(t *testing.T) {
	body := validFields().body()
	e := mustDecode(t, body)
	want := string(e.Payload)
	for i := range body {
		body[i] = 'x'
	}
	require.Equal(t, want, string(e.Payload))
}

func TestErrorFormat(t *testing.T) {
	_, err := defaultDecoder(t).Decode(validFields().without("idempotencyKey").body())
	require.EqualError(t, err, "envelope: MISSING_FIELD idempotencyKey: required field is missing")

	e := &envelope.Error{Code: envelope.CodeInvalidJSON, Reason: "body is not valid JSON", Err: json.Unmarshal([]byte("x"), new(any))}
	require.ErrorIs(t, e, envelope.ErrInvalid)
	require.Len(t, e.Unwrap(), 2)
	require.Equal(t, "envelope: INVALID_ENVELOPE: body is not valid JSON: invalid character 'x' looking for beginning of value", e.Error())
}

func TestNewDecoderConfig(t *testing.T) {
	_, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)

	_, err = envelope.NewDecoder(envelope.Config{MaxKeyBytes: 1, MaxFieldBytes: 1, MaxBodyBytes: 1})
	require.NoError(t, err)

	_, err = envelope.NewDecoder(envelope.Config{
		MaxKeyBytes:       -1,
		MaxFieldBytes:     -2,
		MaxBodyBytes:      -3,
		SupportedVersions: []int{envelope.SchemaV1, 2},
	})
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "errors must be joined with errors.Join")
	require.Len(t, joined.Unwrap(), 4)
	for _, want := range []string{"MaxKeyBytes", "MaxFieldBytes", "MaxBodyBytes", "SupportedVersions"} {
		require.Contains(t, err.Error(), want)
	}

	_, err = envelope.NewDecoder(envelope.Config{MaxBodyBytes: -1})
	require.ErrorContains(t, err, "MaxBodyBytes")
	require.NotContains(t, err.Error(), "MaxKeyBytes")
}

func TestConfigIsCopied(t *testing.T) {
	versions := []int{envelope.SchemaV1}
	d, err := envelope.NewDecoder(envelope.Config{SupportedVersions: versions})
	require.NoError(t, err)
	versions[0] = 2
	_, err = d.Decode(validFields().body())
	require.NoError(t, err)
}
