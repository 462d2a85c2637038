package envelope_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "adapt", name))
	require.NoError(t, err)
	return b
}

func mustAdapter(t testing.TB, s envelope.AdapterSpec) *envelope.Adapter {
	t.Helper()
	a, err := envelope.NewAdapter(s)
	require.NoError(t, err)
	return a
}

// adapters is the list of (message type, spec) pairs, in order.
func adapters(t testing.TB, pairs ...any) *envelope.Adapters {
	t.Helper()
	var as *envelope.Adapters
	for i := 0; i < len(pairs); i += 2 {
		var err error
		as, err = as.With(pairs[i].(string), mustAdapter(t, pairs[i+1].(envelope.AdapterSpec)))
		require.NoError(t, err)
	}
	return as
}

// orders is the JSON adapter of the orders service's own messages (the
// Message of sns-notification.json).
var orders = envelope.AdapterSpec{
	Kind: envelope.KindJSON, Type: "eventType",
	Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId", AggregateVersion: "version",
}

var placedEvents = envelope.AdapterSpec{
	Kind: envelope.KindEventBridge, DetailType: "Order Placed", Source: "com.example.orders",
	Key: "join(':', ['order', detail.orderId, 'placed'])", AggregateType: "'order'", AggregateID: "detail.orderId", AggregateVersion: "detail.version",
}

func sns(s envelope.AdapterSpec) envelope.AdapterSpec { s.SNS = true; return s }

func read(t testing.TB, as *envelope.Adapters, in envelope.Input) (*envelope.Envelope, error) {
	t.Helper()
	return defaultDecoder(t).Read(in, as)
}

var sentAt = time.Date(2026, 3, 29, 5, 12, 17, 0, time.UTC)

// equivalent is the envelope a producer would have sent for the work an
// adapted body carries: the same hash.
func equivalent(t *testing.T, env *envelope.Envelope) *envelope.Envelope {
	t.Helper()
	b, err := envelope.Encode(env)
	require.NoError(t, err)
	back := mustDecode(t, b)
	require.Equal(t, env.RequestHash, back.RequestHash, "an adapted envelope encodes to an envelope of the same work")
	return back
}

func TestReadSNS(t *testing.T) {
	as := adapters(t, "OrderPlaced", sns(orders))
	wrapped, err := read(t, as, envelope.Input{Body: testdata(t, "sns-notification.json"), MessageID: "sqs-1", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, "OrderPlaced", wrapped.MessageType)
	require.Equal(t, "order:o-1042:placed", wrapped.IdempotencyKey)
	require.Equal(t, "order", wrapped.AggregateType)
	require.Equal(t, "o-1042", wrapped.AggregateID)
	require.EqualValues(t, 3, *wrapped.AggregateVersion)
	require.Equal(t, "63a3f6b6-d533-4a47-aef9-fcf5cf758c76", wrapped.MessageID, "the notification's MessageId")
	require.Equal(t, "arn:aws:sns:us-west-2:123456789012:orders", wrapped.Producer, "the topic")
	require.True(t, wrapped.OccurredAt.Equal(time.Date(2026, 3, 29, 5, 12, 16, 901e6, time.UTC)), "the notification's Timestamp")
	require.JSONEq(t, string(testdata(t, "sns-raw.json")), string(wrapped.Payload), "the payload is the Message")
	equivalent(t, wrapped)

	republished, err := read(t, as, envelope.Input{Body: testdata(t, "sns-republished.json"), MessageID: "sqs-2", SentAt: sentAt.Add(time.Minute)})
	require.NoError(t, err)
	require.NotEqual(t, wrapped.MessageID, republished.MessageID)
	require.False(t, republished.OccurredAt.Equal(wrapped.OccurredAt))
	require.Equal(t, wrapped.RequestHash, republished.RequestHash, "a re-publish (new MessageId, Timestamp, Signature) is the same work")
	require.Equal(t, wrapped.IdempotencyKey, republished.IdempotencyKey)

	raw, err := read(t, as, envelope.Input{Body: testdata(t, "sns-raw.json"), MessageID: "sqs-3", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, "sqs-3", raw.MessageID, "raw delivery: the SQS MessageId")
	require.Equal(t, "sns", raw.Producer)
	require.True(t, raw.OccurredAt.Equal(sentAt), "raw delivery: the SQS SentTimestamp")
	require.Equal(t, wrapped.RequestHash, raw.RequestHash, "raw and wrapped delivery of one message are the same work")
	require.Equal(t, wrapped.IdempotencyKey, raw.IdempotencyKey)
}

func TestReadEventBridge(t *testing.T) {
	as := adapters(t, "OrderPlaced", placedEvents)
	env, err := read(t, as, envelope.Input{Body: testdata(t, "eventbridge-event.json"), MessageID: "sqs-1", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, "OrderPlaced", env.MessageType)
	require.Equal(t, "order:o-1042:placed", env.IdempotencyKey)
	require.Equal(t, "6a7e8feb-b491-4cf7-a9f1-bf3703467718", env.MessageID, "the event's id")
	require.Equal(t, "com.example.orders", env.Producer, "the event's source")
	require.True(t, env.OccurredAt.Equal(time.Date(2026, 3, 29, 5, 12, 16, 0, time.UTC)), "the event's time")
	var detail struct {
		Detail json.RawMessage `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(testdata(t, "eventbridge-event.json"), &detail))
	require.JSONEq(t, string(detail.Detail), string(env.Payload), "the payload is detail")
	equivalent(t, env)

	again, err := read(t, as, envelope.Input{Body: testdata(t, "eventbridge-event-again.json"), MessageID: "sqs-2", SentAt: sentAt})
	require.NoError(t, err)
	require.NotEqual(t, env.MessageID, again.MessageID)
	require.Equal(t, env.RequestHash, again.RequestHash, "an event put again (new id, time) is the same work")

	// The same event, through an SNS topic (a rule with an SNS target),
	// wrapped: the event's own id, time and source win.
	note := map[string]any{}
	require.NoError(t, json.Unmarshal(testdata(t, "sns-notification.json"), &note))
	note["Message"] = string(testdata(t, "eventbridge-event.json"))
	body, err := json.Marshal(note)
	require.NoError(t, err)
	viaSNS, err := read(t, adapters(t, "OrderPlaced", sns(placedEvents)), envelope.Input{Body: body})
	require.NoError(t, err)
	require.Equal(t, env.RequestHash, viaSNS.RequestHash)
	require.Equal(t, env.MessageID, viaSNS.MessageID)
	require.Equal(t, env.Producer, viaSNS.Producer)
}

// TestReadRoutes: which message type an adapted body is read for.
func TestReadRoutes(t *testing.T) {
	own := envelope.AdapterSpec{Kind: envelope.KindJSON, Type: "kind", Key: "join(':', [invoice.orderId, 'invoice'])",
		AggregateType: "'order'", AggregateID: "invoice.orderId", AggregateVersion: "orderVersion", Payload: "invoice", Producer: "sender"}
	refund := own
	refund.Key = "join(':', [invoice.orderId, 'refund'])"
	catchAll := envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "'thing'", AggregateID: "id"}
	events := envelope.AdapterSpec{Kind: envelope.KindEventBridge, Key: "detail.orderId", AggregateType: "'order'", AggregateID: "detail.orderId"}
	cases := []struct {
		name     string
		as       *envelope.Adapters
		body     []byte
		attrs    map[string]string
		wantType string
		code     envelope.Code
		field    string
	}{
		{"type expression", adapters(t, "invoice.refunded", refund, "invoice.requested", own), testdata(t, "own.json"), nil, "invoice.requested", "", ""},
		{"detail-type is the route's type by default", adapters(t, "Shipped", events), []byte(`{"detail-type":"Shipped","source":"x","detail":{"orderId":"o-1"}}`), nil, "Shipped", "", ""},
		{"DetailType", adapters(t, "OrderPlaced", placedEvents), testdata(t, "eventbridge-event.json"), nil, "OrderPlaced", "", ""},
		{"an event of another source", adapters(t, "OrderPlaced", placedEvents), []byte(strings.Replace(string(testdata(t, "eventbridge-event.json")), "com.example.orders", "com.example.other", 1)), nil, "", envelope.CodeUnknownMessageType, ""},
		{"an event of another detail-type", adapters(t, "Shipped", events), testdata(t, "eventbridge-event.json"), nil, "", envelope.CodeUnknownMessageType, ""},
		{"a type no route has", adapters(t, "invoice.refunded", refund), testdata(t, "own.json"), nil, "", envelope.CodeUnknownMessageType, ""},
		{"a type that cannot be determined", adapters(t, "invoice.requested", own), []byte(`{"invoice":{"orderId":"o-1"}}`), nil, "", envelope.CodeMissingField, "messageType"},
		{"a catch-all after the typed routes", adapters(t, "invoice.requested", own, "thing", catchAll), []byte(`{"id":"t-1"}`), nil, "thing", "", ""},
		{"the earlier route takes a body both would", adapters(t, "invoice.requested", own, "thing", catchAll), []byte(`{"id":"t-1","kind":"invoice.requested","invoice":{"orderId":"o-1"}}`), nil, "invoice.requested", "", ""},
		{"type by attribute", adapters(t, "OrderPlaced", envelope.AdapterSpec{Kind: envelope.KindJSON, TypeAttribute: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}),
			testdata(t, "sns-raw.json"), map[string]string{"eventType": "OrderPlaced"}, "OrderPlaced", "", ""},
		{"type by the notification's attribute", adapters(t, "OrderPlaced", envelope.AdapterSpec{Kind: envelope.KindJSON, SNS: true, TypeAttribute: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}),
			testdata(t, "sns-notification.json"), nil, "OrderPlaced", "", ""},
		{"no type attribute", adapters(t, "OrderPlaced", envelope.AdapterSpec{Kind: envelope.KindJSON, TypeAttribute: "eventType", Key: "orderId", AggregateType: "'order'", AggregateID: "orderId"}),
			testdata(t, "sns-raw.json"), nil, "", envelope.CodeMissingField, "messageType"},
		{"match", adapters(t, "x", envelope.AdapterSpec{Kind: envelope.KindJSON, Match: "sender == 'billing-api'", Key: "invoice.orderId", AggregateType: "'o'", AggregateID: "invoice.orderId"}), testdata(t, "own.json"), nil, "x", "", ""},
		{"no match: read as an envelope", adapters(t, "x", envelope.AdapterSpec{Kind: envelope.KindJSON, Match: "sender == 'other'", Key: "invoice.orderId", AggregateType: "'o'", AggregateID: "invoice.orderId"}), testdata(t, "own.json"), nil, "", envelope.CodeMissingField, "schemaVersion"},
		{"a notification no route takes", adapters(t, "OrderPlaced", sns(placedEvents)), testdata(t, "sns-notification.json"), nil, "", envelope.CodeUnknownMessageType, ""},
		{"an envelope is an envelope", adapters(t, "thing", catchAll), validFields().body(), nil, "order.created", "", ""},
		{"a broken envelope is an envelope", adapters(t, "thing", catchAll), validFields().without("idempotencyKey").body(), nil, "", envelope.CodeMissingField, "idempotencyKey"},
		{"not JSON", adapters(t, "thing", catchAll), []byte(`{"id":`), nil, "", envelope.CodeInvalidJSON, ""},
		{"not an object", adapters(t, "thing", catchAll), []byte(`["id"]`), nil, "", envelope.CodeInvalidJSON, ""},
		{"a subscription confirmation", adapters(t, "OrderPlaced", sns(orders)), []byte(`{"Type":"SubscriptionConfirmation","TopicArn":"arn:aws:sns:us-west-2:123456789012:orders","Message":"You have chosen to subscribe","SubscribeURL":"https://example"}`), nil, "", envelope.CodeInvalidJSON, "Type"},
		{"a notification's Message that is not JSON", adapters(t, "OrderPlaced", sns(orders)), []byte(`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-west-2:123456789012:orders","Timestamp":"2026-03-29T05:12:16.901Z","Message":"Hello world!"}`), nil, "", envelope.CodeInvalidJSON, "Message"},
		{"a notification without MessageId", adapters(t, "OrderPlaced", sns(orders)), []byte(`{"Type":"Notification","TopicArn":"arn:aws:sns:us-west-2:123456789012:orders","Timestamp":"2026-03-29T05:12:16.901Z","Message":"{}"}`), nil, "", envelope.CodeMissingField, "MessageId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := read(t, tc.as, envelope.Input{Body: tc.body, Attributes: tc.attrs, MessageID: "sqs-1", SentAt: sentAt})
			if tc.code != "" {
				requireCode(t, err, tc.code, tc.field)
				require.Nil(t, env)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantType, env.MessageType)
			equivalent(t, env)
		})
	}
}

// TestReadSchemaVersion: a body with a top-level schemaVersion is an
// envelope when it decodes as one. JSON of a producer's own with a
// schemaVersion of its own is read by an adapter that recognises it (its
// Match, its type, raw SNS delivery of either); a catch-all does not take
// such a body, which may be a malformed envelope; a body no adapter takes
// keeps the envelope decoder's own rejection. Old behaviour: every body
// with a top-level schemaVersion was read by Decode alone (own JSON:
// MISSING_FIELD messageId).
func TestReadSchemaVersion(t *testing.T) {
	own := func(schemaVersion, kind string) []byte {
		return []byte(`{"schemaVersion":` + schemaVersion + `,"kind":"` + kind + `","order":{"orderId":"o-7","amountCents":1999},"sentAt":"2026-03-29T05:12:16Z"}`)
	}
	typed := envelope.AdapterSpec{Kind: envelope.KindJSON, Type: "kind", Key: "join(':', ['order', order.orderId])",
		AggregateType: "'order'", AggregateID: "order.orderId", Payload: "order", OccurredAt: "sentAt"}
	matched := typed
	matched.Type, matched.Match = "", "order.orderId"
	byAttribute := typed
	byAttribute.Type, byAttribute.TypeAttribute = "", "eventType"
	catchAll := envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "idempotencyKey", AggregateType: "aggregateType", AggregateID: "aggregateId"}
	// An adapter whose type member is the envelope's own: it would take
	// envelopes of its type, but a valid envelope is an envelope.
	sameMembers := envelope.AdapterSpec{Kind: envelope.KindJSON, Type: "messageType", Key: "'other'", AggregateType: "'o'", AggregateID: "'o'"}
	broken := validFields().without("idempotencyKey").body()
	cases := []struct {
		name  string
		as    *envelope.Adapters
		body  []byte
		attrs map[string]string
		// wantType and wantProducer: read; else the rejection, Decode's
		// own unless adapter is set (the adapter that took the body).
		wantType, wantProducer string
		adapter                string
		code                   envelope.Code
		field                  string
		hint                   string // a phrase the rejection's reason adds to Decode's
	}{
		{name: "own JSON, schemaVersion 1, by type", as: adapters(t, "order.placed", typed), body: own("1", "order.placed"), wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON, a string schemaVersion", as: adapters(t, "order.placed", typed), body: own(`"2.1"`, "order.placed"), wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON, a null schemaVersion", as: adapters(t, "order.placed", typed), body: own("null", "order.placed"), wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON by Match", as: adapters(t, "order.placed", matched), body: own("1", "order.placed"), wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON by attribute", as: adapters(t, "order.placed", byAttribute), body: own("1", "order.placed"), attrs: map[string]string{"eventType": "order.placed"}, wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON by raw SNS delivery", as: adapters(t, "order.placed", sns(typed)), body: own("1", "order.placed"), wantType: "order.placed", wantProducer: "sns"},
		{name: "own JSON: the typed route before a catch-all", as: adapters(t, "order.placed", typed, "thing", catchAll), body: own("1", "order.placed"), wantType: "order.placed", wantProducer: "sqs"},
		{name: "own JSON whose key its adapter cannot find: the adapter's rejection", as: adapters(t, "order.placed", typed),
			body: []byte(`{"schemaVersion":1,"kind":"order.placed","order":{"amountCents":1999}}`), adapter: "JSON", code: envelope.CodeMissingField, field: "idempotencyKey"},
		{name: "own JSON of a type no route has", as: adapters(t, "order.placed", typed), body: own("1", "order.cancelled"), code: envelope.CodeMissingField, field: "messageId"},
		{name: "own JSON and only a catch-all", as: adapters(t, "thing", catchAll), body: own("1", "order.placed"), code: envelope.CodeMissingField, field: "messageId",
			hint: `not read by the adapter of "thing", which has neither Match nor type`},
		{name: "a valid envelope an adapter would take", as: adapters(t, "order.created", sameMembers), body: validFields().body(), wantType: "order.created", wantProducer: "orders-service"},
		{name: "a valid envelope and a catch-all", as: adapters(t, "thing", catchAll), body: validFields().body(), wantType: "order.created", wantProducer: "orders-service"},
		{name: "a malformed envelope and a catch-all", as: adapters(t, "thing", catchAll), body: broken,
			code: envelope.CodeMissingField, field: "idempotencyKey", hint: `not read by the adapter of "thing"`},
		{name: "a malformed envelope a catch-all would read as its own work", as: adapters(t, "thing", catchAll),
			body: validFields().with("occurredAt", `"yesterday"`).body(), code: envelope.CodeInvalidField, field: "occurredAt", hint: `not read by the adapter of "thing"`},
		{name: "a malformed envelope and a typed route", as: adapters(t, "order.placed", typed), body: broken, code: envelope.CodeMissingField, field: "idempotencyKey"},
		{name: "an unknown envelope version", as: adapters(t, "order.placed", typed), body: validFields().with("schemaVersion", "9").body(), code: envelope.CodeUnknownSchemaVersion, field: "schemaVersion"},
		{name: "a repeated member", as: adapters(t, "order.placed", typed), body: validFields().with("aggregateId", `"42","aggregateId":"43"`).body(), code: envelope.CodeInvalidJSON, field: "aggregateId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := read(t, tc.as, envelope.Input{Body: tc.body, Attributes: tc.attrs, MessageID: "sqs-1", SentAt: sentAt})
			if tc.code == "" {
				require.NoError(t, err)
				require.Equal(t, tc.wantType, env.MessageType)
				require.Equal(t, tc.wantProducer, env.Producer)
				if decoded, derr := defaultDecoder(t).Decode(tc.body); derr == nil {
					require.Equal(t, decoded, env, "a valid envelope is read as Decode reads it")
				} else {
					require.Equal(t, "order:o-7", env.IdempotencyKey)
					require.JSONEq(t, `{"orderId":"o-7","amountCents":1999}`, string(env.Payload))
				}
				equivalent(t, env)
				return
			}
			require.Nil(t, env)
			e := requireCode(t, err, tc.code, tc.field)
			require.Equal(t, tc.adapter, e.Adapter, "%v", err)
			if tc.adapter != "" {
				return
			}
			_, derr := defaultDecoder(t).Decode(tc.body)
			var want *envelope.Error
			require.ErrorAs(t, derr, &want)
			require.Equal(t, want.Code, e.Code, "the envelope decoder's own rejection")
			require.Equal(t, want.Field, e.Field)
			require.True(t, strings.HasPrefix(e.Reason, want.Reason), "%q", e.Reason)
			if tc.hint == "" {
				require.Equal(t, want, e)
			} else {
				require.Contains(t, e.Reason, tc.hint)
			}
		})
	}

	// Own JSON with a schemaVersion, read again in a new message (new
	// sentAt), is the same work; a changed body under the key is not.
	as := adapters(t, "order.placed", typed)
	first, err := read(t, as, envelope.Input{Body: own("1", "order.placed"), MessageID: "sqs-1", SentAt: sentAt})
	require.NoError(t, err)
	again, err := read(t, as, envelope.Input{Body: []byte(strings.Replace(string(own("1", "order.placed")), "05:12:16", "05:14:02", 1)), MessageID: "sqs-2", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, first.RequestHash, again.RequestHash)
	changed, err := read(t, as, envelope.Input{Body: []byte(strings.Replace(string(own("1", "order.placed")), "1999", "2999", 1)), MessageID: "sqs-3", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, first.IdempotencyKey, changed.IdempotencyKey)
	require.NotEqual(t, first.RequestHash, changed.RequestHash)
}

// TestReadRejects: an adapted body is held to the decoder's rules, and a
// key is never defaulted.
func TestReadRejects(t *testing.T) {
	small, err := envelope.NewDecoder(envelope.Config{MaxBodyBytes: 1024, MaxKeyBytes: 64})
	require.NoError(t, err)
	own := envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "key", AggregateType: "'order'", AggregateID: "id", AggregateVersion: "v", OccurredAt: "at"}
	as := adapters(t, "x", own)
	deep := strings.Repeat(`{"a":`, envelope.MaxPayloadDepth+1) + "1" + strings.Repeat("}", envelope.MaxPayloadDepth+1)
	cases := []struct {
		name       string
		body       string
		code       envelope.Code
		field      string
		expression string
	}{
		{"no key", `{"id":"o-1"}`, envelope.CodeMissingField, "idempotencyKey", "key"},
		{"a null key", `{"key":null,"id":"o-1"}`, envelope.CodeMissingField, "idempotencyKey", "key"},
		{"an empty key", `{"key":"","id":"o-1"}`, envelope.CodeMissingField, "idempotencyKey", "key"},
		{"a key that is an object", `{"key":{"a":1},"id":"o-1"}`, envelope.CodeInvalidJSON, "idempotencyKey", "key"},
		{"a key too long", `{"key":"` + strings.Repeat("k", 65) + `","id":"o-1"}`, envelope.CodeKeyTooLong, "idempotencyKey", "key"},
		{"a key with a control character", `{"key":"a\u0001b","id":"o-1"}`, envelope.CodeInvalidField, "idempotencyKey", "key"},
		{"no aggregate id", `{"key":"k"}`, envelope.CodeMissingField, "aggregateId", "id"},
		{"an aggregate id too long", `{"key":"k","id":"` + strings.Repeat("i", 257) + `"}`, envelope.CodeInvalidField, "aggregateId", "id"},
		{"a version with a fraction", `{"key":"k","id":"o-1","v":7.5}`, envelope.CodeInvalidJSON, "aggregateVersion", "v"},
		{"a version that is a string", `{"key":"k","id":"o-1","v":"7"}`, envelope.CodeInvalidJSON, "aggregateVersion", "v"},
		{"a negative version", `{"key":"k","id":"o-1","v":-1}`, envelope.CodeInvalidField, "aggregateVersion", "v"},
		{"a version out of range", `{"key":"k","id":"o-1","v":9223372036854775808}`, envelope.CodeInvalidJSON, "aggregateVersion", "v"},
		{"a time without offset", `{"key":"k","id":"o-1","at":"2026-03-29T05:12:16"}`, envelope.CodeInvalidField, "occurredAt", "at"},
		{"a time that is a number", `{"key":"k","id":"o-1","at":1774761136}`, envelope.CodeInvalidJSON, "occurredAt", "at"},
		{"an aggregate id that is an object", `{"key":"k","id":{"a":1}}`, envelope.CodeInvalidJSON, "aggregateId", "id"},
		{"a repeated member", `{"key":"k","id":"o-1","id":"o-2"}`, envelope.CodeInvalidJSON, "id", ""},
		{"a repeated nested member", `{"key":"k","id":"o-1","lines":[{"sku":"a"},{"sku":"b","sku":"c"}]}`, envelope.CodeInvalidJSON, "lines[1].sku", ""},
		{"a payload too deep", `{"key":"k","id":"o-1","p":` + deep + `}`, envelope.CodeInvalidField, "payload", ""},
		{"a payload string that is not UTF-8", "{\"key\":\"k\",\"id\":\"o-1\",\"note\":\"\xff\"}", envelope.CodeInvalidField, "payload", ""},
		{"a body too large", `{"key":"k","id":"o-1","pad":"` + strings.Repeat("x", 1024) + `"}`, envelope.CodeInvalidJSON, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := small.Read(envelope.Input{Body: []byte(tc.body), MessageID: "sqs-1", SentAt: sentAt}, as)
			require.Nil(t, env)
			e := requireCode(t, err, tc.code, tc.field)
			require.Equal(t, tc.expression, e.Expression)
			if tc.expression != "" {
				require.Equal(t, "JSON", e.Adapter, "the adapter is named: %v", err)
			}
		})
	}

	// A key built of members, one of them absent (or of another type): no key.
	_, err = read(t, adapters(t, "OrderPlaced", orders), envelope.Input{Body: []byte(`{"eventType":"OrderPlaced","version":1}`), MessageID: "m", SentAt: sentAt})
	e := requireCode(t, err, envelope.CodeMissingField, "idempotencyKey")
	require.Equal(t, orders.Key, e.Expression)
	_, err = read(t, adapters(t, "OrderPlaced", orders), envelope.Input{Body: []byte(`{"eventType":"OrderPlaced","orderId":42,"version":1}`), MessageID: "m", SentAt: sentAt})
	e = requireCode(t, err, envelope.CodeMissingField, "idempotencyKey")
	require.Error(t, e.Err, "the interpreter's error")
	require.NotContains(t, err.Error(), "42", "the interpreter's error quotes no value")

	// Inside an SNS notification too, naming the member of the Message.
	note := `{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-west-2:1:t","Timestamp":"2026-03-29T05:12:16.901Z","Message":` +
		quote(`{"key":"k","id":"o-1","id":"o-2"}`) + `}`
	_, err = small.Read(envelope.Input{Body: []byte(note)}, adapters(t, "x", sns(own)))
	e = requireCode(t, err, envelope.CodeInvalidJSON, "Message.id")
	require.Equal(t, "SNS(JSON)", e.Adapter)
	_, err = small.Read(envelope.Input{Body: []byte(strings.Replace(note, `"MessageId":"m"`, `"MessageId":"m","MessageId":"n"`, 1))}, adapters(t, "x", sns(own)))
	requireCode(t, err, envelope.CodeInvalidJSON, "MessageId")
}

// TestReadNumbers: numbers are taken by value, as the request hash takes
// them, and never rounded.
func TestReadNumbers(t *testing.T) {
	as := adapters(t, "x", envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "'order'", AggregateID: "id", AggregateVersion: "v"})
	cases := []struct {
		id, v, key string
		version    int64
	}{
		{`42`, `7`, "42", 7},
		{`42.0`, `7.0`, "42", 7},
		{`4.2e1`, `70e-1`, "42", 7},
		{`-0`, `0`, "0", 0},
		{`12345678901234567890`, `9007199254740993`, "12345678901234567890", 9007199254740993},
		{`1e21`, `9223372036854775807`, "1000000000000000000000", 9223372036854775807},
		{`0.1`, `1`, "0.1", 1},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			env, err := read(t, as, envelope.Input{Body: []byte(`{"id":` + tc.id + `,"v":` + tc.v + `}`), MessageID: "m", SentAt: sentAt})
			require.NoError(t, err)
			require.Equal(t, tc.key, env.IdempotencyKey)
			require.Equal(t, tc.key, env.AggregateID)
			require.Equal(t, tc.version, *env.AggregateVersion)
		})
	}
	a, err := read(t, as, envelope.Input{Body: []byte(`{"id":1,"v":1,"amount":1234.0,"big":12345678901234567891}`), MessageID: "m", SentAt: sentAt})
	require.NoError(t, err)
	b, err := read(t, as, envelope.Input{Body: []byte(`{"big":12345678901234567891,"amount":1.234e3,"v":1.0,"id":1e0}`), MessageID: "m", SentAt: sentAt})
	require.NoError(t, err)
	require.Equal(t, a.RequestHash, b.RequestHash, "number forms and member order are not the work")
	c, err := read(t, as, envelope.Input{Body: []byte(`{"id":1,"v":1,"amount":1234.0,"big":12345678901234567892}`), MessageID: "m", SentAt: sentAt})
	require.NoError(t, err)
	require.NotEqual(t, a.RequestHash, c.RequestHash, "a big integer is never rounded")
	raw, err := c.CanonicalPayload()
	require.NoError(t, err)
	require.Contains(t, string(raw), "12345678901234567892")
}

func TestNewAdapterRefuses(t *testing.T) {
	cases := []struct {
		name  string
		spec  envelope.AdapterSpec
		field string
	}{
		{"no key", envelope.AdapterSpec{Kind: envelope.KindJSON, AggregateType: "'o'", AggregateID: "id"}, "Key"},
		{"no aggregate", envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "'o'"}, "AggregateID"},
		{"a key that is no expression", envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "join(", AggregateType: "'o'", AggregateID: "id"}, "Key"},
		{"both type and attribute", envelope.AdapterSpec{Kind: envelope.KindJSON, Type: "t", TypeAttribute: "t", Key: "id", AggregateType: "'o'", AggregateID: "id"}, "TypeAttribute"},
		{"a type for an event", envelope.AdapterSpec{Kind: envelope.KindEventBridge, Type: "t", Key: "id", AggregateType: "'o'", AggregateID: "id"}, "Type"},
		{"a detail-type for JSON", envelope.AdapterSpec{Kind: envelope.KindJSON, DetailType: "t", Key: "id", AggregateType: "'o'", AggregateID: "id"}, "DetailType"},
		{"no kind", envelope.AdapterSpec{Key: "id", AggregateType: "'o'", AggregateID: "id"}, "Kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envelope.NewAdapter(tc.spec)
			require.ErrorIs(t, err, envelope.ErrAdapter)
			var ae *envelope.AdapterError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.field, ae.Field, "%v", err)
		})
	}
}

func TestAdaptersWithRefuses(t *testing.T) {
	catchAll := mustAdapter(t, envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "'o'", AggregateID: "id"})
	snsCatchAll := mustAdapter(t, sns(envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "'o'", AggregateID: "id"}))
	typed := mustAdapter(t, orders)
	placed := mustAdapter(t, placedEvents)
	anySource := placedEvents
	anySource.Source = ""
	placedAnySource := mustAdapter(t, anySource)
	placedViaSNS := mustAdapter(t, sns(placedEvents))
	cases := []struct {
		name   string
		first  *envelope.Adapter
		second *envelope.Adapter
		ok     bool
	}{
		{"after a catch-all", catchAll, typed, false},
		{"after an SNS catch-all, an SNS route", snsCatchAll, mustAdapter(t, sns(orders)), false},
		{"after an SNS catch-all, an event route", snsCatchAll, placed, false},
		{"after an SNS catch-all, a JSON route", snsCatchAll, typed, true},
		{"the same events twice", placed, placed, false},
		{"events of any source before one source's", placedAnySource, placed, false},
		{"one source's before any source's", placed, placedAnySource, true},
		{"raw events before events via SNS", placed, placedViaSNS, true},
		{"events via SNS before raw events", placedViaSNS, placed, false},
		{"a catch-all last", typed, catchAll, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, err := (*envelope.Adapters)(nil).With("First", tc.first)
			require.NoError(t, err)
			_, err = as.With("Second", tc.second)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, envelope.ErrAdapter)
			var ae *envelope.AdapterError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "Second", ae.MessageType)
			require.Contains(t, err.Error(), `"First"`)
		})
	}
	_, err := (*envelope.Adapters)(nil).With("Order Placed", placed)
	require.ErrorIs(t, err, envelope.ErrAdapter, "a message type is [A-Za-z0-9._-]: the detail-type goes in DetailType")
	as, err := (*envelope.Adapters)(nil).With("OrderPlaced", placed)
	require.NoError(t, err)
	_, err = as.With("OrderPlaced", typed)
	require.ErrorIs(t, err, envelope.ErrAdapter)
	require.Equal(t, []string{"OrderPlaced"}, as.Types())
}

// TestReadWithoutAdapters is Decode.
func TestReadWithoutAdapters(t *testing.T) {
	for _, body := range [][]byte{validFields().body(), testdata(t, "sns-notification.json"), []byte(`{`)} {
		want, werr := defaultDecoder(t).Decode(body)
		got, gerr := read(t, nil, envelope.Input{Body: body})
		require.Equal(t, werr, gerr)
		require.Equal(t, want, got)
	}
}

// Attributes lists the message attributes the adapters read to take a
// body (TypeAttribute), each once, by name: the worker's copies of a
// message keep them (issue 21).
func TestAdaptersAttributes(t *testing.T) {
	spec := func(attr, typ string) envelope.AdapterSpec {
		return envelope.AdapterSpec{Kind: envelope.KindJSON, TypeAttribute: attr, Type: typ, Key: "id", AggregateType: "'order'", AggregateID: "id"}
	}
	require.Empty(t, (*envelope.Adapters)(nil).Attributes())
	require.Empty(t, adapters(t, "ByBody", spec("", "kind")).Attributes(), "a type read from the body needs no attribute")
	as := adapters(t, "OrderPlaced", spec("eventType", ""), "OrderShipped", spec("eventType", ""),
		"Invoice", spec("Kind", ""), "ByBody", spec("", "kind"))
	require.Equal(t, []string{"Kind", "eventType"}, as.Attributes())
	sns := spec("eventType", "")
	sns.SNS = true
	require.Equal(t, []string{"eventType"}, adapters(t, "OrderPlaced", sns).Attributes(), "an SNS adapter's, raw delivery puts it on the message")
}
