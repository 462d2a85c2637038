package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/daemonext"
)

// The producer contract's shared fixtures (envelope/testdata/schema).
const envelopeFixtures = "../envelope/testdata/schema"

func runEnvelopeCLI(t *testing.T, stdin string, args ...string) (stdout string, code int) {
	t.Helper()
	root := newRootCmd(App{Name: "ddbworker"})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"envelope"}, args...))
	err := root.Execute()
	if err == nil {
		return out.String(), 0
	}
	var exit *daemonext.ExitError
	require.ErrorAs(t, err, &exit, "%v", err)
	return out.String(), exit.Code
}

func TestEnvelopeValidate(t *testing.T) {
	tests := []struct {
		name, file string
		code       int
		want       []string
	}{
		{"valid", "valid/all-fields.json", 0, []string{"valid\n"}},
		{"payloadRef", "valid/payload-ref.json", 0, []string{"valid\n"}},
		{"python utcnow without offset", "invalid/occurredAt-python-utcnow-no-offset.json", 1,
			[]string{"code:   INVALID_FIELD\n", "field:  occurredAt\n", "reason: must be an RFC 3339 time: parsing time"}},
		{"missing field", "invalid/payload-missing.json", 1, []string{"code:   MISSING_FIELD\n", "field:  payload\n"}},
		{"key too long in bytes", "invalid/idempotencyKey-513-bytes-multibyte.json", 1, []string{"code:   KEY_TOO_LONG\n", "field:  idempotencyKey\n", "reason: key is 513 bytes, limit is 512"}},
		{"not an object", "invalid/not-an-object.json", 1, []string{"code:   INVALID_ENVELOPE\n", "field:  -\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(envelopeFixtures, tt.file)
			out, code := runEnvelopeCLI(t, "", "validate", path)
			require.Equal(t, tt.code, code, out)
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
			if tt.code == 0 {
				require.Equal(t, "valid\n", out)
			}
			// The same from stdin.
			body, err := os.ReadFile(path)
			require.NoError(t, err)
			out2, code2 := runEnvelopeCLI(t, string(body), "validate", "-")
			require.Equal(t, tt.code, code2)
			require.Equal(t, out, out2)
		})
	}
	root := newRootCmd(App{})
	root.SetArgs([]string{"envelope", "validate", filepath.Join(t.TempDir(), "missing.json")})
	root.SetOut(&bytes.Buffer{})
	require.ErrorContains(t, root.Execute(), "no such file", "an unreadable file is an error (exit 1 with the reason)")
}

func TestEnvelopeHash(t *testing.T) {
	path := filepath.Join(envelopeFixtures, "valid/all-fields.json")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	e, err := (*envelope.Decoder)(nil).Decode(body)
	require.NoError(t, err)

	out, code := runEnvelopeCLI(t, "", "hash", path)
	require.Equal(t, 0, code)
	require.Equal(t, e.RequestHash+"\n", out)
	require.True(t, strings.HasPrefix(out, "v3:"))

	v2, err := envelope.RequestHashVersion(e, envelope.HashV2)
	require.NoError(t, err)
	out, code = runEnvelopeCLI(t, string(body), "hash", "--hash-version", "v2", "-")
	require.Equal(t, 0, code)
	require.Equal(t, v2+"\n", out)

	v1, err := envelope.RequestHashVersion(e, envelope.HashV1)
	require.NoError(t, err)
	out, code = runEnvelopeCLI(t, string(body), "hash", "--hash-version", "v1", "-")
	require.Equal(t, 0, code)
	require.Equal(t, v1+"\n", out)

	// The same work re-sent (new messageId, other formatting) hashes the same.
	resent := strings.Replace(string(body), e.MessageID, "another-message-id", 1)
	resent = strings.Replace(resent, `"amountCents": 1999`, `"amountCents": 1999.0`, 1)
	out, code = runEnvelopeCLI(t, resent, "hash", "-")
	require.Equal(t, 0, code)
	require.Equal(t, e.RequestHash+"\n", out)

	out, code = runEnvelopeCLI(t, "", "hash", filepath.Join(envelopeFixtures, "invalid/schemaVersion-2.json"))
	require.Equal(t, 1, code)
	require.Contains(t, out, "code:   UNKNOWN_SCHEMA_VERSION\n")

	root := newRootCmd(App{})
	root.SetArgs([]string{"envelope", "hash", "--hash-version", "v4", path})
	root.SetOut(&bytes.Buffer{})
	require.ErrorContains(t, root.Execute(), "want v1, v2 or v3")
}

func TestEnvelopeSchema(t *testing.T) {
	out, code := runEnvelopeCLI(t, "", "schema")
	require.Equal(t, 0, code)
	require.Equal(t, string(envelope.Schema()), out)
}
