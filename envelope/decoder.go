package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// Default limits used for zero Config fields.
const (
	DefaultMaxKeyBytes   = 512
	DefaultMaxFieldBytes = 256
	DefaultMaxBodyBytes  = 1 << 20 // SQS's maximum message size
)

// Config sets the decoder's limits. Zero values take the defaults.
type Config struct {
	// MaxKeyBytes is the longest idempotencyKey in bytes (default 512).
	MaxKeyBytes int
	// MaxFieldBytes is the longest of the other string fields (messageId,
	// messageType, producer, aggregateType, aggregateId, causationId,
	// correlationId) in bytes (default 256). messageType and aggregateType
	// are additionally limited to 128 characters by the schema.
	MaxFieldBytes int
	// MaxBodyBytes is the longest body Decode accepts (default 1 MiB).
	MaxBodyBytes int
	// SupportedVersions lists the accepted schemaVersion values (default
	// {SchemaV1}; an empty slice also means the default). Every entry must
	// be a version this package implements.
	SupportedVersions []int
	// HashVersion is the canonical form Decode writes RequestHash in
	// (default CurrentHashVersion; HashV2 or HashV3). A worker writes the
	// version every worker sharing its table can read, so that during a
	// rolling deploy an older worker never judges a record of this one's
	// a hash mismatch: a table moves to HashV3 only once every worker
	// reads it (inbox.Store.RequestHashVersion, recorded in the table).
	// Stored hashes of every version are still compared (HashLike).
	HashVersion HashVersion
}

var defaultConfig = Config{
	MaxKeyBytes:       DefaultMaxKeyBytes,
	MaxFieldBytes:     DefaultMaxFieldBytes,
	MaxBodyBytes:      DefaultMaxBodyBytes,
	SupportedVersions: []int{SchemaV1},
	HashVersion:       CurrentHashVersion,
}

// Decoder decodes and validates envelopes. It is immutable and safe for
// concurrent use. A nil *Decoder behaves like one built from a zero Config.
type Decoder struct {
	cfg Config
}

var defaultDecoder = &Decoder{cfg: defaultConfig}

// NewDecoder returns a Decoder for cfg. Zero fields take their defaults.
// Negative limits and unimplemented schema versions are errors; all
// problems are reported together with errors.Join.
func NewDecoder(cfg Config) (*Decoder, error) {
	var errs []error
	limit := func(name string, v *int, def int) {
		switch {
		case *v < 0:
			errs = append(errs, fmt.Errorf("envelope: Config.%s must not be negative (got %d)", name, *v))
		case *v == 0:
			*v = def
		}
	}
	limit("MaxKeyBytes", &cfg.MaxKeyBytes, DefaultMaxKeyBytes)
	limit("MaxFieldBytes", &cfg.MaxFieldBytes, DefaultMaxFieldBytes)
	limit("MaxBodyBytes", &cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	if len(cfg.SupportedVersions) == 0 {
		cfg.SupportedVersions = []int{SchemaV1}
	} else {
		cfg.SupportedVersions = slices.Clone(cfg.SupportedVersions)
		for _, v := range cfg.SupportedVersions {
			if !slices.Contains(implementedVersions[:], v) {
				errs = append(errs, fmt.Errorf("envelope: Config.SupportedVersions: schema version %d is not implemented (implemented: %v)", v, implementedVersions))
			}
		}
	}
	switch cfg.HashVersion {
	case 0:
		cfg.HashVersion = CurrentHashVersion
	case HashV2, HashV3:
	default:
		errs = append(errs, fmt.Errorf("envelope: Config.HashVersion %v: new hashes are written in v2 or v3", cfg.HashVersion))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Decoder{cfg: cfg}, nil
}

// Field identifiers of the top-level object, in validation order.
const (
	fSchemaVersion = iota
	fMessageID
	fMessageType
	fProducer
	fOccurredAt
	fIdempotencyKey
	fAggregateType
	fAggregateID
	fAggregateVersion
	fCausationID
	fCorrelationID
	fAttemptPolicy
	fPayload
	fPayloadRef
	numFields
)

var fieldNames = [numFields]string{
	"schemaVersion", "messageId", "messageType", "producer", "occurredAt",
	"idempotencyKey", "aggregateType", "aggregateId", "aggregateVersion",
	"causationId", "correlationId", "attemptPolicy", "payload", "payloadRef",
}

func lookupField(key []byte) int {
	switch string(key) {
	case "schemaVersion":
		return fSchemaVersion
	case "messageId":
		return fMessageID
	case "messageType":
		return fMessageType
	case "producer":
		return fProducer
	case "occurredAt":
		return fOccurredAt
	case "idempotencyKey":
		return fIdempotencyKey
	case "aggregateType":
		return fAggregateType
	case "aggregateId":
		return fAggregateID
	case "aggregateVersion":
		return fAggregateVersion
	case "causationId":
		return fCausationID
	case "correlationId":
		return fCorrelationID
	case "attemptPolicy":
		return fAttemptPolicy
	case "payload":
		return fPayload
	case "payloadRef":
		return fPayloadRef
	}
	return -1
}

// Field identifiers of attemptPolicy.
const (
	pMaxBusinessAttempts = iota
	pNotBefore
	pRetryableUntil
	pTerminalAfterCodes
	numPolicyFields
)

var policyFieldNames = [numPolicyFields]string{
	"attemptPolicy.maxBusinessAttempts", "attemptPolicy.notBefore",
	"attemptPolicy.retryableUntil", "attemptPolicy.terminalAfterCodes",
}

func lookupPolicyField(key []byte) int {
	switch string(key) {
	case "maxBusinessAttempts":
		return pMaxBusinessAttempts
	case "notBefore":
		return pNotBefore
	case "retryableUntil":
		return pRetryableUntil
	case "terminalAfterCodes":
		return pTerminalAfterCodes
	}
	return -1
}

// Field identifiers of payloadRef.
const (
	rBucket = iota
	rKey
	rVersionID
	rSHA256
	rSize
	numRefFields
)

var refFieldNames = [numRefFields]string{
	"payloadRef.bucket", "payloadRef.key", "payloadRef.versionId",
	"payloadRef.sha256", "payloadRef.size",
}

func lookupRefField(key []byte) int {
	switch string(key) {
	case "bucket":
		return rBucket
	case "key":
		return rKey
	case "versionId":
		return rVersionID
	case "sha256":
		return rSHA256
	case "size":
		return rSize
	}
	return -1
}

// span is the byte range of a field's value in the body.
type span struct {
	start, end int
	set        bool
}

// timeState carries a time field's decode outcome to validation, which
// reports it in its place in the validation order.
type timeState struct {
	present bool  // a non-empty string was given
	err     error // parse error, reported as CodeInvalidField
}

// decodeState is what validation needs to know beyond the Envelope itself
// when validating a decoded (rather than producer-built) envelope.
type decodeState struct {
	svPresent                 bool
	refSizePresent            bool
	occurredAt                timeState
	notBefore, retryableUntil timeState
}

// Config returns the configuration in effect (defaults filled in).
func (d *Decoder) Config() Config {
	if d == nil {
		return defaultConfig
	}
	c := d.cfg
	c.SupportedVersions = slices.Clone(c.SupportedVersions)
	return c
}

// Decode parses body as an envelope, validates it and sets RequestHash.
// The returned error is always a *Error.
//
// Steps, each reporting the first problem found:
//
//  1. len(body) > MaxBodyBytes: CodeInvalidJSON.
//  2. The body must be exactly one JSON object, optionally surrounded by
//     whitespace; otherwise CodeInvalidJSON (Err holds the
//     *json.SyntaxError for malformed JSON). Unknown fields are ignored,
//     and field names match exactly (case-sensitively).
//  3. schemaVersion: appearing twice is CodeInvalidJSON; absent or null is
//     CodeMissingField; not an integer number is CodeInvalidJSON; a value
//     not in SupportedVersions is CodeUnknownSchemaVersion. No other field
//     is looked at before this, so a message of a future schema is
//     reported as such. Then any other known field appearing twice is
//     CodeInvalidJSON with Field set.
//  4. The remaining known fields are decoded in the order of Envelope's
//     fields; a wrong JSON type is CodeInvalidJSON with Field set. null is
//     treated as absent for every field except payload.
//  5. Required fields, in Envelope field order: absent, null, or "" is
//     CodeMissingField.
//  6. Rules, in Envelope field order (attemptPolicy members in
//     AttemptPolicy field order, payload last): length limits (an
//     over-long idempotencyKey is CodeKeyTooLong, checked before its
//     charset), charsets, UTF-8, control characters, RFC 3339 times,
//     aggregateVersion >= 0, attempt ranges, then exactly one of payload
//     and payloadRef (both: CodeInvalidField "payload"; neither was
//     CodeMissingField "payload" in step 5), payloadRef's members (absent
//     required ones CodeMissingField "payloadRef.bucket" etc., rule
//     violations CodeInvalidField), payload not null and canonicalizable
//     (see RequestHash); all CodeInvalidField.
//
// An envelope with a payloadRef is returned with Payload nil: the caller
// fetches the object, checks it against the reference and hands the bytes
// to ResolvePayload before any handler sees the envelope.
func (d *Decoder) Decode(body []byte) (*Envelope, error) {
	if d == nil {
		d = defaultDecoder
	}
	e, err := d.decode(body)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (d *Decoder) decode(body []byte) (*Envelope, *Error) {
	if len(body) > d.cfg.MaxBodyBytes {
		return nil, &Error{Code: CodeInvalidJSON, Reason: "body is " + strconv.Itoa(len(body)) +
			" bytes, limit is " + strconv.Itoa(d.cfg.MaxBodyBytes)}
	}

	c := getCanon()
	defer putCanon(c)

	// Step 2: structure.
	var spans [numFields]span
	dup, serr := scanObject(body, spans[:], lookupField, &c.rd, &c.str, true)
	if serr != nil {
		return nil, serr
	}
	if dup == fSchemaVersion {
		return nil, dupError(fieldNames[dup])
	}

	// Step 3: schema version.
	e := new(Envelope)
	var ds decodeState
	if sp := spans[fSchemaVersion]; sp.set && !isNull(body, sp) {
		v, err := decodeInt(body, sp, "schemaVersion", strconv.IntSize)
		if err != nil {
			return nil, err
		}
		e.SchemaVersion = int(v)
		ds.svPresent = true
	}
	if err := checkSchemaVersion(e, &d.cfg, ds.svPresent); err != nil {
		return nil, err
	}
	if dup >= 0 {
		return nil, dupError(fieldNames[dup])
	}

	// Step 4: types.
	// Decoded strings share one allocation (see textArena).
	ta := &c.text
	ta.reset()
	str := func(f int, dst *string) *Error {
		return decodeString(body, spans[f], fieldNames[f], ta, dst)
	}
	for _, f := range [...]struct {
		id  int
		dst *string
	}{
		{fMessageID, &e.MessageID},
		{fMessageType, &e.MessageType},
		{fProducer, &e.Producer},
	} {
		if err := str(f.id, f.dst); err != nil {
			return nil, err
		}
	}
	var err *Error
	if ds.occurredAt, err = decodeTime(body, spans[fOccurredAt], fieldNames[fOccurredAt], &e.OccurredAt, &c.str); err != nil {
		return nil, err
	}
	for _, f := range [...]struct {
		id  int
		dst *string
	}{
		{fIdempotencyKey, &e.IdempotencyKey},
		{fAggregateType, &e.AggregateType},
		{fAggregateID, &e.AggregateID},
	} {
		if err := str(f.id, f.dst); err != nil {
			return nil, err
		}
	}
	if sp := spans[fAggregateVersion]; sp.set && !isNull(body, sp) {
		v, err := decodeInt(body, sp, fieldNames[fAggregateVersion], 64)
		if err != nil {
			return nil, err
		}
		e.AggregateVersion = &v
	}
	if err := str(fCausationID, &e.CausationID); err != nil {
		return nil, err
	}
	if err := str(fCorrelationID, &e.CorrelationID); err != nil {
		return nil, err
	}
	if sp := spans[fAttemptPolicy]; sp.set && !isNull(body, sp) {
		if body[sp.start] != '{' {
			return nil, typeError(fieldNames[fAttemptPolicy], "must be an object")
		}
		e.AttemptPolicy, err = decodePolicy(body[sp.start:sp.end], &ds, &c.rd, &c.str)
		if err != nil {
			return nil, err
		}
	}
	if sp := spans[fPayload]; sp.set {
		e.Payload = json.RawMessage(append([]byte(nil), body[sp.start:sp.end]...))
	}
	if sp := spans[fPayloadRef]; sp.set && !isNull(body, sp) {
		if body[sp.start] != '{' {
			return nil, typeError(fieldNames[fPayloadRef], "must be an object")
		}
		e.PayloadRef, err = decodeRef(body[sp.start:sp.end], &ds, ta, &c.rd, &c.str)
		if err != nil {
			return nil, err
		}
	}
	ta.finish()

	// Steps 5 and 6.
	if err := validate(e, &d.cfg, &ds); err != nil {
		return nil, err
	}
	h, canonical, err := d.requestHash(e)
	if err != nil {
		return nil, err
	}
	e.RequestHash = h
	e.setCanonical(canonical)
	return e, nil
}

// scanObject checks that b is exactly one JSON object (surrounded by
// optional whitespace) and records the value spans of the known fields. It
// returns the first known field that appears more than once, or -1; the
// caller decides when to report that, so that syntax errors anywhere and
// an unsupported schemaVersion take precedence. top selects the error
// wording and whether Err is encoding/json's *json.SyntaxError.
func scanObject(b []byte, spans []span, lookup func([]byte) int, rd *reader, scratch *[]byte, top bool) (dup int, _ *Error) {
	syntax := func() *Error {
		if top {
			return &Error{Code: CodeInvalidJSON, Reason: "body is not valid JSON", Err: syntaxError(b)}
		}
		return &Error{Code: CodeInvalidJSON, Reason: "malformed JSON", Err: syntaxError(b)}
	}
	d := rd.reset(b, lenient...)
	if d.PeekKind() != '{' {
		if !validJSON(b) {
			return -1, syntax()
		}
		return -1, &Error{Code: CodeInvalidJSON, Reason: "body must be a JSON object"}
	}
	d.ReadToken()
	dup = -1
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return -1, syntax()
		}
		var key []byte
		*scratch, key, _ = unquote((*scratch)[:0], name)
		f := lookup(key)
		v, err := d.ReadValue()
		if err != nil {
			return -1, syntax()
		}
		if f >= 0 {
			if spans[f].set && dup < 0 {
				dup = f
			}
			end := int(d.InputOffset())
			spans[f] = span{start: end - len(v), end: end, set: true}
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return -1, syntax()
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return -1, syntax()
	}
	return dup, nil
}

func dupError(field string) *Error {
	return &Error{Code: CodeInvalidJSON, Field: field, Reason: "field appears more than once"}
}

func isNull(b []byte, sp span) bool { return b[sp.start] == 'n' }

func typeError(field, reason string) *Error {
	return &Error{Code: CodeInvalidJSON, Field: field, Reason: reason}
}

// decodeInt decodes an integer field. Non-numbers, numbers with a fraction
// or exponent, and integers outside the bitSize range are type errors, as
// they are for encoding/json.
func decodeInt(b []byte, sp span, field string, bitSize int) (int64, *Error) {
	v := b[sp.start:sp.end]
	n, ok := splitNumber(v)
	if !ok {
		return 0, typeError(field, "must be a number")
	}
	if !n.isInteger() {
		return 0, typeError(field, "must be an integer")
	}
	x, ok := parseInt(v[n.intS:n.intE], n.neg, bitSize)
	if !ok {
		return 0, typeError(field, "integer out of range")
	}
	return x, nil
}

// parseInt converts validated integer digits (no sign) to an int64 that
// fits in bitSize bits, without allocating.
func parseInt(d []byte, neg bool, bitSize int) (int64, bool) {
	limit := uint64(1)<<(bitSize-1) - 1 // max positive
	if neg {
		limit++
	}
	var u uint64
	for _, c := range d {
		if u > limit/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > limit {
			return 0, false
		}
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// decodeString decodes a string field into *dst via ta; absent or null
// yields "". The bytes are kept as given (see unquote); validation checks
// UTF-8.
func decodeString(b []byte, sp span, field string, ta *textArena, dst *string) *Error {
	if !sp.set || isNull(b, sp) {
		return nil
	}
	if b[sp.start] != '"' {
		return typeError(field, "must be a string")
	}
	start := len(ta.buf)
	var s []byte
	var simple bool
	ta.buf, s, simple = unquote(ta.buf, b[sp.start:sp.end])
	if simple {
		ta.buf = append(ta.buf, s...)
	}
	ta.dsts = append(ta.dsts, dst)
	ta.refs = append(ta.refs, [2]int{start, len(ta.buf)})
	return nil
}

// textArena collects decoded strings so that all of an envelope's string
// fields share a single allocation. It lives in the pooled canon state.
type textArena struct {
	buf  []byte
	dsts []*string
	refs [][2]int
}

func (ta *textArena) reset() {
	ta.buf = ta.buf[:0]
	ta.dsts = ta.dsts[:0]
	ta.refs = ta.refs[:0]
}

// finish stores the collected strings into their destinations and drops
// the pointers so that the pool does not keep the envelope alive.
func (ta *textArena) finish() {
	if len(ta.dsts) == 0 {
		return
	}
	all := string(ta.buf)
	for k, dst := range ta.dsts {
		*dst = all[ta.refs[k][0]:ta.refs[k][1]]
	}
	clear(ta.dsts)
	ta.reset()
}

// decodeTime decodes an RFC 3339 time field into *dst. Type errors are
// returned; parse errors are recorded in the timeState for validation.
func decodeTime(b []byte, sp span, field string, dst *time.Time, scratch *[]byte) (timeState, *Error) {
	var ts timeState
	if !sp.set || isNull(b, sp) {
		return ts, nil
	}
	if b[sp.start] != '"' {
		return ts, typeError(field, "must be a string")
	}
	var s []byte
	*scratch, s, _ = unquote((*scratch)[:0], b[sp.start:sp.end])
	if len(s) == 0 {
		return ts, nil
	}
	ts.present = true
	if len(s) > maxTimeLen {
		ts.err = errors.New("time text longer than " + strconv.Itoa(maxTimeLen) + " bytes")
		return ts, nil
	}
	ts.err = dst.UnmarshalText(s)
	return ts, nil
}

// decodePolicy decodes the attemptPolicy object b (already syntax-checked).
func decodePolicy(b []byte, ds *decodeState, rd *reader, scratch *[]byte) (*AttemptPolicy, *Error) {
	var spans [numPolicyFields]span
	dup, err := scanObject(b, spans[:], lookupPolicyField, rd, scratch, false)
	if err != nil {
		return nil, err
	}
	if dup >= 0 {
		return nil, dupError(policyFieldNames[dup])
	}
	p := new(AttemptPolicy)
	if sp := spans[pMaxBusinessAttempts]; sp.set && !isNull(b, sp) {
		v, err := decodeInt(b, sp, policyFieldNames[pMaxBusinessAttempts], strconv.IntSize)
		if err != nil {
			return nil, err
		}
		p.MaxBusinessAttempts = int(v)
	}
	for _, f := range [...]struct {
		id  int
		ts  *timeState
		dst **time.Time
	}{
		{pNotBefore, &ds.notBefore, &p.NotBefore},
		{pRetryableUntil, &ds.retryableUntil, &p.RetryableUntil},
	} {
		var t time.Time
		ts, err := decodeTime(b, spans[f.id], policyFieldNames[f.id], &t, scratch)
		if err != nil {
			return nil, err
		}
		*f.ts = ts
		if ts.present {
			*f.dst = &t
		}
	}
	if sp := spans[pTerminalAfterCodes]; sp.set && !isNull(b, sp) {
		codes, err := decodeStrings(b, sp, policyFieldNames[pTerminalAfterCodes], rd, scratch)
		if err != nil {
			return nil, err
		}
		p.TerminalAfterCodes = codes
	}
	return p, nil
}

// decodeRef decodes the payloadRef object b (already syntax-checked).
// Unknown members are ignored, as they are at the top level.
func decodeRef(b []byte, ds *decodeState, ta *textArena, rd *reader, scratch *[]byte) (*PayloadRef, *Error) {
	var spans [numRefFields]span
	dup, err := scanObject(b, spans[:], lookupRefField, rd, scratch, false)
	if err != nil {
		return nil, err
	}
	if dup >= 0 {
		return nil, dupError(refFieldNames[dup])
	}
	r := new(PayloadRef)
	for _, f := range [...]struct {
		id  int
		dst *string
	}{
		{rBucket, &r.Bucket},
		{rKey, &r.Key},
		{rVersionID, &r.VersionID},
		{rSHA256, &r.SHA256},
	} {
		if err := decodeString(b, spans[f.id], refFieldNames[f.id], ta, f.dst); err != nil {
			return nil, err
		}
	}
	if sp := spans[rSize]; sp.set && !isNull(b, sp) {
		v, err := decodeInt(b, sp, refFieldNames[rSize], 64)
		if err != nil {
			return nil, err
		}
		r.Size = v
		ds.refSizePresent = true
	}
	return r, nil
}

// decodeStrings decodes an array of strings (already syntax-checked).
func decodeStrings(b []byte, sp span, field string, rd *reader, scratch *[]byte) ([]string, *Error) {
	d := rd.reset(b[sp.start:sp.end], lenient...)
	if d.PeekKind() != '[' {
		return nil, typeError(field, "must be an array of strings")
	}
	d.ReadToken()
	out := []string{}
	for d.PeekKind() != ']' {
		if d.PeekKind() != '"' {
			return nil, typeError(field, "must be an array of strings")
		}
		raw, _ := d.ReadValue()
		var s []byte
		*scratch, s, _ = unquote((*scratch)[:0], raw)
		out = append(out, string(s))
	}
	return out, nil
}

// requestHash is e's request hash in the decoder's version, and its
// canonical payload (always v3's: the payload handlers decode).
func (d *Decoder) requestHash(e *Envelope) (string, []byte, *Error) {
	h, canonical, err := requestHashV3(e, true)
	if err != nil || d.cfg.HashVersion == HashV3 {
		return h, canonical, err
	}
	if h, err = requestHashLegacy(e, d.cfg.HashVersion); err != nil {
		return "", nil, err
	}
	return h, canonical, nil
}
