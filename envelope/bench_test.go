package envelope_test

import (
	"strings"
	"testing"

	"github.com/ddbworker/ddbworker/envelope"
)

// benchBody is a realistic envelope of about 1 KB.
func benchBody(tb testing.TB) []byte {
	tb.Helper()
	items := make([]string, 0, 6)
	for i, sku := range []string{"A-100", "B-200", "C-300", "D-400"} {
		items = append(items, `{"sku":"`+sku+`","qty":`+string(rune('1'+i))+`,"unitPrice":12.50,"currency":"EUR","tags":["gift","fragile"]}`)
	}
	payload := `{"orderId":"ord-2024-000042","customer":{"id":"cust-9","name":"Jane Q. Public","email":"jane@example.com",` +
		`"address":{"street":"1 Main St","city":"Springfield","zip":"12345","country":"US"}},` +
		`"items":[` + strings.Join(items, ",") + `],"total":123.45,"notes":"leave at the door \u2014 thanks"}`
	body := validFields().with("payload", payload).body()
	if n := len(body); n < 900 || n > 1100 {
		tb.Fatalf("benchmark body is %d bytes, want about 1 KB", n)
	}
	return body
}

func BenchmarkDecode(b *testing.B) {
	body := benchBody(b)
	d := defaultDecoder(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRequestHash(b *testing.B) {
	e := mustDecode(b, benchBody(b))
	b.SetBytes(int64(len(e.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.RequestHash(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestHashVersion hashes the benchmark envelope in each
// version: v1 and v2 (kept for records written with them) walk jsontext's
// tokens, v3 is jsontext's formatting plus exact numbers.
func BenchmarkRequestHashVersion(b *testing.B) {
	e := mustDecode(b, benchBody(b))
	for _, v := range []envelope.HashVersion{envelope.HashV1, envelope.HashV2, envelope.CurrentHashVersion} {
		b.Run(v.String(), func(b *testing.B) {
			b.SetBytes(int64(len(e.Payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := envelope.RequestHashVersion(e, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadSNS reads an SNS notification through an adapter: the
// document parse and the JMESPath expressions.
func BenchmarkReadSNS(b *testing.B) {
	d := defaultDecoder(b)
	as := adapters(b, "OrderPlaced", sns(orders))
	in := envelope.Input{Body: testdata(b, "sns-notification.json"), MessageID: "m", SentAt: sentAt}
	b.SetBytes(int64(len(in.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Read(in, as); err != nil {
			b.Fatal(err)
		}
	}
}
