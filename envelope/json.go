package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// This file holds what the package needs from a JSON parser, on jsontext
// (github.com/go-json-experiment/json, the Go team's encoding/json/v2):
// RFC 8259 syntax, nesting up to 10000 levels as encoding/json allows,
// duplicate names and UTF-8 checked where the caller asks.

// lenient reads what encoding/json's json.Valid accepts: repeated member
// names and invalid UTF-8 are the envelope's rules to report (a field's
// UTF-8, a repeated field), not syntax.
var lenient = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reader is a reusable jsontext.Decoder reading a []byte in place: the
// values it returns alias the input.
type reader struct {
	bb  bytes.Buffer
	dec jsontext.Decoder
}

func (r *reader) reset(b []byte, opts ...jsontext.Options) *jsontext.Decoder {
	r.bb = *bytes.NewBuffer(b)
	r.dec.Reset(&r.bb, opts...)
	return &r.dec
}

// validJSON reports whether b is one JSON value, as json.Valid does.
func validJSON(b []byte) bool { return jsontext.Value(b).IsValid(lenient...) }

// syntaxError is the error for malformed JSON b: encoding/json's own
// *json.SyntaxError, which quotes at most one byte of the input (jsontext's
// errors name the members on the way, payload content).
func syntaxError(b []byte) error {
	var raw json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// unquote appends the content of the JSON string literal raw to dst. When
// raw has no escapes, s aliases raw instead and simple is true. Text that is
// not valid UTF-8 (invalid bytes, an unpaired surrogate escape) stays
// invalid: each replacement character is written as the byte 0xFF, so that
// the rules of the field it ends in reject it, as they reject the bytes.
func unquote(dst, raw []byte) (out, s []byte, simple bool) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return dst, raw[1 : len(raw)-1], true
	}
	start := len(dst)
	out, err := jsontext.AppendUnquote(dst, raw)
	if err != nil {
		fixed := bytes.ReplaceAll(out[start:], []byte("\uFFFD"), []byte{0xFF})
		out = append(out[:start], fixed...)
	}
	return out, out[start:], false
}

// isASCII reports whether b is all ASCII.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// number is the decomposition of a JSON number literal into byte ranges of
// the input: [intS,intE) integer digits, [fracS,fracE) fraction digits
// (empty when absent), [expS,expE) exponent digits (empty when absent).
type number struct {
	neg          bool
	expNeg       bool
	intS, intE   int
	fracS, fracE int
	expS, expE   int
}

// isInteger reports whether the literal has neither fraction nor exponent.
func (n *number) isInteger() bool { return n.fracS == n.fracE && n.expS == n.expE }

// splitNumber decomposes b, which must be exactly one JSON number literal;
// ok is false otherwise.
func splitNumber(b []byte) (n number, ok bool) {
	i := 0
	digits := func() int {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(b) && b[i] == '-' {
		n.neg = true
		i++
	}
	n.intS = i
	switch {
	case i >= len(b):
		return n, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return n, false
	}
	n.intE = i
	n.fracS, n.fracE = i, i
	if i < len(b) && b[i] == '.' {
		i++
		n.fracS = i
		if digits() == 0 {
			return n, false
		}
		n.fracE = i
	}
	n.expS, n.expE = i, i
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			n.expNeg = b[i] == '-'
			i++
		}
		n.expS = i
		if digits() == 0 {
			return n, false
		}
		n.expE = i
	}
	return n, i == len(b)
}
