package envelope_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

// HashV3's canonical text is HashV2's byte for byte wherever the two forms
// agree (see RequestHash): then the digests are equal, only the prefix
// differs. Where they differ (an exponent form, U+2028/U+2029, member names
// ordered differently by UTF-16 and UTF-8), so do the digests.
func TestHashV3MatchesV2(t *testing.T) {
	base := validFields()
	bench := string(mustDecode(t, benchBody(t)).Payload)
	for _, tc := range []struct {
		name, payload string
		same          bool
	}{
		{"benchmark payload", bench, true},
		{"validFields payload", `{"sku":"A-1","qty":2,"price":19.99,"note":"` + secret + `"}`, true},
		{"integral float", `{"n":1234.0,"m":1.2340e3}`, true},
		{"decimals", `[19.990,-0.5,0.000001,-1200.50,123.456e2]`, true},
		{"zeros", `[0,-0,0.0,0e5]`, true},
		{"integers above 2^53", `[9007199254740993,12345678901234567890,-9223372036854775808,123456789012345678901]`, true},
		{"long integer literal", `12345678901234567890123`, true},
		{"1e20", `1e20`, true},
		{"strings", `["\u00e9\ud83d\ude00","<&>","\u0001\n\u007f","\/"]`, true},
		{"nesting and order", `{"b":{"d":[],"c":{}},"a":null,"é":true,"Z":false}`, true},
		{"1e21", `1e21`, false},                       // v2 "1e21", v3 "1000000000000000000000"
		{"small exponent", `1.5e-7`, false},           // v2 "15e-8", v3 "1.5e-7"
		{"huge exponent", `1e400`, false},             // v2 "1e400", v3 "1e+400"
		{"U+2028", `"\u2028"`, false},                 // v2 escapes it
		{"UTF-16 order", `{"\uffff":1,"😀":2}`, false}, // v2 puts U+FFFF first
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base.with("payload", tc.payload)
			v2, v3 := hashV(t, f, envelope.HashV2), hashV(t, f, envelope.HashV3)
			require.True(t, strings.HasPrefix(v2, "v2:") && strings.HasPrefix(v3, "v3:"))
			require.Equal(t, tc.same, v2[3:] == v3[3:], "v2 %s, v3 %s", v2, v3)
		})
	}
}

// A record written before v3 is the same work as its redelivery decoded
// today, whatever its version; changed work is not.
func TestHashLikeOlderVersions(t *testing.T) {
	payload := `{"n":1e21,"s":"\u2028","big":12345678901234567890}`
	orig := mustDecode(t, validFields().with("payload", payload).body())
	redelivery := mustDecode(t, validFields().with("messageId", `"msg-0002"`).
		with("payload", `{"big":12345678901234567890,"s":"`+"\u2028"+`","n":10e20}`).body())
	changed := mustDecode(t, validFields().with("payload", `{"n":1e21,"s":"\u2028","big":12345678901234567891}`).body())
	for _, v := range []envelope.HashVersion{envelope.HashV1, envelope.HashV2, envelope.HashV3} {
		stored, err := envelope.RequestHashVersion(orig, v)
		require.NoError(t, err)
		got, ok := envelope.HashVersionOf(stored)
		require.True(t, ok)
		require.Equal(t, v, got)
		same, err := redelivery.HashLike(stored)
		require.NoError(t, err)
		require.Equal(t, stored, same, "%v: same work", v)
		other, err := changed.HashLike(stored)
		require.NoError(t, err)
		require.NotEqual(t, stored, other, "%v: another integer above 2^53 is other work", v)
	}
}

// A decoded envelope's payload changed in place (its bytes, not the slice)
// is refused by every version, never walked as if still valid.
func TestHashOfPayloadChangedInPlace(t *testing.T) {
	e := mustDecode(t, validFields().body())
	copy(e.Payload, `{"a":[}`)
	for _, v := range []envelope.HashVersion{envelope.HashV1, envelope.HashV2, envelope.HashV3} {
		_, err := envelope.RequestHashVersion(e, v)
		requireCode(t, err, envelope.CodeInvalidField, "payload")
	}
}
