package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ddbworker/ddbworker/failure"
)

// Validator is a payload that checks itself after decoding. JSON calls it.
type Validator interface {
	Validate() error
}

// ErrPayload is the sentinel of *PayloadError.
var ErrPayload = errors.New("worker: invalid payload")

// PayloadError is a payload that did not decode into the handler's type or
// failed its Validate. JSON returns it as terminal INVALID_PAYLOAD: the same
// bytes will never decode.
type PayloadError struct {
	MessageType string
	Err         error
}

func (e *PayloadError) Error() string {
	return fmt.Sprintf("worker: %s payload: %v", e.MessageType, e.Err)
}

// Unwrap returns ErrPayload and the decoding or validation error.
func (e *PayloadError) Unwrap() []error { return []error{ErrPayload, e.Err} }

// JSON adapts a handler of typed payloads: it decodes msg.Envelope.Payload
// into a fresh T with encoding/json (unknown fields are ignored, so
// producers may add fields), calls Validate when T or *T is a Validator,
// and only then calls fn. A payload that fails either never reaches fn: it
// ends terminal with failure.CodeInvalidPayload and a *PayloadError.
func JSON[T any](fn func(ctx context.Context, msg *Message, payload T) (Result, error)) Handler {
	return HandlerFunc(func(ctx context.Context, msg *Message) (Result, error) {
		var p T
		err := json.Unmarshal(msg.Envelope.Payload, &p)
		if err == nil {
			if v, ok := any(&p).(Validator); ok {
				err = v.Validate()
			} else if v, ok := any(p).(Validator); ok {
				err = v.Validate()
			}
		}
		if err != nil {
			return Result{}, failure.Wrap(failure.Terminal, failure.CodeInvalidPayload, &PayloadError{MessageType: msg.Envelope.MessageType, Err: err})
		}
		return fn(ctx, msg, p)
	})
}
