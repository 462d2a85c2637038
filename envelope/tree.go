package envelope

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// This file parses an adapted body (Decoder.Read) into the document its
// adapter's JMESPath expressions search, and writes values of that
// document back as JSON.
//
// The document holds what encoding/json would decode into an any —
// map[string]any, []any, string, bool, nil, float64 — with two
// differences that keep the envelope's strictness:
//
//   - a member name repeated in any object is an error (CodeInvalidJSON),
//     as it is in the envelope and its payload: which of the two values an
//     expression would see is not the producer's to leave open;
//   - a number is a float64 only when the float64 has the number's value
//     exactly (its shortest form has the same canonical form); any other
//     (12345678901234567890, 1e400, 1e-400) is a bigNumber holding its
//     canonical text, so that a key, an id or a payload taken from it is
//     never rounded. JMESPath's comparisons and arithmetic see such a
//     number as no number; an expression that takes it as a value gets it
//     exactly.
//
// Strings keep their bytes as unquote decodes them (invalid UTF-8 and
// unpaired surrogates included): the rules of the field they end in
// reject them, as the envelope's do.

// bigNumber is a number that no float64 holds exactly, in canonical form
// (the raw text when it has none: its exponent overflows int32).
type bigNumber string

// MarshalJSON writes the number (JMESPath's to_string marshals its value).
func (n bigNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// treeError is a body the document parser refuses: malformed JSON
// (syntax), or a repeated member name (path names it).
type treeError struct {
	syntax error
	path   []pathSeg // innermost first
}

// pathSeg is one step of a path into a document: a member or an index.
type pathSeg struct {
	name  string
	index int // -1 for a member
}

// field is the path of the repeated member: "detail.items[2].sku".
func (e *treeError) field() string {
	var s strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		switch seg := e.path[i]; {
		case seg.index >= 0:
			s.WriteString("[" + strconv.Itoa(seg.index) + "]")
		default:
			if s.Len() > 0 {
				s.WriteByte('.')
			}
			s.WriteString(seg.name)
		}
	}
	return s.String()
}

// parseTree parses b, exactly one JSON value with optional whitespace
// around it, into a document.
func parseTree(b []byte) (any, *treeError) {
	if !validJSON(b) {
		return nil, &treeError{syntax: syntaxError(b)}
	}
	var rd reader
	p := treeParser{d: rd.reset(b, lenient...)}
	return p.value()
}

// treeParser reads a document from valid JSON.
type treeParser struct {
	d       *jsontext.Decoder
	scratch []byte
}

func (p *treeParser) text() string {
	raw, _ := p.d.ReadValue()
	var s []byte
	p.scratch, s, _ = unquote(p.scratch[:0], raw)
	return string(s)
}

func (p *treeParser) value() (any, *treeError) {
	d := p.d
	switch d.PeekKind() {
	case '{':
		d.ReadToken()
		obj := map[string]any{}
		for d.PeekKind() != '}' {
			name := p.text()
			v, terr := p.value()
			if terr != nil {
				terr.path = append(terr.path, pathSeg{name: name, index: -1})
				return nil, terr
			}
			if _, dup := obj[name]; dup {
				return nil, &treeError{path: []pathSeg{{name: name, index: -1}}}
			}
			obj[name] = v
		}
		d.ReadToken()
		return obj, nil
	case '[':
		d.ReadToken()
		arr := []any{}
		for d.PeekKind() != ']' {
			v, terr := p.value()
			if terr != nil {
				terr.path = append(terr.path, pathSeg{index: len(arr)})
				return nil, terr
			}
			arr = append(arr, v)
		}
		d.ReadToken()
		return arr, nil
	case '"':
		return p.text(), nil
	case '0':
		raw, _ := d.ReadValue()
		return numberValue(raw), nil
	}
	switch tok, _ := d.ReadToken(); tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, &treeError{syntax: errors.New("invalid JSON")} // unreachable: b was validated
}

// numberValue is the document's value of the number b[start:end]: a
// float64 when one holds its value exactly, a bigNumber otherwise.
func numberValue(raw []byte) any {
	n, _ := splitNumber(raw)
	canon, ok, _ := appendNumberV2Form(nil, raw, &n, true)
	if !ok {
		return bigNumber(raw)
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
		if short, ok := canonicalNumber(strconv.AppendFloat(nil, f, 'g', -1, 64)); ok && short == string(canon) {
			return f
		}
	}
	return bigNumber(canon)
}

// canonicalNumber is the canonical text of the JSON number text (the form
// of the canonical payload: see CanonicalPayload), false when text is no
// number or its exponent overflows int32.
func canonicalNumber(text []byte) (string, bool) {
	n, ok := splitNumber(text)
	if !ok {
		return "", false
	}
	out, ok, _ := appendNumberV2Form(nil, text, &n, true)
	return string(out), ok
}

// numberText is the canonical text of a document number.
func numberText(v any) (string, bool) {
	switch n := v.(type) {
	case float64:
		if math.IsInf(n, 0) || math.IsNaN(n) {
			return "", false
		}
		return canonicalNumber(strconv.AppendFloat(nil, n, 'g', -1, 64))
	case bigNumber:
		return canonicalNumber([]byte(n))
	}
	return "", false
}

// jsonType is JMESPath's name of a document value's type.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, bigNumber:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "expression reference"
}

// appendTree appends v, a document value or what a JMESPath expression
// made of one, as JSON: members sorted, strings escaped as the canonical
// form escapes them. A string that is not valid UTF-8, a number without
// a canonical form or a value that is no JSON is reported (reason). Its
// depth is the document's, which the parser bounds; the payload's own
// limit is the canonical form's (RequestHash).
func appendTree(dst []byte, v any) ([]byte, string) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), ""
	case bool:
		return strconv.AppendBool(dst, x), ""
	case float64, bigNumber:
		s, ok := numberText(x)
		if !ok {
			return dst, "payload number exponent overflows int32"
		}
		return append(dst, s...), ""
	case string:
		if !utf8.ValidString(x) {
			return dst, "payload string is not valid UTF-8 or has an unpaired surrogate escape"
		}
		return appendString(dst, x), ""
	case []any:
		dst = append(dst, '[')
		for k, e := range x {
			if k > 0 {
				dst = append(dst, ',')
			}
			var reason string
			if dst, reason = appendTree(dst, e); reason != "" {
				return dst, reason
			}
		}
		return append(dst, ']'), ""
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if !utf8.ValidString(k) {
				return dst, "payload string is not valid UTF-8 or has an unpaired surrogate escape"
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for k, name := range keys {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, name)
			dst = append(dst, ':')
			var reason string
			if dst, reason = appendTree(dst, x[name]); reason != "" {
				return dst, reason
			}
		}
		return append(dst, '}'), ""
	}
	return dst, "the payload expression yields an " + jsonType(v) + ", not JSON"
}
