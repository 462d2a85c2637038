package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
)

// The fixtures every producer-facing artefact shares: the schema, the
// decoder, docs/producers.md and `ddbworker envelope validate`.
const fixtures = "testdata/schema"

// expectations is testdata/schema/expect.json.
type expectations struct {
	// Invalid maps each invalid/ fixture to the decoder's verdict. Schema
	// "passes" marks the rules JSON Schema cannot express (listed in the
	// schema's description), with why.
	Invalid map[string]struct {
		Code   envelope.Code `json:"code"`
		Field  string        `json:"field"`
		Schema string        `json:"schema"`
		Why    string        `json:"why"`
	} `json:"invalid"`
	// Lenient lists lenient/ fixtures: the decoder accepts them, the schema
	// (stricter, as RFC 3339 is) rejects them.
	Lenient map[string]struct {
		Why string `json:"why"`
	} `json:"lenient"`
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(envelope.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("envelope.schema.json", doc))
	s, err := c.Compile("envelope.schema.json")
	require.NoError(t, err)
	return s
}

// schemaFields validates body against s and returns the envelope fields
// (decoder spelling: "attemptPolicy.notBefore", "" for the whole body) at
// which it fails, or nil when it passes.
func schemaFields(t *testing.T, s *jsonschema.Schema, body []byte) []string {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	require.NoError(t, err)
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	var fields []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := slices.Clone(e.InstanceLocation)
		if r, ok := e.ErrorKind.(*kind.Required); ok {
			loc = append(loc, r.Missing[0])
		}
		// The decoder names the field, not a place inside it: an array
		// element of terminalAfterCodes, a member deep in the payload.
		for i, seg := range loc {
			if _, err := strconv.Atoi(seg); err == nil || (i > 0 && loc[0] == "payload") {
				loc = loc[:i]
				break
			}
		}
		if f := strings.Join(loc, "."); !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	walk(ve)
	require.NotEmpty(t, fields, "%v", err)
	return fields
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(fixtures, dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		out[filepath.Base(n)] = b
	}
	return out
}

// TestSchemaLockstep keeps the JSON Schema and the decoder in lockstep:
// every valid fixture passes both; every invalid one fails both at the
// same field, except those the expectations mark as beyond JSON Schema,
// which the schema must pass (so the list of exceptions stays honest).
func TestSchemaLockstep(t *testing.T) {
	s := compileSchema(t)
	d := defaultDecoder(t)
	var exp expectations
	raw, err := os.ReadFile(filepath.Join(fixtures, "expect.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&exp))

	for name, body := range readDir(t, "valid") {
		t.Run("valid/"+name, func(t *testing.T) {
			_, err := d.Decode(body)
			require.NoError(t, err)
			require.Empty(t, schemaFields(t, s, body))
		})
	}
	invalid := readDir(t, "invalid")
	require.Len(t, exp.Invalid, len(invalid), "every invalid fixture has an expectation and vice versa")
	for name, body := range invalid {
		t.Run("invalid/"+name, func(t *testing.T) {
			want, ok := exp.Invalid[name]
			require.True(t, ok, "no expectation for %s", name)
			_, err := d.Decode(body)
			requireCode(t, err, want.Code, want.Field)
			fields := schemaFields(t, s, body)
			switch want.Schema {
			case "":
				require.Equal(t, []string{want.Field}, fields, "the schema must fail at the decoder's field, and only there")
			case "passes":
				require.NotEmpty(t, want.Why)
				require.Empty(t, fields, "the schema catches this after all: drop it from the exceptions")
			default:
				t.Fatalf("schema: %q", want.Schema)
			}
		})
	}
	lenient := readDir(t, "lenient")
	require.Len(t, exp.Lenient, len(lenient))
	for name, body := range lenient {
		t.Run("lenient/"+name, func(t *testing.T) {
			require.NotEmpty(t, exp.Lenient[name].Why)
			_, err := d.Decode(body)
			require.NoError(t, err)
			require.NotEmpty(t, schemaFields(t, s, body))
		})
	}
}

func TestSchemaIsACopy(t *testing.T) {
	a := envelope.Schema()
	a[0] = 'x'
	require.Equal(t, byte('{'), envelope.Schema()[0])
	require.True(t, json.Valid(envelope.Schema()))
}
