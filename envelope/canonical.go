package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxPayloadDepth is the deepest nesting of arrays and objects accepted in a
// payload. The payload value itself is at depth 0, so a payload object whose
// members are scalars has depth 1.
const MaxPayloadDepth = 128

// canon is the reusable state of one canonicalization or decode. It is
// pooled.
type canon struct {
	out  []byte // canonical document being built
	tmp  []byte // jsontext's formatting of a payload
	str  []byte // scratch for decoded strings
	rd   reader
	text textArena
	old  legacy // hash versions 1 and 2
}

var canonPool = sync.Pool{New: func() any { return new(canon) }}

// maxPooledBytes stops unusually large buffers from being kept alive by
// the pool.
const maxPooledBytes = 4 << 20

func getCanon() *canon { return canonPool.Get().(*canon) }

func putCanon(c *canon) {
	if cap(c.out) > maxPooledBytes || cap(c.tmp) > maxPooledBytes || cap(c.str) > maxPooledBytes ||
		cap(c.text.buf) > maxPooledBytes || c.old.large() {
		return
	}
	clear(c.text.dsts)
	c.text.reset()
	c.old.reset()
	c.rd.reset(nil) // drop the input
	canonPool.Put(c)
}

// canonError is a payload that cannot be canonicalized.
type canonError struct {
	reason string
	err    error // *json.SyntaxError for malformed JSON
}

// HashVersion names a canonical form of the request hash. A stored hash
// says which form produced it (HashVersionOf), so the canonical form can
// change without every record written before the change turning into a
// false IDEMPOTENCY_HASH_MISMATCH: compare like with like (Envelope.HashLike).
type HashVersion int

// Hash versions.
const (
	// HashV1 is the original form: lowercase hex without a prefix, over
	// aggregateId, aggregateType, messageType, payload and schemaVersion,
	// numbers as ±DeE (100 is "1e2"). It omits aggregateVersion.
	HashV1 HashVersion = 1
	// HashV2 is written "v2:<hex>". It adds aggregateVersion (when present;
	// absent and 0 differ) and writes numbers so that the canonical payload
	// decodes as its value reads: integral values up to 21 digits as plain
	// integers (1234.0 is "1234"), other values of moderate magnitude as
	// plain decimals (19.990 is "19.99"). Strings are escaped as
	// encoding/json escapes them, members sorted by UTF-8 bytes.
	HashV2 HashVersion = 2
	// HashV3 is written "v3:<hex>": the fields of HashV2 in JSON text
	// formatted by jsontext as RFC 8785 (JCS) formats it — members sorted
	// by UTF-16 code units, strings in their minimal escaping — except
	// numbers, which keep their exact value (see RequestHash): integers
	// are never rounded to a float64, so integers above 2^53 stay distinct.
	// Identical to HashV2 wherever the two agree: see RequestHash.
	HashV3 HashVersion = 3
	// CurrentHashVersion is the form Decode and RequestHash produce.
	CurrentHashVersion = HashV3
)

// String returns "v1", "v2", ...
func (v HashVersion) String() string { return "v" + strconv.Itoa(int(v)) }

// ErrUnknownHashVersion is returned for a stored hash whose form this
// package does not implement (written by a newer worker).
var ErrUnknownHashVersion = errors.New("envelope: unknown request hash version")

// HashVersionOf returns the canonical form that produced a stored request
// hash: "vN:<hex>" is version N, 64 hex digits without a prefix are
// HashV1. ok is false for anything else, including versions this package
// does not implement.
func HashVersionOf(stored string) (v HashVersion, ok bool) {
	if len(stored) == 2*sha256.Size && isSHA256Hex(stored) {
		return HashV1, true
	}
	for _, v := range [...]HashVersion{HashV2, HashV3} {
		if p := v.String() + ":"; strings.HasPrefix(stored, p) && isSHA256Hex(stored[len(p):]) {
			return v, true
		}
	}
	return 0, false
}

// RequestHash returns the canonical request hash of e in the current
// version (CurrentHashVersion): "v3:" followed by the lowercase hex SHA-256
// of the canonical JSON text of
//
//	{"aggregateId":…,"aggregateType":…,"aggregateVersion":…,"messageType":…,"payload":…,"schemaVersion":…}
//
// with "aggregateVersion" only when present, and "payloadRef":{"sha256":…,"size":…}
// in place of "payload" when the payload is stored by reference (the
// content identity: where a copy lives is not part of the work).
//
// Only these fields identify the requested work. messageId, occurredAt,
// producer, idempotencyKey, causationId, correlationId and attemptPolicy are
// deliberately excluded because they change when a producer re-sends the
// same work.
//
// The canonical text is jsontext's formatting with RFC 8785's rules for
// structure and strings:
//
//   - no insignificant whitespace;
//   - object members sorted by the UTF-16 code units of their decoded
//     names; a repeated name is rejected;
//   - strings in their minimal form: \" \\ \b \f \n \r \t, other control
//     characters as \u00xx (lowercase hex), everything else literal;
//     payload strings must be valid UTF-8 without unpaired surrogate
//     escapes;
//   - true, false and null as themselves;
//   - numbers by their exact decimal value, never through a float64. With
//     the value written as ±D×10^E, D a digit string of n digits without
//     leading or trailing zeros, and k = n+E the position of the decimal
//     point: zero (including -0, 0.0, 0e5) is "0"; an integral value (E ≥
//     0) is D followed by E zeros when k ≤ 21 or E ≤ 21 (1234.0, 1.2340e3
//     and 1234 are all "1234"; an integer literal of any length is itself);
//     when E < 0 and k > 0, D with a point after k digits (19.990 is
//     "19.99"); when E < 0 and -6 < k ≤ 0, "0." then -k zeros then D (0.25
//     is "0.25", 1e-6 is "0.000001"); otherwise RFC 8785's exponent form:
//     the first digit, "." and the rest when n > 1, "e", the sign and k-1
//     (1e30 is "1e+30", 1.5e-7 is "1.5e-7"). A "-" prefix when negative.
//     Exponents, as written or after normalization, must fit in an int32.
//     So a number that is the shortest form of a float64 is written as RFC
//     8785 writes it (except integral values from 1e21 with at most 21
//     trailing zeros, written in full), and no two values share a form.
//
// HashV2's text is the same bytes wherever neither differs: no number
// in an exponent form (|x| < 1e21 and ≥ 1e-6, and integral values of
// at most 21 digits), no U+2028 or U+2029 (HashV2 escapes them), and no
// member names that sort differently by UTF-16 than by UTF-8 (characters
// from U+E000 beside ones above U+FFFF).
//
// The canonical payload of work that hashes the same is the same bytes,
// and decodes the same: an integral value decodes into an integer type
// however it was written. Envelope.CanonicalPayload returns those bytes.
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
	return RequestHashVersion(e, CurrentHashVersion)
}

// RequestHashVersion is RequestHash in canonical form v. HashV1 and
// HashV2 are the forms records written by older workers carry.
func RequestHashVersion(e *Envelope, v HashVersion) (string, error) {
	if e == nil {
		return "", &Error{Code: CodeInvalidJSON, Reason: "nil envelope"}
	}
	var h string
	var err *Error
	switch v {
	case HashV1, HashV2:
		h, err = requestHashLegacy(e, v)
	case HashV3:
		h, _, err = requestHashV3(e, false)
	default:
		return "", fmt.Errorf("%w: %v", ErrUnknownHashVersion, v)
	}
	if err != nil {
		return "", err
	}
	return h, nil
}

// HashLike returns e's request hash in the canonical form that produced
// stored (a record's requestHash), so that the two compare like with like:
// the same work gives stored itself. A record written by an older worker
// (HashV1, HashV2) is compared with e's hash in that version. An
// unrecognized stored hash is ErrUnknownHashVersion.
func (e *Envelope) HashLike(stored string) (string, error) {
	v, ok := HashVersionOf(stored)
	if !ok {
		return "", fmt.Errorf("%w: %.8q", ErrUnknownHashVersion, stored)
	}
	// e.RequestHash is in the version its decoder writes (Config.HashVersion).
	if have, ok := HashVersionOf(e.RequestHash); ok && have == v {
		return e.RequestHash, nil
	}
	return RequestHashVersion(e, v)
}

// CanonicalPayload returns the payload in the canonical form the request
// hash covers (see RequestHash): sorted members, no insignificant
// whitespace, numbers by value. Envelopes that hash the same have the same
// canonical payload byte for byte, so decoding it (as ddbworker.JSON does)
// gives the same value for every copy of the work. Decode and
// ResolvePayload compute it once; for other envelopes, or after Payload
// was replaced, it is computed on each call. An envelope without a payload
// (a payloadRef not yet resolved) is CodeMissingField "payload". The
// result must not be modified.
func (e *Envelope) CanonicalPayload() (json.RawMessage, error) {
	if e.hasCanonical() {
		return e.canonical, nil
	}
	if len(e.Payload) == 0 {
		return nil, &Error{Code: CodeMissingField, Field: "payload", Reason: "no payload (a payloadRef is resolved by the worker)"}
	}
	c := getCanon()
	defer putCanon(c)
	c.out = c.out[:0]
	if ce := c.payload(e.Payload); ce != nil {
		return nil, &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
	}
	return json.RawMessage(bytes.Clone(c.out)), nil
}

// hasCanonical reports whether e holds the canonical payload of its
// Payload: Decode (or ResolvePayload) validated it and the caller has not
// replaced it since.
func (e *Envelope) hasCanonical() bool {
	return len(e.canonical) > 0 && len(e.Payload) == len(e.canonicalOf) && len(e.Payload) > 0 && &e.Payload[0] == &e.canonicalOf[0]
}

// setCanonical stores e's canonical payload for CanonicalPayload.
func (e *Envelope) setCanonical(canonical []byte) {
	e.canonical, e.canonicalOf = canonical, e.Payload
}

// requestHashV3 is the HashV3 form. With keep it also returns a copy of
// the canonical payload (nil for a payloadRef).
func requestHashV3(e *Envelope, keep bool) (string, []byte, *Error) {
	c := getCanon()
	defer putCanon(c)
	canonical, err := c.documentV3(e, keep)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(c.out)
	var h [3 + 2*sha256.Size]byte
	copy(h[:], "v3:")
	hex.Encode(h[3:], sum[:])
	return string(h[:]), canonical, nil
}

// documentV3 leaves e's HashV3 canonical text in c.out. With keep it also
// returns a copy of the canonical payload (nil for a payloadRef).
func (c *canon) documentV3(e *Envelope, keep bool) ([]byte, *Error) {
	if len(e.Payload) == 0 && e.PayloadRef == nil {
		return nil, &Error{Code: CodeMissingField, Field: "payload", Reason: "required field is missing"}
	}
	out := append(c.out[:0], `{"aggregateId":`...)
	out, _ = jsontext.AppendQuote(out, e.AggregateID)
	out = append(out, `,"aggregateType":`...)
	out, _ = jsontext.AppendQuote(out, e.AggregateType)
	if v := e.AggregateVersion; v != nil {
		out = append(out, `,"aggregateVersion":`...)
		out = strconv.AppendInt(out, *v, 10)
	}
	out = append(out, `,"messageType":`...)
	out, _ = jsontext.AppendQuote(out, e.MessageType)
	var canonical []byte
	if r := e.PayloadRef; r != nil {
		out = append(out, `,"payloadRef":{"sha256":`...)
		out, _ = jsontext.AppendQuote(out, r.SHA256)
		out = append(out, `,"size":`...)
		out = strconv.AppendInt(out, r.Size, 10)
		out = append(out, '}')
	} else {
		out = append(out, `,"payload":`...)
		start := len(out)
		c.out = out
		if ce := c.payload(e.Payload); ce != nil {
			return nil, &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
		}
		out = c.out
		if keep {
			canonical = bytes.Clone(out[start:])
		}
	}
	out = append(out, `,"schemaVersion":`...)
	out = strconv.AppendInt(out, int64(e.SchemaVersion), 10)
	c.out = append(out, '}')
	return canonical, nil
}

// reorder is jsontext's formatting for the canonical form: compact,
// members in RFC 8785's order, strings minimal; repeated names and invalid
// UTF-8 are errors (its defaults). Numbers are left as written, for
// appendNumberV3.
var reorder = jsontext.ReorderRawObjects(true)

// payload appends the HashV3 canonical form of the JSON document p to
// c.out: jsontext formats it, then each number that is not already its
// own canonical form (an integer literal other than -0) is rewritten.
func (c *canon) payload(p []byte) *canonError {
	f, err := jsontext.AppendFormat(c.tmp[:0], p, reorder)
	c.tmp = f
	if err != nil {
		switch {
		case !validJSON(p):
			return &canonError{reason: "payload is not valid JSON", err: syntaxError(p)}
		case errors.Is(err, jsontext.ErrDuplicateName):
			return &canonError{reason: "payload object has a duplicate key"}
		}
		return &canonError{reason: "payload string is not valid UTF-8 or has an unpaired surrogate escape"}
	}
	if string(f) == "null" {
		return &canonError{reason: "payload must not be null"}
	}
	depth, done := 0, 0
	for i := 0; i < len(f); {
		switch ch := f[i]; {
		case ch == '"':
			// Formatted strings escape only with a backslash.
			for i++; f[i] != '"'; i++ {
				if f[i] == '\\' {
					i++
				}
			}
			i++
		case ch == '{' || ch == '[':
			if depth++; depth > MaxPayloadDepth {
				return &canonError{reason: "payload nesting exceeds " + strconv.Itoa(MaxPayloadDepth) + " levels"}
			}
			i++
		case ch == '}' || ch == ']':
			depth--
			i++
		case ch == '-' || ch >= '0' && ch <= '9':
			end := i + 1
			plain := true
			for ; end < len(f) && strings.IndexByte("0123456789.eE+-", f[end]) >= 0; end++ {
				plain = plain && f[end] >= '0' && f[end] <= '9'
			}
			if plain && !(ch == '-' && f[i+1] == '0') {
				i = end // an integer literal is its own canonical form
				continue
			}
			c.out = append(c.out, f[done:i]...)
			var ok bool
			if c.out, ok = appendNumberV3(c.out, f[i:end]); !ok {
				return &canonError{reason: "payload number exponent overflows int32"}
			}
			i, done = end, end
		default:
			i++
		}
	}
	c.out = append(c.out, f[done:]...)
	return nil
}

// Bounds of the plain number forms (see RequestHash).
const (
	maxPlainIntDigits = 21 // 1e21 and above in exponent form, unless integral with ≤ 21 zeros
	minPlainFracPoint = -6 // 1e-7 and below in exponent form
)

// appendNumberV3 appends the HashV3 form of the number literal lit. It
// reports false if an exponent overflows int32. It never allocates in
// proportion to the exponent's value: plain forms are used only where they
// are at most 21 digits longer than the digits given.
func appendNumberV3(dst, lit []byte) ([]byte, bool) {
	n, _ := splitNumber(lit)
	sig, zero, ok := significant(lit, &n)
	switch {
	case !ok:
		return dst, false
	case zero:
		return append(dst, '0'), true
	}
	if n.neg {
		dst = append(dst, '-')
	}
	nd := sig.last - sig.first + 1
	e := sig.e
	k := int64(nd) + e // position of the decimal point within the digits
	switch {
	case e >= 0 && (k <= maxPlainIntDigits || e <= maxPlainIntDigits):
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
		dst = sig.appendDigits(dst, 0, 1)
		if nd > 1 {
			dst = append(dst, '.')
			dst = sig.appendDigits(dst, 1, nd)
		}
		dst = append(dst, 'e')
		if k-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, k-1, 10)
	}
	return dst, true
}

// significand is a number's significant digits: digit(k) for first <= k
// <= last, read across the integer and fraction parts, and the exponent e
// such that the value is those digits times 10^e.
type significand struct {
	ints, frac  []byte
	first, last int
	e           int64
}

func (s *significand) digit(k int) byte {
	if k < len(s.ints) {
		return s.ints[k]
	}
	return s.frac[k-len(s.ints)]
}

// appendDigits appends the significant digits first+a .. first+b-1.
func (s *significand) appendDigits(dst []byte, a, b int) []byte {
	for k := s.first + a; k < s.first+b; k++ {
		dst = append(dst, s.digit(k))
	}
	return dst
}

// significant locates n's significant digits (ranges into p). It reports
// zero for a value of 0, and false if an exponent overflows int32. It never
// allocates in proportion to the exponent's value.
func significant(p []byte, n *number) (s significand, zero, ok bool) {
	exp, ok := parseExp(p[n.expS:n.expE], n.expNeg)
	if !ok {
		return s, false, false
	}
	s.ints, s.frac = p[n.intS:n.intE], p[n.fracS:n.fracE]
	total := len(s.ints) + len(s.frac)
	for s.first < total && s.digit(s.first) == '0' {
		s.first++
	}
	if s.first == total {
		return s, true, true
	}
	s.last = total - 1
	for s.digit(s.last) == '0' {
		s.last--
	}
	s.e = exp - int64(len(s.frac)) + int64(total-1-s.last)
	if s.e < -1<<31 || s.e > 1<<31-1 {
		return s, false, false
	}
	return s, false, true
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
