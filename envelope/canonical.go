package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// v2 selects the number form of hash version 2 (see RequestHash); the
	// zero value is version 1's. Every user sets it.
	v2 bool
	// payloadForm selects the form of the canonical payload a handler
	// decodes (Envelope.CanonicalPayload) instead of the hashed one: with
	// v2, integral values of more than 21 digits are written as plain
	// integers too (see appendNumberV2). Every user sets it.
	payloadForm bool
	// formsDiffer reports that a number was written whose hashed and
	// payload forms differ.
	formsDiffer bool
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
	// plain decimals (19.990 is "19.99").
	HashV2 HashVersion = 2
	// CurrentHashVersion is the form Decode and RequestHash produce.
	CurrentHashVersion = HashV2
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
	if strings.HasPrefix(stored, "v2:") && isSHA256Hex(stored[3:]) {
		return HashV2, true
	}
	return 0, false
}

// RequestHash returns the canonical request hash of e in the current
// version (CurrentHashVersion): "v2:" followed by the lowercase hex SHA-256
// of the canonical JSON encoding of
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
//     floating point. With the value written as ±D×10^E, D a digit string
//     of n digits without leading or trailing zeros, and k = n+E the
//     position of the decimal point: zero (including -0, 0.0, 0e5) is "0";
//     when E ≥ 0 and k ≤ 21, D followed by E zeros (1234.0, 1.2340e3 and
//     1234 are all "1234"); when E < 0 and k > 0, D with a point after k
//     digits (19.990 is "19.99"); when E < 0 and -6 < k ≤ 0, "0." then -k
//     zeros then D (0.25 is "0.25", 1e-6 is "0.000001"); otherwise "D" then
//     "e" and E, without "e" when E is 0 (1e21 is "1e21", 1e-7 is "1e-7").
//     A "-" prefix when negative. Exponents, as written or after
//     normalization, must fit in an int32.
//
// So the canonical payload of work that hashes the same is the same bytes,
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

// RequestHashVersion is RequestHash in canonical form v. HashV1 is the
// form records written before hash versioning carry.
func RequestHashVersion(e *Envelope, v HashVersion) (string, error) {
	if e == nil {
		return "", &Error{Code: CodeInvalidJSON, Reason: "nil envelope"}
	}
	var h string
	var err *Error
	switch v {
	case HashV1:
		h, err = requestHashV1(e)
	case HashV2:
		h, _, err = requestHashV2(e, false)
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
// (HashV1) is compared with e's HashV1 hash. An unrecognized stored hash
// is ErrUnknownHashVersion.
func (e *Envelope) HashLike(stored string) (string, error) {
	v, ok := HashVersionOf(stored)
	if !ok {
		return "", fmt.Errorf("%w: %.8q", ErrUnknownHashVersion, stored)
	}
	if v == CurrentHashVersion && e.RequestHash != "" {
		return e.RequestHash, nil
	}
	return RequestHashVersion(e, v)
}

// CanonicalPayload returns the payload in the canonical form the request
// hash covers (see RequestHash): sorted keys, no insignificant whitespace,
// numbers normalized — except that an integral value of more than 21
// digits needing at most 21 zeros after its significant digits is written
// as a plain integer (1e21 as "1000000000000000000000", which a *big.Int
// decodes), where the hashed form writes "1e21"; still a function of the
// value alone. Envelopes that hash the same have the same canonical
// payload byte for byte, so decoding it (as ddbworker.JSON does) gives the
// same value for every copy of the work. Decode and ResolvePayload compute
// it once; for other envelopes, or after Payload was replaced, it is
// computed on each call. An envelope without a payload (a payloadRef not yet
// resolved) is CodeMissingField "payload". The result must not be modified.
func (e *Envelope) CanonicalPayload() (json.RawMessage, error) {
	if len(e.canonical) > 0 && len(e.Payload) == len(e.canonicalOf) && len(e.Payload) > 0 && &e.Payload[0] == &e.canonicalOf[0] {
		return e.canonical, nil
	}
	if len(e.Payload) == 0 {
		return nil, &Error{Code: CodeMissingField, Field: "payload", Reason: "no payload (a payloadRef is resolved by the worker)"}
	}
	c := getCanon()
	defer putCanon(c)
	c.out, c.v2, c.payloadForm = c.out[:0], true, true
	if ce := c.payload(e.Payload); ce != nil {
		return nil, &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
	}
	return json.RawMessage(bytes.Clone(c.out)), nil
}

// setCanonical stores e's canonical payload for CanonicalPayload.
func (e *Envelope) setCanonical(canonical []byte) {
	e.canonical, e.canonicalOf = canonical, e.Payload
}

// requestHashV1 is the HashV1 form, kept so that records written by older
// workers compare like with like. Those workers already hashed a
// payloadRef as HashV2 does (its sha256 and size in place of the payload).
func requestHashV1(e *Envelope) (string, *Error) {
	if len(e.Payload) == 0 && e.PayloadRef == nil {
		return "", &Error{Code: CodeMissingField, Field: "payload", Reason: "required field is missing"}
	}
	c := getCanon()
	defer putCanon(c)
	c.v2, c.payloadForm = false, false
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

// requestHashV2 is the HashV2 form. With keep it also returns a copy of
// the canonical payload (nil for a payloadRef).
func requestHashV2(e *Envelope, keep bool) (string, []byte, *Error) {
	if len(e.Payload) == 0 && e.PayloadRef == nil {
		return "", nil, &Error{Code: CodeMissingField, Field: "payload", Reason: "required field is missing"}
	}
	c := getCanon()
	defer putCanon(c)
	c.v2, c.payloadForm, c.formsDiffer = true, false, false
	out := append(c.out[:0], `{"aggregateId":`...)
	out = appendString(out, e.AggregateID)
	out = append(out, `,"aggregateType":`...)
	out = appendString(out, e.AggregateType)
	if v := e.AggregateVersion; v != nil {
		out = append(out, `,"aggregateVersion":`...)
		out = strconv.AppendInt(out, *v, 10)
	}
	out = append(out, `,"messageType":`...)
	out = appendString(out, e.MessageType)
	var canonical []byte
	if r := e.PayloadRef; r != nil {
		out = appendRef(out, r)
	} else {
		out = append(out, `,"payload":`...)
		start := len(out)
		c.out = out
		if ce := c.payload(e.Payload); ce != nil {
			return "", nil, &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
		}
		out = c.out
		if keep && !c.formsDiffer {
			canonical = bytes.Clone(out[start:])
		}
	}
	out = append(out, `,"schemaVersion":`...)
	out = strconv.AppendInt(out, int64(e.SchemaVersion), 10)
	out = append(out, '}')
	c.out = out
	sum := sha256.Sum256(out)
	var h [3 + 2*sha256.Size]byte
	copy(h[:], "v2:")
	hex.Encode(h[3:], sum[:])
	if keep && e.PayloadRef == nil && c.formsDiffer {
		// A large integer: the payload handlers decode is written apart.
		c.out, c.payloadForm = c.out[:0], true
		if ce := c.payload(e.Payload); ce != nil {
			return "", nil, &Error{Code: CodeInvalidField, Field: "payload", Reason: ce.reason, Err: ce.err}
		}
		canonical = bytes.Clone(c.out)
	}
	return string(h[:]), canonical, nil
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
			if c.v2 {
				var differ bool
				c.out, ok, differ = appendNumberV2Form(c.out, p, &n, c.payloadForm)
				c.formsDiffer = c.formsDiffer || differ
			} else {
				c.out, ok = appendNumber(c.out, p, &n)
			}
			if !ok {
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

// appendNumber appends the canonical form of the number n (ranges into p).
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
	// Digits first..last, which may straddle the integer and fraction parts.
	if s.first < len(s.ints) {
		dst = append(dst, s.ints[s.first:min(s.last+1, len(s.ints))]...)
	}
	if s.last >= len(s.ints) {
		dst = append(dst, s.frac[max(s.first-len(s.ints), 0):s.last+1-len(s.ints)]...)
	}
	if s.e != 0 {
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, s.e, 10)
	}
	return dst, true
}

// Bounds of HashV2's plain number forms (see RequestHash).
const (
	maxPlainIntDigits = 21 // 1e21 and above in exponent form
	minPlainFracPoint = -6 // 1e-7 and below in exponent form
)

// appendNumberV2 appends n in HashV2's form. Like appendNumber it never
// allocates in proportion to the exponent's value: plain forms are used
// only where they are at most 21 digits longer than the digits given.
func appendNumberV2(dst, p []byte, n *number) ([]byte, bool) {
	dst, ok, _ := appendNumberV2Form(dst, p, n, false)
	return dst, ok
}

// appendNumberV2Form appends n in HashV2's hashed form, or with payload in
// the form of the canonical payload handlers decode, which differs in one
// way: an integral value of more than 21 digits whose digit string needs at
// most 21 zeros appended is written as a plain integer too (1e21 is
// "1000000000000000000000", not "1e21"), so that what decodes as an
// integer from the original (a *big.Int, a json.Number read as one) does so
// from the canonical payload. Both are functions of the value alone. differ
// reports that the two forms of n differ.
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
	first, last, e := sig.first, sig.last, sig.e
	// digits appends the significant digits first+a .. first+b-1.
	digits := func(dst []byte, a, b int) []byte {
		for k := first + a; k < first+b; k++ {
			dst = append(dst, sig.digit(k))
		}
		return dst
	}
	nd := last - first + 1
	k := int64(nd) + e // position of the decimal point within the digits
	wide := e >= 0 && k > maxPlainIntDigits && e <= maxPlainIntDigits
	switch {
	case e >= 0 && (k <= maxPlainIntDigits || payload && wide):
		dst = digits(dst, 0, nd)
		for range e {
			dst = append(dst, '0')
		}
	case e < 0 && k > 0:
		dst = digits(dst, 0, int(k))
		dst = append(dst, '.')
		dst = digits(dst, int(k), nd)
	case e < 0 && k > minPlainFracPoint:
		dst = append(dst, '0', '.')
		for range -k {
			dst = append(dst, '0')
		}
		dst = digits(dst, 0, nd)
	default:
		dst = digits(dst, 0, nd)
		if e != 0 {
			dst = append(dst, 'e')
			dst = strconv.AppendInt(dst, e, 10)
		}
	}
	return dst, true, wide
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
