package worker

import (
	"regexp"
	"sync"

	"github.com/ddbworker/ddbworker"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/s3payload"
)

// Metric labels are bounded: producer input never becomes a label value.

// Label values that stand for many.
const (
	labelUnknownType = "(unknown)"
	labelOtherCode   = "OTHER"
)

// maxCodeLabels is how many distinct failure codes get their own label
// value; later ones are counted as OTHER.
const maxCodeLabels = 100

var codePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// labels maps message types and failure codes to bounded label values.
type labels struct {
	types map[string]bool
	mu    sync.Mutex
	codes map[string]bool
}

func newLabels(routes map[string]ddbworker.Route) *labels {
	l := &labels{types: make(map[string]bool, len(routes)), codes: map[string]bool{}}
	for t := range routes {
		l.types[t] = true
	}
	return l
}

// builtinCode reports the worker's and the envelope's own codes, which
// always get their own label value: a handler that emits many codes must
// not push them into OTHER.
func builtinCode(c string) bool {
	switch c {
	case failure.CodeHashMismatch, failure.CodeMaxAttempts, failure.CodeRetryWindowExpired, failure.CodeUnknownMessageType,
		failure.CodeThrottled, failure.CodeTransactionConflict, failure.CodeTimeout, failure.CodeMessageTimeout,
		failure.CodeLeaseAbandoned, failure.CodeServiceUnavailable, failure.CodeHandlerError, failure.CodeHandlerPanic,
		failure.CodeConcurrentModification, failure.CodeInvalidTransaction, failure.CodeInvalidResult, failure.CodeInvalidPayload,
		failure.CodeShutdown, failure.CodeReplayWindowExpired, failure.CodeDeferralTooLong, failure.CodeReplicatedWriteConflict,
		failure.CodeHotKeyParked, failure.CodeHotKeyThrottled,
		string(envelope.CodeInvalidJSON), string(envelope.CodeMissingField), string(envelope.CodeInvalidField),
		string(envelope.CodeUnknownSchemaVersion), string(envelope.CodeKeyTooLong),
		s3payload.CodeNotFound, s3payload.CodeVersionNotFound, s3payload.CodeChecksumMismatch, s3payload.CodeSizeMismatch,
		s3payload.CodeTooLarge, s3payload.CodeAccessDenied, s3payload.CodePointerInvalid, s3payload.CodeFetchFailed:
		return true
	}
	return false
}

// messageType is t for a registered type, "" for a message without one
// (undecodable), and one value for every other.
func (l *labels) messageType(t string) string {
	switch {
	case t == "":
		return ""
	case l.types[t]:
		return t
	}
	return labelUnknownType
}

// code is c for the worker's and the envelope's own codes; for another,
// c when it looks like a code (upper case, digits, underscores, at most 64)
// and fewer than maxCodeLabels such codes were seen; OTHER otherwise.
func (l *labels) code(c string) string {
	if builtinCode(c) {
		return c
	}
	if !codePattern.MatchString(c) {
		return labelOtherCode
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.codes[c] {
		return c
	}
	if len(l.codes) >= maxCodeLabels {
		return labelOtherCode
	}
	l.codes[c] = true
	return c
}
