package envelope

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// Encode validates e with the same rules as Decode under the default Config
// and returns its JSON wire form (compact, HTML characters not escaped).
// e.RequestHash is ignored and e is not modified. The result decodes back
// to an envelope with the same RequestHash. The error is always a *Error.
func Encode(e *Envelope) ([]byte, error) {
	if e == nil {
		return nil, &Error{Code: CodeInvalidJSON, Reason: "nil envelope"}
	}
	if err := validate(e, &defaultConfig, nil); err != nil {
		return nil, err
	}
	if _, _, err := requestHashV3(e, false); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, &Error{Code: CodeInvalidJSON, Reason: "cannot marshal envelope", Err: err}
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	if len(out) > defaultConfig.MaxBodyBytes {
		return nil, &Error{Code: CodeInvalidJSON, Reason: "encoded body is " + strconv.Itoa(len(out)) +
			" bytes, limit is " + strconv.Itoa(defaultConfig.MaxBodyBytes)}
	}
	return out, nil
}

func missing(field string) *Error {
	return &Error{Code: CodeMissingField, Field: field, Reason: "required field is missing"}
}

func invalid(field, reason string) *Error {
	return &Error{Code: CodeInvalidField, Field: field, Reason: reason}
}

// checkSchemaVersion is validation step 3.
func checkSchemaVersion(e *Envelope, cfg *Config, present bool) *Error {
	if !present {
		return missing(fieldNames[fSchemaVersion])
	}
	if !slices.Contains(cfg.SupportedVersions, e.SchemaVersion) {
		return &Error{Code: CodeUnknownSchemaVersion, Field: fieldNames[fSchemaVersion],
			Reason: "schema version " + strconv.Itoa(e.SchemaVersion) + " is not supported"}
	}
	return nil
}

// validate runs validation steps 3 (unless ds is set: Decode has done it),
// 5 and 6 except payload canonicalization, which the caller does via
// requestHash. ds is nil for producer-built envelopes (Encode), where
// presence is judged from zero values.
func validate(e *Envelope, cfg *Config, ds *decodeState) *Error {
	if ds == nil {
		if err := checkSchemaVersion(e, cfg, e.SchemaVersion != 0); err != nil {
			return err
		}
	}

	// Step 5: required fields.
	occurredAtPresent := !e.OccurredAt.IsZero()
	if ds != nil {
		occurredAtPresent = ds.occurredAt.present
	}
	switch {
	case e.MessageID == "":
		return missing(fieldNames[fMessageID])
	case e.MessageType == "":
		return missing(fieldNames[fMessageType])
	case e.Producer == "":
		return missing(fieldNames[fProducer])
	case !occurredAtPresent:
		return missing(fieldNames[fOccurredAt])
	case e.IdempotencyKey == "":
		return missing(fieldNames[fIdempotencyKey])
	case e.AggregateType == "":
		return missing(fieldNames[fAggregateType])
	case e.AggregateID == "":
		return missing(fieldNames[fAggregateID])
	case len(e.Payload) == 0 && e.PayloadRef == nil:
		return missing(fieldNames[fPayload])
	}

	// Step 6: rules.
	if err := checkText(fieldNames[fMessageID], e.MessageID, cfg.MaxFieldBytes); err != nil {
		return err
	}
	if err := checkName(fieldNames[fMessageType], e.MessageType, cfg.MaxFieldBytes); err != nil {
		return err
	}
	if err := checkText(fieldNames[fProducer], e.Producer, cfg.MaxFieldBytes); err != nil {
		return err
	}
	var dts *timeState
	if ds != nil {
		dts = &ds.occurredAt
	}
	if err := checkTime(fieldNames[fOccurredAt], e.OccurredAt, dts); err != nil {
		return err
	}
	if len(e.IdempotencyKey) > cfg.MaxKeyBytes {
		return &Error{Code: CodeKeyTooLong, Field: fieldNames[fIdempotencyKey],
			Reason: "key is " + strconv.Itoa(len(e.IdempotencyKey)) + " bytes, limit is " + strconv.Itoa(cfg.MaxKeyBytes)}
	}
	if err := checkText(fieldNames[fIdempotencyKey], e.IdempotencyKey, -1); err != nil {
		return err
	}
	if err := checkName(fieldNames[fAggregateType], e.AggregateType, cfg.MaxFieldBytes); err != nil {
		return err
	}
	if err := checkText(fieldNames[fAggregateID], e.AggregateID, cfg.MaxFieldBytes); err != nil {
		return err
	}
	if v := e.AggregateVersion; v != nil && *v < 0 {
		return invalid(fieldNames[fAggregateVersion], "must not be negative")
	}
	if e.CausationID != "" {
		if err := checkText(fieldNames[fCausationID], e.CausationID, cfg.MaxFieldBytes); err != nil {
			return err
		}
	}
	if e.CorrelationID != "" {
		if err := checkText(fieldNames[fCorrelationID], e.CorrelationID, cfg.MaxFieldBytes); err != nil {
			return err
		}
	}
	if p := e.AttemptPolicy; p != nil {
		if err := checkPolicy(p, ds); err != nil {
			return err
		}
	}
	if r := e.PayloadRef; r != nil {
		if len(e.Payload) > 0 {
			return invalid(fieldNames[fPayload], "exactly one of payload and payloadRef may be present")
		}
		sizePresent := r.Size != 0
		if ds != nil {
			sizePresent = ds.refSizePresent
		}
		if err := checkRef(r, sizePresent); err != nil {
			return err
		}
	}
	return nil
}

// Limits of payloadRef's members (S3's own).
const (
	minBucketLen = 3
	maxBucketLen = 63
	maxS3KeyLen  = 1024 // bytes, for key and versionId
)

// checkRef validates a payloadRef: required members first, then rules.
func checkRef(r *PayloadRef, sizePresent bool) *Error {
	switch {
	case r.Bucket == "":
		return missing(refFieldNames[rBucket])
	case r.Key == "":
		return missing(refFieldNames[rKey])
	case r.SHA256 == "":
		return missing(refFieldNames[rSHA256])
	case !sizePresent:
		return missing(refFieldNames[rSize])
	}
	if !isBucket(r.Bucket) {
		return invalid(refFieldNames[rBucket], "must be "+strconv.Itoa(minBucketLen)+".."+strconv.Itoa(maxBucketLen)+
			" characters of [a-z0-9.-], beginning and ending with a letter or digit")
	}
	if err := checkText(refFieldNames[rKey], r.Key, maxS3KeyLen); err != nil {
		return err
	}
	if r.VersionID != "" {
		if err := checkText(refFieldNames[rVersionID], r.VersionID, maxS3KeyLen); err != nil {
			return err
		}
	}
	if !isSHA256Hex(r.SHA256) {
		return invalid(refFieldNames[rSHA256], "must be 64 lowercase hex digits")
	}
	if r.Size <= 0 {
		return invalid(refFieldNames[rSize], "must be greater than 0")
	}
	return nil
}

func isBucket(s string) bool {
	if len(s) < minBucketLen || len(s) > maxBucketLen {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '-' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func checkPolicy(p *AttemptPolicy, ds *decodeState) *Error {
	if p.MaxBusinessAttempts < 0 || p.MaxBusinessAttempts > maxBusinessAttempt {
		return invalid(policyFieldNames[pMaxBusinessAttempts], "must be between 0 and "+strconv.Itoa(maxBusinessAttempt))
	}
	for _, f := range [...]struct {
		id int
		t  *time.Time
		ts *timeState
	}{
		{pNotBefore, p.NotBefore, dsTime(ds, pNotBefore)},
		{pRetryableUntil, p.RetryableUntil, dsTime(ds, pRetryableUntil)},
	} {
		if f.ts != nil && f.ts.present && f.ts.err != nil {
			return &Error{Code: CodeInvalidField, Field: policyFieldNames[f.id], Reason: "must be an RFC 3339 time", Err: f.ts.err}
		}
		if f.t != nil {
			if err := checkTime(policyFieldNames[f.id], *f.t, nil); err != nil {
				return err
			}
		}
	}
	for k, code := range p.TerminalAfterCodes {
		if !isCode(code) {
			return invalid(policyFieldNames[pTerminalAfterCodes],
				"entry "+strconv.Itoa(k)+" must be 1.."+strconv.Itoa(maxCodeLen)+" characters of [A-Z0-9_]")
		}
	}
	return nil
}

func dsTime(ds *decodeState, id int) *timeState {
	switch {
	case ds == nil:
		return nil
	case id == pNotBefore:
		return &ds.notBefore
	default:
		return &ds.retryableUntil
	}
}

// checkTime validates a time field. ts carries Decode's parse outcome.
func checkTime(field string, t time.Time, ts *timeState) *Error {
	if ts != nil && ts.err != nil {
		return &Error{Code: CodeInvalidField, Field: field, Reason: "must be an RFC 3339 time", Err: ts.err}
	}
	if t.IsZero() {
		return invalid(field, "must not be the zero time")
	}
	if ts == nil {
		// Producer-built value: it must be representable in RFC 3339.
		if _, err := t.MarshalJSON(); err != nil {
			return &Error{Code: CodeInvalidField, Field: field, Reason: "not representable in RFC 3339", Err: err}
		}
	}
	return nil
}

// checkText enforces the free-text rule: at most maxBytes bytes (no limit
// when negative), valid UTF-8, no control characters.
func checkText(field, s string, maxBytes int) *Error {
	if maxBytes >= 0 && len(s) > maxBytes {
		return invalid(field, "longer than "+strconv.Itoa(maxBytes)+" bytes")
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return invalid(field, "contains a control character")
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return invalid(field, "is not valid UTF-8")
		}
		if unicode.IsControl(r) {
			return invalid(field, "contains a control character")
		}
		i += size
	}
	return nil
}

// checkName enforces the type-name rule: 1..128 characters of
// [A-Za-z0-9._-], and at most maxBytes bytes.
func checkName(field, s string, maxBytes int) *Error {
	if len(s) > maxNameLen || len(s) > maxBytes {
		return invalid(field, "longer than "+strconv.Itoa(min(maxNameLen, maxBytes))+" characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalid(field, "must contain only [A-Za-z0-9._-]")
		}
	}
	return nil
}

func isCode(s string) bool {
	if len(s) == 0 || len(s) > maxCodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
