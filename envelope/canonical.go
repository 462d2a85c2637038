package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// MaxPayloadDepth is the deepest nesting of arrays and objects accepted in a
// payload. The payload value itself is at depth 0, so a payload object whose
// members are scalars has depth 1.
const MaxPayloadDepth = 128

// member is one object member while its object is being canonicalized:
// key is the decoded key, [start,end) the member's canonical `"key":value`
// bytes in canon.out.
type member struct {
	key        []byte
	start, end int
}

// canon is the reusable state of one canonicalization. It is pooled.
type canon struct {
	out     []byte   // canonical document being built
	tmp     []byte   // scratch for reordering object members
	keys    []byte   // arena for decoded object keys that had escapes
	str     []byte   // scratch for decoded string values
	members []member // stack of members of all open objects
	text    textArena
}

var canonPool = sync.Pool{New: func() any { return new(canon) }}

// maxPooledBytes stops unusually large buffers from being kept alive by
// the pool.
const maxPooledBytes = 4 << 20

func getCanon() *canon { return canonPool.Get().(*canon) }

func putCanon(c *canon) {
	if cap(c.out) > maxPooledBytes || cap(c.tmp) > maxPooledBytes ||
		cap(c.keys) > maxPooledBytes || cap(c.str) > maxPooledBytes ||
		cap(c.text.buf) > maxPooledBytes {
		return
	}
	clear(c.text.dsts)
	c.text.reset()
	clear(c.members[:cap(c.members)]) // drop key slices that alias caller memory
	c.members = c.members[:0]
	canonPool.Put(c)
}

// canonError is a payload that cannot be canonicalized.
type canonError struct {
	reason string
	err    error // *syntaxError for malformed JSON
}

// RequestHash returns the canonical request hash of e: the lowercase hex
// SHA-256 of the canonical JSON encoding of
//
//	{"aggregateId":…,"aggregateType":…,"messageType":…,"payload":…,"schemaVersion":…}
//
// Only these fields identify the requested work. messageId, occurredAt,
// producer, idempotencyKey, causationId, correlationId and attemptPolicy are
// deliberately excluded because they change when a producer re-sends the
// same work.
//
// The canonical encoding is:
//
//   - no insignificant whitespace;
//   - object members sorted by the bytes of their decoded (unescaped) UTF-8
//     keys; duplicate keys are rejected;
//   - strings escaped exactly as encoding/json does with SetEscapeHTML(false):
//     \" \\ \b \f \n \r \t, other control characters as \u00xx (lowercase
//     hex), U+2028 and U+2029 as \u2028 and \u2029, everything else literal;
//     payload strings must be valid UTF-8 without unpaired surrogate escapes;
//   - true, false and null as themselves;
//   - numbers in a value-exact form computed from the decimal text without
//     floating point: with the value written as ±D×10^E where D is a digit
//     string without leading or trailing zeros, the form is "D" when E is 0
//     and "DeE" otherwise ("-" prefix when negative; E in decimal with a "-"
//     when negative and no "+"). Zero (including -0, 0.0, 0e5) is "0". So 1,
//     1.0, 1e0, 10e-1 and 1.00 are all "1"; 100 is "1e2"; 0.25 is "25e-2".
//     Exponents, as written or after normalization, must fit in an int32.
//
// RequestHash validates only the payload; the string fields are hashed as
// they are (invalid UTF-8 would be hashed as U+FFFD), so call it on
// envelopes that Decode returned or that Encode accepts.
//
// Payloads nested deeper than MaxPayloadDepth are rejected. A null, empty or
// malformed payload is an error. Every error is a *Error with Code
// CodeInvalidField (CodeMissingField for an empty payload) and Field
// "payload", except a nil e which is CodeInvalidJSON.
func RequestHash(e *Envelope) (string, error) {
	if e == nil {
		return "", &Error{Code: CodeInvalidJSON, Reason: "nil envelope"}
	}
	h, err := requestHash(e)
	if err != nil {
		return "", err
	}
	return h, nil
}

// requestHash is RequestHash returning a concrete *Error.
func requestHash(e *Envelope) (string, *Error) {
	if len(e.Payload) == 0 && e.PayloadRef == nil {
		return "", &Error{Code: CodeMissingField, Field: "payload", Reason: "required field is missing"}
	}
	c := getCanon()
	defer putCanon(c)
	out := append(c.out[:0], `{"aggregateId":`...)
	out = appendString(out, e.AggregateID)
	out = append(out, `,"aggregateType":`...)
	out = appendString(out, e.AggregateType)
	out = append(out, `,"messageType":`...)
	out = appendString(out, e.MessageType)
	if r := e.PayloadRef; r != nil {
		out = appendRef(out, r)
	} else {
		out = append(out, `,"payload":`...)
		c.out = out
		if ce := c.payload(e.Payload); ce != nil {
			return "", &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
		}
		out = c.out
	}
	out = append(out, `,"schemaVersion":`...)
	out = strconv.AppendInt(out, int64(e.SchemaVersion), 10)
	out = append(out, '}')
	c.out = out
	sum := sha256.Sum256(out)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]), nil
}

// appendRef appends the canonical form of a payloadRef member: its content
// identity only. Bucket, key and version say where a copy lives; a re-send
// that uploads the same bytes elsewhere is the same work.
func appendRef(out []byte, r *PayloadRef) []byte {
	out = append(out, `,"payloadRef":{"sha256":`...)
	out = appendString(out, r.SHA256)
	out = append(out, `,"size":`...)
	out = strconv.AppendInt(out, r.Size, 10)
	return append(out, '}')
}

// payload appends the canonical form of the JSON document p to c.out.
func (c *canon) payload(p []byte) *canonError {
	c.keys = c.keys[:0]
	c.members = c.members[:0]
	i := skipWS(p, 0)
	isNull := i < len(p) && p[i] == 'n'
	i, ce := c.value(p, i, 0)
	if ce != nil {
		if ce.err == nil {
			// The walk stops at the first problem. Malformed JSON is the more
			// fundamental one, so report it even when it comes later.
			end, err := skipValue(p, skipWS(p, 0), 0)
			if err == nil && skipWS(p, end) != len(p) {
				err = errChar(p, skipWS(p, end), "after top-level value")
			}
			if err != nil {
				return syntaxCanonError(err)
			}
		}
		return ce
	}
	if i = skipWS(p, i); i != len(p) {
		return syntaxCanonError(errChar(p, i, "after top-level value"))
	}
	if isNull {
		return &canonError{reason: "payload must not be null"}
	}
	return nil
}

func syntaxCanonError(err error) *canonError {
	return &canonError{reason: "payload is not valid JSON", err: err}
}

// value canonicalizes the value at p[i], appending to c.out, and returns the
// index just past it. depth counts the arrays/objects enclosing it.
func (c *canon) value(p []byte, i, depth int) (int, *canonError) {
	if i >= len(p) {
		return i, syntaxCanonError(errEOF(i))
	}
	switch ch := p[i]; ch {
	case '{':
		return c.object(p, i, depth+1)
	case '[':
		if depth+1 > MaxPayloadDepth {
			return i, &canonError{reason: "payload nesting exceeds " + strconv.Itoa(MaxPayloadDepth) + " levels"}
		}
		c.out = append(c.out, '[')
		i = skipWS(p, i+1)
		if i < len(p) && p[i] == ']' {
			c.out = append(c.out, ']')
			return i + 1, nil
		}
		for {
			var ce *canonError
			if i, ce = c.value(p, i, depth+1); ce != nil {
				return i, ce
			}
			i = skipWS(p, i)
			if i >= len(p) {
				return i, syntaxCanonError(errEOF(i))
			}
			switch p[i] {
			case ',':
				c.out = append(c.out, ',')
				i = skipWS(p, i+1)
			case ']':
				c.out = append(c.out, ']')
				return i + 1, nil
			default:
				return i, syntaxCanonError(errChar(p, i, "after array element"))
			}
		}
	case '"':
		c.str = c.str[:0]
		end, s, simple, ascii, err := unquote(p, i, &c.str)
		if err != nil {
			return end, syntaxCanonError(err)
		}
		if simple && ascii {
			// No escapes and pure ASCII: the input bytes are already canonical.
			c.out = append(c.out, p[i:end]...)
			return end, nil
		}
		if !utf8.Valid(s) {
			return end, &canonError{reason: "payload string is not valid UTF-8 or has an unpaired surrogate escape"}
		}
		c.out = appendString(c.out, s)
		return end, nil
	case 't':
		return c.literal(p, i, "true")
	case 'f':
		return c.literal(p, i, "false")
	case 'n':
		return c.literal(p, i, "null")
	default:
		if ch == '-' || (ch >= '0' && ch <= '9') {
			end, n, err := scanNumber(p, i)
			if err != nil {
				return end, syntaxCanonError(err)
			}
			var ok bool
			if c.out, ok = appendNumber(c.out, p, &n); !ok {
				return end, &canonError{reason: "payload number exponent overflows int32"}
			}
			return end, nil
		}
		return i, syntaxCanonError(errChar(p, i, "looking for beginning of value"))
	}
}

func (c *canon) literal(p []byte, i int, lit string) (int, *canonError) {
	end, err := skipLiteral(p, i, lit)
	if err != nil {
		return end, syntaxCanonError(err)
	}
	c.out = append(c.out, lit...)
	return end, nil
}

// object canonicalizes the object at p[i] == '{'. Members are written in
// input order, then reordered in place if their keys were not sorted.
func (c *canon) object(p []byte, i, depth int) (int, *canonError) {
	if depth > MaxPayloadDepth {
		return i, &canonError{reason: "payload nesting exceeds " + strconv.Itoa(MaxPayloadDepth) + " levels"}
	}
	c.out = append(c.out, '{')
	region := len(c.out)
	base := len(c.members)
	i = skipWS(p, i+1)
	if i < len(p) && p[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	for {
		if i >= len(p) || p[i] != '"' {
			return i, syntaxCanonError(errChar(p, i, "looking for beginning of object key string"))
		}
		end, key, simple, ascii, err := unquote(p, i, &c.keys)
		if err != nil {
			return end, syntaxCanonError(err)
		}
		start := len(c.out)
		if simple && ascii {
			c.out = append(c.out, p[i:end]...)
		} else {
			if !utf8.Valid(key) {
				return end, &canonError{reason: "payload object key is not valid UTF-8 or has an unpaired surrogate escape"}
			}
			c.out = appendString(c.out, key)
		}
		i = skipWS(p, end)
		if i >= len(p) || p[i] != ':' {
			return i, syntaxCanonError(errChar(p, i, "after object key"))
		}
		c.out = append(c.out, ':')
		var ce *canonError
		if i, ce = c.value(p, skipWS(p, i+1), depth); ce != nil {
			return i, ce
		}
		c.members = append(c.members, member{key: key, start: start, end: len(c.out)})
		i = skipWS(p, i)
		if i >= len(p) {
			return i, syntaxCanonError(errEOF(i))
		}
		if p[i] == '}' {
			i++
			break
		}
		if p[i] != ',' {
			return i, syntaxCanonError(errChar(p, i, "after object key:value pair"))
		}
		c.out = append(c.out, ',')
		i = skipWS(p, i+1)
	}
	ms := c.members[base:]
	sorted := true
	for k := 1; k < len(ms); k++ {
		switch bytes.Compare(ms[k-1].key, ms[k].key) {
		case 0:
			return i, dupKeyError()
		case 1:
			sorted = false
		}
	}
	if !sorted {
		sortMembers(ms)
		for k := 1; k < len(ms); k++ {
			if bytes.Equal(ms[k-1].key, ms[k].key) {
				return i, dupKeyError()
			}
		}
		c.tmp = append(c.tmp[:0], c.out[region:]...)
		c.out = c.out[:region]
		for k, m := range ms {
			if k > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.tmp[m.start-region:m.end-region]...)
		}
	}
	c.members = c.members[:base]
	c.out = append(c.out, '}')
	return i, nil
}

// sortMembers sorts by key. Objects are usually small, where a plain
// insertion sort beats the generic sort's indirect comparisons.
func sortMembers(ms []member) {
	if len(ms) > 16 {
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
		return
	}
	for k := 1; k < len(ms); k++ {
		for j := k; j > 0 && bytes.Compare(ms[j-1].key, ms[j].key) > 0; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

func dupKeyError() *canonError {
	return &canonError{reason: "payload object has a duplicate key"}
}

// appendNumber appends the canonical form of the number n (ranges into p).
// It reports false if an exponent overflows int32. It never allocates in
// proportion to the exponent's value.
func appendNumber(dst, p []byte, n *number) ([]byte, bool) {
	exp, ok := parseExp(p[n.expS:n.expE], n.expNeg)
	if !ok {
		return dst, false
	}
	ints, frac := p[n.intS:n.intE], p[n.fracS:n.fracE]
	total := len(ints) + len(frac)
	digit := func(k int) byte {
		if k < len(ints) {
			return ints[k]
		}
		return frac[k-len(ints)]
	}
	first := 0
	for first < total && digit(first) == '0' {
		first++
	}
	if first == total {
		return append(dst, '0'), true
	}
	last := total - 1
	for digit(last) == '0' {
		last--
	}
	e := exp - int64(len(frac)) + int64(total-1-last)
	if e < -1<<31 || e > 1<<31-1 {
		return dst, false
	}
	if n.neg {
		dst = append(dst, '-')
	}
	// Digits first..last, which may straddle the integer and fraction parts.
	if first < len(ints) {
		dst = append(dst, ints[first:min(last+1, len(ints))]...)
	}
	if last >= len(ints) {
		dst = append(dst, frac[max(first-len(ints), 0):last+1-len(ints)]...)
	}
	if e != 0 {
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, e, 10)
	}
	return dst, true
}

// parseExp parses exponent digits, reporting false if the value overflows
// int32.
func parseExp(d []byte, neg bool) (int64, bool) {
	for len(d) > 0 && d[0] == '0' {
		d = d[1:]
	}
	if len(d) > 10 {
		return 0, false
	}
	var v int64
	for _, c := range d {
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return v, true
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped exactly like
// encoding/json with SetEscapeHTML(false). Invalid UTF-8 becomes \ufffd.
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
