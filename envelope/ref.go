package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrRefMismatch is matched (errors.Is) by the *Error ResolvePayload returns
// when the fetched bytes are not the object the reference names: their
// size or SHA-256 differ.
var ErrRefMismatch = errors.New("envelope: fetched payload does not match payloadRef")

// ResolvePayload sets the payload of an envelope that carries a PayloadRef
// to fetched, the object's bytes, after checking them against the
// reference: the size and the SHA-256 must match (else a *Error on
// "payloadRef.size" or "payloadRef.sha256" wrapping ErrRefMismatch), and the
// bytes must be a payload Decode would accept inline (else a *Error on
// "payload", as Decode reports it). The request hash does not change: it
// covers the reference. fetched is copied. On error e is not modified.
func (e *Envelope) ResolvePayload(fetched []byte) error {
	r := e.PayloadRef
	if r == nil {
		return &Error{Code: CodeInvalidField, Field: fieldNames[fPayloadRef], Reason: "envelope has no payloadRef to resolve"}
	}
	if int64(len(fetched)) != r.Size {
		return &Error{Code: CodeInvalidField, Field: refFieldNames[rSize],
			Reason: "fetched object is " + strconv.Itoa(len(fetched)) + " bytes, the reference says " + strconv.FormatInt(r.Size, 10),
			Err:    ErrRefMismatch}
	}
	sum := sha256.Sum256(fetched)
	if hex.EncodeToString(sum[:]) != r.SHA256 {
		return &Error{Code: CodeInvalidField, Field: refFieldNames[rSHA256], Reason: "fetched object's SHA-256 differs from the reference's", Err: ErrRefMismatch}
	}
	c := getCanon()
	defer putCanon(c)
	c.out = c.out[:0]
	if ce := c.payload(fetched); ce != nil {
		return &Error{Code: CodeInvalidField, Field: fieldNames[fPayload], Reason: ce.reason, Err: ce.err}
	}
	e.Payload = json.RawMessage(append([]byte(nil), fetched...))
	e.setCanonical(bytes.Clone(c.out))
	return nil
}
