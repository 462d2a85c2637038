package envelope

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	p := treeParser{b: b}
	i := skipWS(b, 0)
	v, i, err := p.value(i, 0)
	if err != nil {
		return nil, err
	}
	if i = skipWS(b, i); i != len(b) {
		return nil, &treeError{syntax: errChar(b, i, "after top-level value")}
	}
	return v, nil
}

type treeParser struct {
	b       []byte
	scratch []byte
}

func (p *treeParser) value(i, depth int) (any, int, *treeError) {
	b := p.b
	if i >= len(b) {
		return nil, i, &treeError{syntax: errEOF(i)}
	}
	switch c := b[i]; c {
	case '{':
		if depth+1 > maxSyntaxDepth {
			return nil, i, &treeError{syntax: &syntaxError{msg: "exceeded max depth", off: i}}
		}
		obj := map[string]any{}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return obj, i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, i, &treeError{syntax: errChar(b, i, "looking for beginning of object key string")}
			}
			p.scratch = p.scratch[:0]
			end, key, _, _, err := unquote(b, i, &p.scratch)
			if err != nil {
				return nil, end, &treeError{syntax: err}
			}
			name := string(key)
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return nil, i, &treeError{syntax: errChar(b, i, "after object key")}
			}
			v, next, terr := p.value(skipWS(b, i+1), depth+1)
			if terr != nil {
				if terr.syntax == nil {
					terr.path = append(terr.path, pathSeg{name: name, index: -1})
				}
				return nil, next, terr
			}
			if _, dup := obj[name]; dup {
				// Reported after the value is known to be valid JSON: malformed
				// JSON later in the body is the more fundamental problem.
				if _, err := skipValue(b, skipWS(b, 0), 0); err != nil {
					return nil, next, &treeError{syntax: err}
				}
				return nil, next, &treeError{path: []pathSeg{{name: name, index: -1}}}
			}
			obj[name] = v
			i = skipWS(b, next)
			if i >= len(b) {
				return nil, i, &treeError{syntax: errEOF(i)}
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case '}':
				return obj, i + 1, nil
			default:
				return nil, i, &treeError{syntax: errChar(b, i, "after object key:value pair")}
			}
		}
	case '[':
		if depth+1 > maxSyntaxDepth {
			return nil, i, &treeError{syntax: &syntaxError{msg: "exceeded max depth", off: i}}
		}
		arr := []any{}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return arr, i + 1, nil
		}
		for {
			v, next, terr := p.value(i, depth+1)
			if terr != nil {
				if terr.syntax == nil {
					terr.path = append(terr.path, pathSeg{index: len(arr)})
				}
				return nil, next, terr
			}
			arr = append(arr, v)
			i = skipWS(b, next)
			if i >= len(b) {
				return nil, i, &treeError{syntax: errEOF(i)}
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case ']':
				return arr, i + 1, nil
			default:
				return nil, i, &treeError{syntax: errChar(b, i, "after array element")}
			}
		}
	case '"':
		p.scratch = p.scratch[:0]
		end, s, _, _, err := unquote(b, i, &p.scratch)
		if err != nil {
			return nil, end, &treeError{syntax: err}
		}
		return string(s), end, nil
	case 't', 'f', 'n':
		lit, v := "null", any(nil)
		switch c {
		case 't':
			lit, v = "true", true
		case 'f':
			lit, v = "false", false
		}
		end, err := skipLiteral(b, i, lit)
		if err != nil {
			return nil, end, &treeError{syntax: err}
		}
		return v, end, nil
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, n, err := scanNumber(b, i)
			if err != nil {
				return nil, end, &treeError{syntax: err}
			}
			return numberValue(b, i, end, &n), end, nil
		}
		return nil, i, &treeError{syntax: errChar(b, i, "looking for beginning of value")}
	}
}

// numberValue is the document's value of the number b[start:end]: a
// float64 when one holds its value exactly, a bigNumber otherwise.
func numberValue(b []byte, start, end int, n *number) any {
	canon, ok, _ := appendNumberV2Form(nil, b, n, true)
	if !ok {
		return bigNumber(b[start:end])
	}
	if f, err := strconv.ParseFloat(string(b[start:end]), 64); err == nil {
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
	end, n, err := scanNumber(text, 0)
	if err != nil || end != len(text) {
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
