package envelope_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/ddbworker/ddbworker/envelope"
)

var hex64 = regexp.MustCompile(`^v3:[0-9a-f]{64}$`)

func FuzzDecode(f *testing.F) {
	base := validFields()
	seeds := [][]byte{
		base.body(),
		base.without("attemptPolicy").without("aggregateVersion").body(),
		base.with("payload", `[1, 1.0, -0, 1e999999999, "\u00e9\ud83d\ude00", {"b":{},"a":[]}]`).body(),
		base.with("payload", `{"z":1,"a":{"y":2,"x":3}}`).body(),
		base.with("payload", `"\u2028<&>"`).body(),
		base.with("schemaVersion", `2`).body(),
		base.with("idempotencyKey", quote(strings.Repeat("k", 513))).body(),
		base.with("payload", `null`).body(),
		base.with("payload", `{"a":1,"a":2}`).body(),
		base.with("aggregateVersion", `-1`).body(),
		refFields().body(),
		refFields().with("payload", `1`).body(),
		base.without("payload").with("payloadRef", `{"bucket":"a","key":1}`).body(),
		base.with("occurredAt", `"2024-02-30T00:00:00Z"`).body(),
		base.with("attemptPolicy", `{"maxBusinessAttempts":"x"}`).body(),
		base.without("messageId").body(),
		append(base.body(), "x"...),
		[]byte(`[]`),
		[]byte(`{`),
		[]byte(`{"schemaVersion":1}`),
		[]byte(`{"payload":1e2147483648,"schemaVersion":1}`),
		[]byte(""),
		[]byte("\xff"),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	d, err := envelope.NewDecoder(envelope.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := d.Decode(body)
		if err != nil {
			if e != nil {
				t.Fatalf("non-nil envelope with error %v", err)
			}
			var ee *envelope.Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not *envelope.Error: %v", err, err)
			}
			if ee.Code == "" || ee.Reason == "" {
				t.Fatalf("empty code or reason: %#v", ee)
			}
			if !errors.Is(err, envelope.ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			if !json.Valid(body) && (ee.Code != envelope.CodeInvalidJSON || ee.Field != "") {
				t.Fatalf("invalid JSON reported as %v", err)
			}
			_ = err.Error()
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that encoding/json rejects")
		}
		if !hex64.MatchString(e.RequestHash) {
			t.Fatalf("bad RequestHash %q", e.RequestHash)
		}
		h, err := envelope.RequestHash(e)
		if err != nil || h != e.RequestHash {
			t.Fatalf("RequestHash(e) = %q, %v; Decode set %q", h, err, e.RequestHash)
		}
		enc, err := envelope.Encode(e)
		if err != nil {
			t.Fatalf("Encode of a decoded envelope failed: %v", err)
		}
		e2, err := d.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(e)) failed: %v\nencoded: %s", err, enc)
		}
		if e2.RequestHash != e.RequestHash {
			t.Fatalf("round trip changed RequestHash\nbody:    %q\nencoded: %q", body, enc)
		}
	})
}

// FuzzRead: Decoder.Read with adapters holds Decode's contract for every
// body: a *Error, or an envelope that is one (it hashes as it says, encodes
// and decodes back to the same work); and a body Decode accepts is read as
// that envelope, whatever the adapters would make of it.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"sns-notification.json", "sns-republished.json", "sns-raw.json", "eventbridge-event.json", "own.json"} {
		f.Add(testdata(f, name))
	}
	for _, s := range []string{
		`{"eventType":"OrderPlaced","orderId":1e400,"version":7.0}`,
		`{"eventType":"OrderPlaced","orderId":"o","orderId":"p"}`,
		`{"Type":"Notification","TopicArn":"t","MessageId":"m","Timestamp":"2026-03-29T05:12:16Z","Message":"{\"eventType\":\"OrderPlaced\",\"orderId\":12345678901234567890}"}`,
		`{"Type":"SubscriptionConfirmation","TopicArn":"t"}`,
		`{"detail-type":"Order Placed","source":"com.example.orders","detail":{"orderId":"o","version":-1}}`,
		`{"id":"x","kind":["a"]}`,
		`{"schemaVersion":1,"eventType":"OrderPlaced","orderId":"o-1","version":3}`,
		`{"schemaVersion":"2.1","id":"x","kind":"thing"}`,
		`[]`, `{}`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Add(validFields().body())
	f.Add(validFields().without("idempotencyKey").body())
	d, err := envelope.NewDecoder(envelope.Config{})
	if err != nil {
		f.Fatal(err)
	}
	as := adapters(f, "OrderPlaced", sns(orders), "OrderPlacedEvent", sns(placedEvents),
		"thing", envelope.AdapterSpec{Kind: envelope.KindJSON, Key: "id", AggregateType: "kind", AggregateID: "to_string(id)", Payload: "{id: id, v: v}"})
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := d.Read(envelope.Input{Body: body, MessageID: "m", SentAt: sentAt, Attributes: map[string]string{"eventType": "OrderPlaced"}}, as)
		if want, derr := d.Decode(body); derr == nil && (err != nil || e.RequestHash != want.RequestHash || e.MessageID != want.MessageID) {
			t.Fatalf("a body Decode accepts is an envelope: Read = %v, %v; Decode = %v", e, err, want)
		}
		if err != nil {
			if e != nil {
				t.Fatalf("non-nil envelope with error %v", err)
			}
			var ee *envelope.Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not *envelope.Error: %v", err, err)
			}
			if ee.Code == "" || ee.Reason == "" || !errors.Is(err, envelope.ErrInvalid) {
				t.Fatalf("bad error: %#v", ee)
			}
			_ = err.Error()
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that encoding/json rejects")
		}
		if !hex64.MatchString(e.RequestHash) {
			t.Fatalf("bad RequestHash %q", e.RequestHash)
		}
		if h, err := envelope.RequestHash(e); err != nil || h != e.RequestHash {
			t.Fatalf("RequestHash(e) = %q, %v; Read set %q", h, err, e.RequestHash)
		}
		enc, err := envelope.Encode(e)
		if err != nil {
			t.Fatalf("Encode of a read envelope failed: %v", err)
		}
		e2, err := d.Decode(enc)
		if err != nil || e2.RequestHash != e.RequestHash {
			t.Fatalf("Decode(Encode(e)) = %v, %v\nbody:    %q\nencoded: %q", e2, err, body, enc)
		}
		if p1, err := e.CanonicalPayload(); err != nil {
			t.Fatalf("CanonicalPayload: %v", err)
		} else if p2, _ := e2.CanonicalPayload(); string(p1) != string(p2) {
			t.Fatalf("canonical payloads differ: %s / %s", p1, p2)
		}
	})
}
