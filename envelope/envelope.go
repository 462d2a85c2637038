package envelope

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// SchemaV1 is the envelope schema version described by Envelope. It is the
// only schemaVersion this package implements today.
const SchemaV1 = 1

// implementedVersions lists the schema versions this package can decode.
// Config.SupportedVersions may only name versions from this list.
var implementedVersions = [...]int{SchemaV1}

// Limits that are part of the schema rather than configuration.
const (
	maxNameLen         = 128 // messageType, aggregateType
	maxCodeLen         = 64  // each attemptPolicy.terminalAfterCodes entry
	maxBusinessAttempt = 100 // attemptPolicy.maxBusinessAttempts
	maxTimeLen         = 64  // longest RFC 3339 text considered for parsing
)

// AttemptPolicy is the producer's optional hint for how the worker should
// retry business failures. This package only decodes and validates it; the
// failure policy that applies it lives elsewhere.
type AttemptPolicy struct {
	// MaxBusinessAttempts caps business-level attempts; 0 means the
	// worker's default. Must be 0..100.
	MaxBusinessAttempts int `json:"maxBusinessAttempts,omitempty"`
	// NotBefore, when set, is the earliest time the work may be applied.
	NotBefore *time.Time `json:"notBefore,omitempty"`
	// RetryableUntil, when set, is the time after which failures are no
	// longer retried.
	RetryableUntil *time.Time `json:"retryableUntil,omitempty"`
	// TerminalAfterCodes lists business error codes that end retrying.
	// Each must be 1..64 characters of [A-Z0-9_].
	TerminalAfterCodes []string `json:"terminalAfterCodes,omitempty"`
}

// Envelope is a decoded, validated message envelope (schema version 1).
//
// Text fields must be valid UTF-8 without control characters (Unicode
// category Cc) and at most Config.MaxFieldBytes long, except where noted.
type Envelope struct {
	// MessageID identifies this delivery attempt by the producer; a re-send
	// of the same work normally gets a new one. Required.
	MessageID string `json:"messageId"`
	// SchemaVersion selects the envelope schema. Required; must be one of
	// the decoder's supported versions.
	SchemaVersion int `json:"schemaVersion"`
	// MessageType names the operation: 1..128 characters of [A-Za-z0-9._-].
	// Required.
	MessageType string `json:"messageType"`
	// Producer names the sending service. Required.
	Producer string `json:"producer"`
	// OccurredAt is when the producer created the message, RFC 3339 on the
	// wire. Required; the zero time is treated as absent.
	OccurredAt time.Time `json:"occurredAt"`
	// IdempotencyKey identifies the unit of work for de-duplication.
	// Required; at most Config.MaxKeyBytes bytes (CodeKeyTooLong).
	IdempotencyKey string `json:"idempotencyKey"`
	// AggregateType is the kind of entity the work applies to, with the same
	// charset and length rule as MessageType. Required.
	AggregateType string `json:"aggregateType"`
	// AggregateID identifies the entity. Required.
	AggregateID string `json:"aggregateId"`
	// AggregateVersion is the producer's view of the entity version.
	// Optional; must be >= 0 when present.
	AggregateVersion *int64 `json:"aggregateVersion,omitempty"`
	// CausationID optionally names the message that caused this one.
	CausationID string `json:"causationId,omitempty"`
	// CorrelationID optionally ties related messages together.
	CorrelationID string `json:"correlationId,omitempty"`
	// AttemptPolicy optionally overrides retry behaviour.
	AttemptPolicy *AttemptPolicy `json:"attemptPolicy,omitempty"`
	// Payload is the operation's body: any JSON value except null.
	// Exactly one of Payload and PayloadRef is required. Decode stores a
	// copy of the body's bytes, unchanged; for an envelope with a
	// PayloadRef it leaves Payload nil, and whoever fetches the object
	// (the worker) sets it with ResolvePayload before a handler runs.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadRef points at the payload stored in S3 instead of inline.
	// Exactly one of Payload and PayloadRef is required.
	PayloadRef *PayloadRef `json:"payloadRef,omitempty"`
	// RequestHash is set by Decode to RequestHash(e), in the current hash
	// version ("v3:<hex>"). It is not part of the wire format.
	RequestHash string `json:"-"`

	// canonical is the canonical payload computed while hashing, valid
	// while Payload is still canonicalOf (see CanonicalPayload).
	canonical, canonicalOf []byte
}

// PayloadRef points at a payload stored in S3 instead of inline. The
// request hash covers the reference's content identity (SHA256 and Size),
// never bytes fetched later.
type PayloadRef struct {
	// Bucket is the S3 bucket: 3..63 characters of [a-z0-9.-], beginning
	// and ending with a letter or digit. Required.
	Bucket string `json:"bucket"`
	// Key is the object key: 1..1024 bytes of UTF-8 without control
	// characters. Required.
	Key string `json:"key"`
	// VersionID pins the object version (at most 1024 bytes, no control
	// characters). Optional: without it the current version is read.
	VersionID string `json:"versionId,omitempty"`
	// SHA256 is the lowercase hex SHA-256 of the object's bytes (64
	// characters). Required.
	SHA256 string `json:"sha256"`
	// Size is the object's length in bytes, > 0. Required.
	Size int64 `json:"size"`
}

// Code classifies why an envelope was rejected. Codes are stable strings
// suitable for metrics and dead-letter annotations.
type Code string

// Codes returned in Error.Code.
const (
	// CodeInvalidJSON: the body is too large, not JSON, not a JSON object,
	// has data after the object, repeats a known field, or a known field
	// has the wrong JSON type (e.g. a string where a number belongs, or a
	// non-integer number for an integer field).
	CodeInvalidJSON Code = "INVALID_ENVELOPE"
	// CodeMissingField: a required field is absent, null, or empty.
	CodeMissingField Code = "MISSING_FIELD"
	// CodeInvalidField: a field is present with the right JSON type but
	// violates a rule (length, charset, control characters, invalid UTF-8,
	// negative version, bad time, out-of-range attempt count, null payload,
	// payload that cannot be canonicalized...).
	CodeInvalidField Code = "INVALID_FIELD"
	// CodeUnknownSchemaVersion: schemaVersion is present but not supported.
	CodeUnknownSchemaVersion Code = "UNKNOWN_SCHEMA_VERSION"
	// CodeKeyTooLong: idempotencyKey is longer than Config.MaxKeyBytes bytes.
	CodeKeyTooLong Code = "KEY_TOO_LONG"
	// CodeUnknownMessageType: Decoder.Read recognised an adapted body (an
	// SNS notification, an EventBridge event, a JSON body whose type an
	// expression names) but no adapted message type takes it. The worker
	// reports an envelope of an unregistered type with the same code.
	CodeUnknownMessageType Code = "UNKNOWN_MESSAGE_TYPE"
)

// ErrInvalid is matched by every *Error: errors.Is(err, ErrInvalid) reports
// whether err is an envelope rejection.
var ErrInvalid = errors.New("envelope: invalid")

// Error is the only error type returned by Decode, Read, Encode and
// RequestHash.
type Error struct {
	// Code classifies the problem.
	Code Code
	// Field is the JSON name of the offending field ("attemptPolicy.notBefore"
	// for nested ones), or "" when the whole body is at fault. For a body an
	// adapter read (Decoder.Read) it names the envelope field the adapter
	// could not fill ("idempotencyKey"), or the member of the body at fault
	// ("Message" of an SNS notification, "detail.items" for a repeated
	// member name).
	Field string
	// Adapter names the adapter that read the body ("JSON", "SNS(JSON)",
	// "EventBridge", "SNS(EventBridge)"), or "" for an envelope.
	Adapter string
	// Expression is the adapter's JMESPath expression that yielded Field,
	// when one did.
	Expression string
	// Reason is human-readable text. It never contains payload content or
	// field values, except the type of an adapted body that no message
	// type takes (CodeUnknownMessageType).
	Reason string
	// MessageType is the type an adapted body named when no message type
	// takes it (CodeUnknownMessageType: the TypeAttribute's value, the Type
	// expression's, an EventBridge event's detail-type), "" otherwise: the
	// worker files its rejection and its DLQ copy under it, so that an
	// operator sees the type the worker saw.
	MessageType string
	// Err is the underlying error (a *json.SyntaxError for malformed JSON,
	// a time parse error, ...) or nil.
	Err error
}

// Error formats e as "envelope: CODE field: reason[: underlying error]",
// with the adapter and its expression after the field for an adapted body:
// "envelope: MISSING_FIELD idempotencyKey (JSON expression \"orderId\"): …".
func (e *Error) Error() string {
	s := "envelope: " + string(e.Code)
	if e.Field != "" {
		s += " " + e.Field
	}
	switch {
	case e.Adapter != "" && e.Expression != "":
		s += " (" + e.Adapter + " expression " + strconv.Quote(e.Expression) + ")"
	case e.Adapter != "":
		s += " (" + e.Adapter + ")"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalid and, when non-nil, Err, so that errors.Is and
// errors.As see both.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}
