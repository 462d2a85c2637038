package producer

import (
	"errors"
	"fmt"
)

// Sentinels matched by errors.Is on an *EntryError.
var (
	// ErrInvalid: the message does not make a valid envelope (the *envelope.Error
	// says which field and why). Fix the message; sending it again fails the same way.
	ErrInvalid = errors.New("producer: invalid message")
	// ErrTooLarge: the body and attributes exceed Config.MaxMessageBytes less
	// Config.DLQHeadroom (and no Offloader took the payload).
	ErrTooLarge = errors.New("producer: message too large")
	// ErrOffload: the Offloader failed; the message was not sent.
	ErrOffload = errors.New("producer: offloading the payload failed")
	// ErrSend: SQS did not accept the message (a call error, or a failed
	// batch entry that was the sender's fault or still failed after
	// Config.MaxAttempts attempts). Code says SQS's reason when it gave one.
	ErrSend = errors.New("producer: send failed")
	// ErrGroupBlocked: on a FIFO queue, an earlier message of the same
	// MessageGroupId in this call was not sent, so this one was held back
	// to keep the group's order. Send both again, in order.
	ErrGroupBlocked = errors.New("producer: an earlier message of its FIFO group was not sent")
	// ErrInvalidTenant is matched by every *TenantError: the message's
	// tenant (Message.Tenant, Config.Tenant) is not a MessageGroupId SQS
	// accepts. Its EntryError's Kind is ErrInvalid.
	ErrInvalidTenant = errors.New("producer: invalid tenant")
)

// TenantError is why a message's tenant cannot be its MessageGroupId: SQS
// takes 1..128 characters, each an ASCII letter, digit or punctuation mark
// (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~). The message is not sent — never sent
// without its tenant. Map such tenants to an id SQS takes (a customer
// number, a hash) in Config.Tenant.
type TenantError struct {
	// Tenant is the refused value.
	Tenant string
	// Reason says what SQS would refuse.
	Reason string
}

func (e *TenantError) Error() string {
	return fmt.Sprintf("producer: tenant %q cannot be a MessageGroupId: %s", e.Tenant, e.Reason)
}

// Unwrap returns ErrInvalidTenant.
func (e *TenantError) Unwrap() error { return ErrInvalidTenant }

// EntryError is why one message of a Send was not sent. Send's error joins
// one per failed message (errors.As finds the first; Results lists all).
type EntryError struct {
	// Index is the message's position in the Send call.
	Index int
	// MessageID and IdempotencyKey identify the message ("" when it could
	// not be built).
	MessageID, IdempotencyKey string
	// Code is SQS's error code for a failed batch entry (e.g.
	// "InvalidParameterValue"), or "".
	Code string
	// SenderFault is SQS's verdict for a failed batch entry.
	SenderFault bool
	// Attempts is how many times the message was offered to SQS.
	Attempts int
	// Kind is one of the sentinels above; Err the cause (an *envelope.Error,
	// an SDK error, SQS's message), or nil.
	Kind, Err error

	group string // FIFO group of a message that could not be built
}

func (e *EntryError) Error() string {
	s := fmt.Sprintf("producer: message %d", e.Index)
	if e.IdempotencyKey != "" {
		s += fmt.Sprintf(" (key %q)", e.IdempotencyKey)
	}
	s += ": " + e.Kind.Error()
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Kind and Err.
func (e *EntryError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
