package worker

import (
	"regexp"
	"sync"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
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

func newLabels(routes map[string]route) *labels {
	l := &labels{types: make(map[string]bool, len(routes)), codes: map[string]bool{}}
	for t := range routes {
		l.types[t] = true
	}
	return l
}

// builtinCodes always get their own label value: a handler that emits many
// codes must not push the worker's own into OTHER.
var builtinCodes = map[string]bool{
	failure.CodeHashMismatch: true, failure.CodeMaxAttempts: true, failure.CodeRetryWindowExpired: true,
	failure.CodeUnknownMessageType: true, failure.CodeThrottled: true, failure.CodeTransactionConflict: true,
	failure.CodeTimeout: true, failure.CodeMessageTimeout: true, failure.CodeLeaseAbandoned: true,
	failure.CodeServiceUnavailable: true, failure.CodeHandlerError: true, failure.CodeHandlerPanic: true,
	failure.CodeConcurrentModification: true, failure.CodeInvalidTransaction: true, failure.CodeInvalidResult: true,
	failure.CodeInvalidPayload: true, failure.CodeShutdown: true, failure.CodeReplayWindowExpired: true,
	failure.CodeDeferralTooLong:      true,
	string(envelope.CodeInvalidJSON): true, string(envelope.CodeMissingField): true, string(envelope.CodeInvalidField): true,
	string(envelope.CodeUnknownSchemaVersion): true, string(envelope.CodeKeyTooLong): true,
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
	if builtinCodes[c] {
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
