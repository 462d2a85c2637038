package envelope_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

// refPayload is the object a reference in refFields points at.
const refPayload = `{"sku":"A-1","qty":2}`

func refSHA(b string) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

func refJSON(bucket, key, version, sha, size string) string {
	var b strings.Builder
	b.WriteString(`{"bucket":` + bucket + `,"key":` + key)
	if version != "" {
		b.WriteString(`,"versionId":` + version)
	}
	b.WriteString(`,"sha256":` + sha + `,"size":` + size + `}`)
	return b.String()
}

// refFields is validFields with the payload by reference.
func refFields() fields {
	return validFields().without("payload").with("payloadRef",
		refJSON(`"payloads-bucket"`, `"orders/42/create.json"`, `"v-1"`, quote(refSHA(refPayload)), "21"))
}

func TestDecodePayloadRef(t *testing.T) {
	e := mustDecode(t, refFields().body())
	require.Nil(t, e.Payload, "a reference envelope's payload is fetched later")
	require.Equal(t, &envelope.PayloadRef{Bucket: "payloads-bucket", Key: "orders/42/create.json", VersionID: "v-1",
		SHA256: refSHA(refPayload), Size: 21}, e.PayloadRef)
	require.NotEmpty(t, e.RequestHash)
	h, err := envelope.RequestHash(e)
	require.NoError(t, err)
	require.Equal(t, e.RequestHash, h)

	// The hash covers the content identity, not where a copy lives.
	moved := validFields().without("payload").with("payloadRef",
		refJSON(`"other-bucket"`, `"resent/copy"`, "", quote(refSHA(refPayload)), "21"))
	require.Equal(t, e.RequestHash, hashOf(t, moved))
	for name, f := range map[string]fields{
		"sha256": validFields().without("payload").with("payloadRef", refJSON(`"payloads-bucket"`, `"k"`, "", quote(refSHA("other")), "21")),
		"size":   validFields().without("payload").with("payloadRef", refJSON(`"payloads-bucket"`, `"k"`, "", quote(refSHA(refPayload)), "22")),
		"inline": validFields().with("payload", refPayload),
	} {
		require.NotEqual(t, e.RequestHash, hashOf(t, f), name)
	}

	// Encode writes the reference and no payload, and round-trips.
	enc, err := envelope.Encode(e)
	require.NoError(t, err)
	require.NotContains(t, string(enc), `"payload":`)
	require.Contains(t, string(enc), `"payloadRef":{"bucket":"payloads-bucket"`)
	require.Equal(t, e.RequestHash, mustDecode(t, enc).RequestHash)
}

func TestDecodePayloadRefAccepts(t *testing.T) {
	sha := quote(refSHA(refPayload))
	for name, f := range map[string]fields{
		"payloadRef null with payload": validFields().with("payloadRef", `null`),
		"no versionId":                 validFields().without("payload").with("payloadRef", refJSON(`"abc"`, `"k"`, "", sha, "1")),
		"versionId null":               validFields().without("payload").with("payloadRef", refJSON(`"abc"`, `"k"`, "null", sha, "1")),
		"unknown member ignored":       validFields().without("payload").with("payloadRef", `{"bucket":"a.b-c","key":"k","sha256":`+sha+`,"size":1,"region":"eu-west-1"}`),
		"63-char bucket":               validFields().without("payload").with("payloadRef", refJSON(quote(strings.Repeat("b", 63)), `"k"`, "", sha, "1")),
		"1024-byte key":                validFields().without("payload").with("payloadRef", refJSON(`"abc"`, quote(strings.Repeat("é", 512)), "", sha, "1")),
		"large size":                   validFields().without("payload").with("payloadRef", refJSON(`"abc"`, `"k"`, "", sha, "9223372036854775807")),
	} {
		t.Run(name, func(t *testing.T) {
			mustDecode(t, f.body())
		})
	}
}

func TestDecodePayloadRefRejects(t *testing.T) {
	const (
		invalidJSON = envelope.CodeInvalidJSON
		missing     = envelope.CodeMissingField
		invalid     = envelope.CodeInvalidField
	)
	sha := quote(refSHA(refPayload))
	ref := func(raw string) fields { return validFields().without("payload").with("payloadRef", raw) }
	cases := []struct {
		name  string
		f     fields
		code  envelope.Code
		field string
	}{
		{"both payload and payloadRef", refFields().with("payload", refPayload), invalid, "payload"},
		{"null payload and payloadRef", refFields().with("payload", `null`), invalid, "payload"},
		{"neither", validFields().without("payload"), missing, "payload"},
		{"payloadRef null alone", validFields().without("payload").with("payloadRef", `null`), missing, "payload"},
		{"payloadRef string", ref(`"s3://b/k"`), invalidJSON, "payloadRef"},
		{"payloadRef array", ref(`[]`), invalidJSON, "payloadRef"},
		{"bucket number", ref(refJSON(`1`, `"k"`, "", sha, "1")), invalidJSON, "payloadRef.bucket"},
		{"size string", ref(refJSON(`"abc"`, `"k"`, "", sha, `"21"`)), invalidJSON, "payloadRef.size"},
		{"size fraction", ref(refJSON(`"abc"`, `"k"`, "", sha, `21.5`)), invalidJSON, "payloadRef.size"},
		{"duplicate member", ref(`{"bucket":"abc","bucket":"abd","key":"k","sha256":` + sha + `,"size":1}`), invalidJSON, "payloadRef.bucket"},
		{"bucket missing", ref(`{"key":"k","sha256":` + sha + `,"size":1}`), missing, "payloadRef.bucket"},
		{"bucket empty", ref(refJSON(`""`, `"k"`, "", sha, "1")), missing, "payloadRef.bucket"},
		{"key missing", ref(`{"bucket":"abc","sha256":` + sha + `,"size":1}`), missing, "payloadRef.key"},
		{"sha256 null", ref(refJSON(`"abc"`, `"k"`, "", `null`, "1")), missing, "payloadRef.sha256"},
		{"size missing", ref(`{"bucket":"abc","key":"k","sha256":` + sha + `}`), missing, "payloadRef.size"},
		{"bucket uppercase", ref(refJSON(`"My-Bucket"`, `"k"`, "", sha, "1")), invalid, "payloadRef.bucket"},
		{"bucket short", ref(refJSON(`"ab"`, `"k"`, "", sha, "1")), invalid, "payloadRef.bucket"},
		{"bucket 64 chars", ref(refJSON(quote(strings.Repeat("b", 64)), `"k"`, "", sha, "1")), invalid, "payloadRef.bucket"},
		{"bucket trailing dash", ref(refJSON(`"abc-"`, `"k"`, "", sha, "1")), invalid, "payloadRef.bucket"},
		{"bucket underscore", ref(refJSON(`"a_bc"`, `"k"`, "", sha, "1")), invalid, "payloadRef.bucket"},
		{"key 1025 bytes", ref(refJSON(`"abc"`, quote(strings.Repeat("k", 1025)), "", sha, "1")), invalid, "payloadRef.key"},
		{"key control char", ref(refJSON(`"abc"`, `"a\nb"`, "", sha, "1")), invalid, "payloadRef.key"},
		{"versionId control char", ref(refJSON(`"abc"`, `"k"`, `"v\u0000"`, sha, "1")), invalid, "payloadRef.versionId"},
		{"sha256 uppercase", ref(refJSON(`"abc"`, `"k"`, "", quote(strings.ToUpper(refSHA(refPayload))), "1")), invalid, "payloadRef.sha256"},
		{"sha256 short", ref(refJSON(`"abc"`, `"k"`, "", `"abc123"`, "1")), invalid, "payloadRef.sha256"},
		{"size zero", ref(refJSON(`"abc"`, `"k"`, "", sha, "0")), invalid, "payloadRef.size"},
		{"size negative", ref(refJSON(`"abc"`, `"k"`, "", sha, "-5")), invalid, "payloadRef.size"},
	}
	d := defaultDecoder(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := d.Decode(tc.f.body())
			require.Nil(t, e)
			requireCode(t, err, tc.code, tc.field)
		})
	}
}

func TestEncodePayloadRef(t *testing.T) {
	base := mustDecode(t, refFields().body())
	both := *base
	both.Payload = []byte(refPayload)
	_, err := envelope.Encode(&both)
	requireCode(t, err, envelope.CodeInvalidField, "payload")

	noSize := *base
	ref := *base.PayloadRef
	ref.Size = 0
	noSize.PayloadRef = &ref
	_, err = envelope.Encode(&noSize)
	requireCode(t, err, envelope.CodeMissingField, "payloadRef.size")
}

func TestResolvePayload(t *testing.T) {
	t.Run("matching bytes", func(t *testing.T) {
		e := mustDecode(t, refFields().body())
		h := e.RequestHash
		fetched := []byte(refPayload)
		require.NoError(t, e.ResolvePayload(fetched))
		fetched[0] = 'x'
		require.JSONEq(t, refPayload, string(e.Payload), "copied")
		got, err := envelope.RequestHash(e)
		require.NoError(t, err)
		require.Equal(t, h, got, "the hash covers the reference, not the fetched bytes")
	})
	mismatch := func(ref string) fields {
		return validFields().without("payload").with("payloadRef", refJSON(`"abc"`, `"k"`, "", quote(refSHA(ref)), strconv.Itoa(len(ref))))
	}
	for _, tc := range []struct {
		name, ref, fetched string
		field              string
		refMismatch        bool
	}{
		{"size differs", refPayload, refPayload + " ", "payloadRef.size", true},
		{"sha differs", refPayload, strings.Replace(refPayload, "2", "3", 1), "payloadRef.sha256", true},
		{"not JSON", "not json", "not json", "payload", false},
		{"null", "null", "null", "payload", false},
		{"duplicate key", `{"a":1,"a":2}`, `{"a":1,"a":2}`, "payload", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustDecode(t, mismatch(tc.ref).body())
			err := e.ResolvePayload([]byte(tc.fetched))
			requireCode(t, err, envelope.CodeInvalidField, tc.field)
			require.Equal(t, tc.refMismatch, errors.Is(err, envelope.ErrRefMismatch))
			require.Nil(t, e.Payload)
		})
	}
	t.Run("inline envelope", func(t *testing.T) {
		e := mustDecode(t, validFields().body())
		requireCode(t, e.ResolvePayload([]byte(`{}`)), envelope.CodeInvalidField, "payloadRef")
	})
}
