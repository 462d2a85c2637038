package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Kind says whether a failure may heal by retrying.
type Kind int

const (
	// Retryable failures are transient: throttling, conflicts, timeouts, a
	// dependency that is down. The worker backs off and retries, counting
	// business attempts in the inbox.
	Retryable Kind = iota + 1
	// Terminal failures will not heal: invalid data, an unknown aggregate, a
	// hash mismatch, exhausted attempts. The worker never re-runs them.
	Terminal
)

func (k Kind) String() string {
	switch k {
	case Retryable:
		return "retryable"
	case Terminal:
		return "terminal"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Codes the worker assigns. Handlers use their own codes (e.g. CASE_NOT_FOUND);
// codes are short upper-case identifiers that travel into the inbox record,
// DLQ message attributes, logs and metrics.
const (
	CodeHashMismatch           = "IDEMPOTENCY_HASH_MISMATCH"
	CodeMaxAttempts            = "MAX_ATTEMPTS_EXCEEDED"
	CodeMaxTakeovers           = "MAX_TAKEOVERS_EXCEEDED"
	CodeRetryWindowExpired     = "RETRY_WINDOW_EXPIRED"
	CodeUnknownMessageType     = "UNKNOWN_MESSAGE_TYPE"
	CodeThrottled              = "THROTTLED"
	CodeTransactionConflict    = "TRANSACTION_CONFLICT"
	CodeTimeout                = "TIMEOUT"
	CodeMessageTimeout         = "MESSAGE_TIMEOUT"
	CodeLeaseAbandoned         = "LEASE_ABANDONED"
	CodeServiceUnavailable     = "SERVICE_UNAVAILABLE"
	CodeHandlerError           = "HANDLER_ERROR"
	CodeHandlerPanic           = "HANDLER_PANIC"
	CodeConcurrentModification = "CONCURRENT_MODIFICATION"
	CodeInvalidTransaction     = "INVALID_TRANSACTION"
	CodeInvalidResult          = "INVALID_HANDLER_RESULT"
	CodeInvalidPayload         = "INVALID_PAYLOAD"
	CodeShutdown               = "SHUTDOWN"
	CodeReplayWindowExpired    = "REPLAY_WINDOW_EXPIRED"
	CodeDeferralTooLong        = "DEFERRAL_TOO_LONG"
	// CodeReplicatedWriteConflict: a write to a multi-Region strongly
	// consistent (MRSC) global table found the item being modified from
	// another Region (ReplicatedWriteConflictException). Nothing was
	// written; AWS documents the write as retryable, succeeding once the
	// other Region's write is done.
	CodeReplicatedWriteConflict = "REPLICATED_WRITE_CONFLICT"
	// CodeHotKeyParked: the delivery did not run because its key (its
	// aggregate, or its FIFO group) is parked after a key-range throttle
	// or a conflict storm (KeyRangeThrottle): infrastructure, no attempt.
	CodeHotKeyParked = "HOT_KEY_PARKED"
	// CodeHotKeyThrottled ends a message whose key stayed throttled longer
	// than the worker's bound (worker.HotKeyConfig.MaxThrottled) instead of
	// letting it circulate: terminal, but never a business attempt.
	CodeHotKeyThrottled = "HOT_KEY_THROTTLED"
)

// Infrastructure reports whether f is infrastructure trouble, not a
// business failure: a retryable failure with one of the codes Classify gives
// throttling (THROTTLED), 5xx and transport errors (SERVICE_UNAVAILABLE),
// timeouts (TIMEOUT), transaction conflicts (TRANSACTION_CONFLICT), an
// MRSC table's cross-Region conflicts (REPLICATED_WRITE_CONFLICT), a
// shutdown that cancelled the work (SHUTDOWN), or a delivery held back
// because its key is parked (HOT_KEY_PARKED). Such a failure is never
// recorded as a failure, so it never counts as a business attempt: the
// worker gives the lease back and backs off. A handler whose own
// dependency is down and that wants its attempts counted returns a
// retryable failure with a code of its own.
func (e *Error) Infrastructure() bool {
	if e == nil || e.Kind != Retryable {
		return false
	}
	switch e.Code {
	case CodeThrottled, CodeServiceUnavailable, CodeTimeout, CodeTransactionConflict, CodeShutdown, CodeReplicatedWriteConflict, CodeHotKeyParked:
		return true
	}
	return false
}

// Sentinels matched by errors.Is on every *Error of that kind.
var (
	ErrRetryable = errors.New("failure: retryable")
	ErrTerminal  = errors.New("failure: terminal")
)

// Error is a failure with its kind and code. Handlers return it (directly or
// wrapped) to choose the kind; anything else a handler returns is retryable
// with CodeHandlerError.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Err     error
}

// NewRetryable returns a retryable failure with code and message.
func NewRetryable(code, message string) *Error {
	return &Error{Kind: Retryable, Code: code, Message: message}
}

// NewTerminal returns a terminal failure with code and message.
func NewTerminal(code, message string) *Error {
	return &Error{Kind: Terminal, Code: code, Message: message}
}

// Wrap returns a failure of kind and code whose message is err's text.
func Wrap(kind Kind, code string, err error) *Error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return &Error{Kind: kind, Code: code, Message: msg, Err: err}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("failure: %s %s", e.Kind, e.Code)
	}
	return fmt.Sprintf("failure: %s %s: %s", e.Kind, e.Code, e.Message)
}

// Unwrap exposes the kind's sentinel and the cause.
func (e *Error) Unwrap() []error {
	kind := ErrRetryable
	if e.Kind == Terminal {
		kind = ErrTerminal
	}
	if e.Err == nil {
		return []error{kind}
	}
	return []error{kind, e.Err}
}

// IsTerminal reports whether the failure is terminal.
func (e *Error) IsTerminal() bool { return e.Kind == Terminal }

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var f *Error
	ok := errors.As(err, &f)
	return f, ok
}

// Classify turns any error into a failure: a *Error in the chain is returned
// as it is; AWS throttling, 5xx, transport errors and timeouts are retryable
// with their own codes, and so is an MRSC table's
// ReplicatedWriteConflictException; a ValidationException is terminal
// (CodeInvalidTransaction: the request itself is wrong and will stay wrong);
// everything else is retryable with fallbackCode.
func Classify(err error, fallbackCode string) *Error {
	if err == nil {
		return nil
	}
	if f, ok := As(err); ok {
		return f
	}
	switch {
	case IsThrottle(err):
		return Wrap(Retryable, CodeThrottled, err)
	case APICode(err) == "ReplicatedWriteConflictException":
		return Wrap(Retryable, CodeReplicatedWriteConflict, err)
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return Wrap(Retryable, CodeTimeout, err)
	case errors.Is(err, context.Canceled):
		return Wrap(Retryable, CodeTimeout, err)
	case isServerError(err):
		return Wrap(Retryable, CodeServiceUnavailable, err)
	case IsValidation(err):
		return Wrap(Terminal, CodeInvalidTransaction, err)
	default:
		return Wrap(Retryable, fallbackCode, err)
	}
}

// APICode returns the AWS error code of err ("" when err carries none),
// without the "AWS.SimpleQueueService." prefix some SQS endpoints add.
func APICode(err error) string {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return ""
	}
	code := api.ErrorCode()
	if i := strings.LastIndexByte(code, '.'); i >= 0 {
		code = code[i+1:]
	}
	return code
}

// IsThrottle reports whether err is AWS throttling (DynamoDB or SQS).
func IsThrottle(err error) bool {
	if err == nil {
		return false
	}
	switch APICode(err) {
	case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
		"Throttling", "RequestThrottled", "ThrottledException", "TooManyRequestsException":
		return true
	}
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
}

// KeyRangeThrottle reports whether err is DynamoDB throttling confined to
// one key range — a hot partition, not a sick table: a throttling
// exception (ThrottlingException, ProvisionedThroughputExceededException,
// RequestLimitExceeded) whose ThrottlingReasons (DynamoDB sends them since
// August 2025) are all key-range reasons (IsKeyRangeReason). A throttle
// that names no reason, or any table, index, account or on-demand-maximum
// reason beside a key-range one, is database-wide: false. A transaction's
// cancellation reason ThrottlingError carries no reason: false.
func KeyRangeThrottle(err error) bool {
	reasons, ok := throttlingReasons(err)
	if !ok || len(reasons) == 0 {
		return false
	}
	for _, r := range reasons {
		if !IsKeyRangeReason(aws.ToString(r.Reason)) {
			return false
		}
	}
	return true
}

// IsKeyRangeReason reports whether a ThrottlingReason's reason names a key
// range: TableReadKeyRangeThroughputExceeded,
// TableWriteKeyRangeThroughputExceeded, IndexReadKeyRangeThroughputExceeded
// or IndexWriteKeyRangeThroughputExceeded (AWS's format is
// ResourceType+OperationType+LimitType; the limit type
// KeyRangeThroughputExceeded is the partition-level limit).
func IsKeyRangeReason(reason string) bool {
	switch reason {
	case "TableReadKeyRangeThroughputExceeded", "TableWriteKeyRangeThroughputExceeded",
		"IndexReadKeyRangeThroughputExceeded", "IndexWriteKeyRangeThroughputExceeded":
		return true
	}
	return false
}

// throttlingReasons are the ThrottlingReasons of the DynamoDB throttling
// exception in err's chain (false: none is).
func throttlingReasons(err error) ([]ddbtypes.ThrottlingReason, bool) {
	var te *ddbtypes.ThrottlingException
	var pte *ddbtypes.ProvisionedThroughputExceededException
	var rle *ddbtypes.RequestLimitExceeded
	switch {
	case errors.As(err, &pte):
		return pte.ThrottlingReasons, true
	case errors.As(err, &te):
		return te.ThrottlingReasons, true
	case errors.As(err, &rle):
		return rle.ThrottlingReasons, true
	}
	return nil, false
}

// isServerError reports whether err is a 5xx response or a transport error
// (the request may or may not have been applied).
func isServerError(err error) bool {
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return true
	}
	switch APICode(err) {
	case "InternalServerError", "InternalFailure", "ServiceUnavailable", "InternalError":
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// IsValidation reports whether err is a ValidationException.
func IsValidation(err error) bool { return APICode(err) == "ValidationException" }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
