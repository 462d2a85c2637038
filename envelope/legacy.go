package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// This file keeps the canonical forms of hash versions 1 and 2 for as long
// as records written with them can live: a redelivery of work a record
// was written for is hashed in the record's version (Envelope.HashLike).
// They are never written any more. Their texts differ from HashV3's in
// escaping (encoding/json's: U+2028 and U+2029 escaped), member order (by
// UTF-8 bytes) and number forms. HashV2's text is HashV3's wherever those
// do not occur (v2SameAsV3, almost every payload): there it is taken from
// HashV3's; otherwise, and for HashV1, the payload is walked on jsontext's
// tokens, after HashV3's canonicalization validated it (it accepts exactly
// what they accept).

// legacy is the reusable state of a HashV1 or HashV2 canonicalization.
type legacy struct {
	keys    []byte   // arena for decoded object names that had escapes
	members []member // stack of members of all open objects
	tmp     []byte   // scratch for reordering object members
}

// member is one object member while its object is being canonicalized:
// key is the decoded name, [start,end) the member's canonical `"key":value`
// bytes in the output.
type member struct {
	key        []byte
	start, end int
}

func (l *legacy) large() bool {
	return cap(l.keys) > maxPooledBytes || cap(l.tmp) > maxPooledBytes
}

func (l *legacy) reset() {
	clear(l.members[:cap(l.members)]) // drop key slices that alias caller memory
	l.members = l.members[:0]
	l.keys = l.keys[:0]
}

// requestHashLegacy is e's hash in HashV1 or HashV2. Workers before hash
// versioning already hashed a payloadRef as HashV2 does (its sha256 and
// size in place of the payload).
func requestHashLegacy(e *Envelope, v HashVersion) (string, *Error) {
	if len(e.Payload) == 0 && e.PayloadRef == nil {
		return "", &Error{Code: CodeMissingField, Field: "payload", Reason: "required field is missing"}
	}
	c := getCanon()
	defer putCanon(c)
	v2 := v == HashV2
	if v2 || e.PayloadRef == nil && !e.hasCanonical() {
		// Validate as the current form does (Decode did, for its own
		// envelopes), and for HashV2 use its text where it is V2's.
		if _, err := c.documentV3(e, false); err != nil {
			return "", err
		}
		if v2 && v2SameAsV3(c.out) {
			sum := sha256.Sum256(c.out)
			return "v2:" + hex.EncodeToString(sum[:]), nil
		}
	}
	out := append(c.out[:0], `{"aggregateId":`...)
	out = appendString(out, e.AggregateID)
	out = append(out, `,"aggregateType":`...)
	out = appendString(out, e.AggregateType)
	if av := e.AggregateVersion; av != nil && v2 {
		out = append(out, `,"aggregateVersion":`...)
		out = strconv.AppendInt(out, *av, 10)
	}
	out = append(out, `,"messageType":`...)
	out = appendString(out, e.MessageType)
	if r := e.PayloadRef; r != nil {
		out = append(out, `,"payloadRef":{"sha256":`...)
		out = appendString(out, r.SHA256)
		out = append(out, `,"size":`...)
		out = strconv.AppendInt(out, r.Size, 10)
		out = append(out, '}')
	} else {
		out = append(out, `,"payload":`...)
		var ok bool
		if out, ok = c.old.value(out, c.rd.reset(e.Payload), v2); !ok {
			return "", &Error{Code: CodeInvalidField, Field: "payload", Reason: "payload cannot be canonicalized"}
		}
	}
	out = append(out, `,"schemaVersion":`...)
	out = strconv.AppendInt(out, int64(e.SchemaVersion), 10)
	out = append(out, '}')
	c.out = out
	sum := sha256.Sum256(out)
	if !v2 {
		return hex.EncodeToString(sum[:]), nil
	}
	return "v2:" + hex.EncodeToString(sum[:]), nil
}

// v2SameAsV3 reports whether t, a HashV3 canonical text, is also the HashV2
// text of its document (see RequestHash): no U+2028 or U+2029 (V2 escapes
// them); not both characters from U+E000 and characters above U+FFFF (V2
// orders names by UTF-8, V3 by UTF-16: they order those two differently);
// no number in an exponent form, and no integer of more than 21 digits
// ending in 0 (V2 writes both as DeE).
func v2SameAsV3(t []byte) bool {
	if bytes.Contains(t, []byte("\u2028")) || bytes.Contains(t, []byte("\u2029")) {
		return false
	}
	high := bytes.IndexByte(t, 0xEE) >= 0 || bytes.IndexByte(t, 0xEF) >= 0
	if high && bytes.IndexFunc(t, func(r rune) bool { return r > 0xFFFF }) >= 0 {
		return false
	}
	for i := 0; i < len(t); {
		switch ch := t[i]; {
		case ch == '"':
			for i++; t[i] != '"'; i++ {
				if t[i] == '\\' {
					i++
				}
			}
			i++
		case ch == '-' || ch >= '0' && ch <= '9':
			end, point := i+1, false
			for ; end < len(t) && strings.IndexByte("0123456789.e+-", t[end]) >= 0; end++ {
				if t[end] == 'e' {
					return false
				}
				point = point || t[end] == '.'
			}
			if n := t[i:end]; !point && len(bytes.TrimPrefix(n, []byte("-"))) > maxPlainIntDigits && n[len(n)-1] == '0' {
				return false
			}
			i = end
		default:
			i++
		}
	}
	return true
}

// value appends the legacy canonical form of the next value of d, a
// payload already validated; false if it is not valid after all (its
// bytes were changed in place since) or a number's exponent overflows.
func (l *legacy) value(out []byte, d *jsontext.Decoder, v2 bool) ([]byte, bool) {
	switch d.PeekKind() {
	case 0, '}', ']':
		return out, false
	case '{':
		d.ReadToken()
		out = append(out, '{')
		region, base := len(out), len(l.members)
		for d.PeekKind() != '}' {
			if len(l.members) > base {
				out = append(out, ',')
			}
			raw, err := d.ReadValue()
			if err != nil {
				return out, false
			}
			var key []byte
			l.keys, key, _ = unquote(l.keys, raw)
			start := len(out)
			out = appendString(out, key)
			out = append(out, ':')
			var ok bool
			if out, ok = l.value(out, d, v2); !ok {
				return out, false
			}
			l.members = append(l.members, member{key: key, start: start, end: len(out)})
		}
		d.ReadToken()
		ms := l.members[base:]
		if !slices.IsSortedFunc(ms, compareMembers) {
			slices.SortFunc(ms, compareMembers)
			l.tmp = append(l.tmp[:0], out[region:]...)
			out = out[:region]
			for k, m := range ms {
				if k > 0 {
					out = append(out, ',')
				}
				out = append(out, l.tmp[m.start-region:m.end-region]...)
			}
		}
		l.members = l.members[:base]
		return append(out, '}'), true
	case '[':
		d.ReadToken()
		out = append(out, '[')
		for first := true; d.PeekKind() != ']'; first = false {
			if !first {
				out = append(out, ',')
			}
			var ok bool
			if out, ok = l.value(out, d, v2); !ok {
				return out, false
			}
		}
		d.ReadToken()
		return append(out, ']'), true
	case '"':
		raw, _ := d.ReadValue()
		var s []byte
		var simple bool
		l.keys, s, simple = unquote(l.keys, raw)
		if simple && isASCII(s) {
			return append(out, raw...), true // already canonical
		}
		return appendString(out, s), true
	case '0':
		raw, _ := d.ReadValue()
		n, _ := splitNumber(raw)
		if v2 {
			out, ok, _ := appendNumberV2Form(out, raw, &n, false)
			return out, ok
		}
		return appendNumber(out, raw, &n)
	default:
		raw, _ := d.ReadValue()
		return append(out, raw...), true
	}
}

func compareMembers(a, b member) int { return bytes.Compare(a.key, b.key) }

// appendNumber appends the HashV1 form of the number n (ranges into p).
// It reports false if an exponent overflows int32. It never allocates in
// proportion to the exponent's value.
func appendNumber(dst, p []byte, n *number) ([]byte, bool) {
	s, zero, ok := significant(p, n)
	switch {
	case !ok:
		return dst, false
	case zero:
		return append(dst, '0'), true
	}
	if n.neg {
		dst = append(dst, '-')
	}
	dst = s.appendDigits(dst, 0, s.last-s.first+1)
	if s.e != 0 {
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, s.e, 10)
	}
	return dst, true
}

// appendNumberV2 appends n in HashV2's form.
func appendNumberV2(dst, p []byte, n *number) ([]byte, bool) {
	dst, ok, _ := appendNumberV2Form(dst, p, n, false)
	return dst, ok
}

// appendNumberV2Form appends n in HashV2's hashed form, or with payload in
// the form of the canonical payload HashV2 handed to handlers, which
// differs in one way: an integral value of more than 21 digits whose digit
// string needs at most 21 zeros appended is written as a plain integer too
// (1e21 is "1000000000000000000000", not "1e21"). The payload form is also
// the text of a number an adapter's expression yields for a text field (a
// key, an aggregate id), which must not change between versions. differ
// reports that the two forms of n differ. Like appendNumber it never
// allocates in proportion to the exponent's value.
func appendNumberV2Form(dst, p []byte, n *number, payload bool) (out []byte, ok, differ bool) {
	if ints := p[n.intS:n.intE]; n.isInteger() && len(ints) <= maxPlainIntDigits {
		// The common case, a plain integer, is its own canonical form (JSON
		// allows no leading zeros, so only 0 and -0 need care).
		if ints[0] == '0' {
			return append(dst, '0'), true, false
		}
		if n.neg {
			dst = append(dst, '-')
		}
		return append(dst, ints...), true, false
	}
	sig, zero, ok := significant(p, n)
	switch {
	case !ok:
		return dst, false, false
	case zero:
		return append(dst, '0'), true, false
	}
	if n.neg {
		dst = append(dst, '-')
	}
	nd := sig.last - sig.first + 1
	e := sig.e
	k := int64(nd) + e // position of the decimal point within the digits
	wide := e >= 0 && k > maxPlainIntDigits && e <= maxPlainIntDigits
	switch {
	case e >= 0 && (k <= maxPlainIntDigits || payload && wide):
		dst = sig.appendDigits(dst, 0, nd)
		for range e {
			dst = append(dst, '0')
		}
	case e < 0 && k > 0:
		dst = sig.appendDigits(dst, 0, int(k))
		dst = append(dst, '.')
		dst = sig.appendDigits(dst, int(k), nd)
	case e < 0 && k > minPlainFracPoint:
		dst = append(dst, '0', '.')
		for range -k {
			dst = append(dst, '0')
		}
		dst = sig.appendDigits(dst, 0, nd)
	default:
		dst = sig.appendDigits(dst, 0, nd)
		if e != 0 {
			dst = append(dst, 'e')
			dst = strconv.AppendInt(dst, e, 10)
		}
	}
	return dst, true, wide
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped exactly like
// encoding/json with SetEscapeHTML(false) (HashV1 and HashV2). Invalid
// UTF-8 becomes \ufffd.
func appendString[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
