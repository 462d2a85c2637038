package gate

import (
	"time"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// Verdict is a row of the decision table.
type Verdict int

// The rows of DESIGN §4.2's table, plus Own: the record is ours already
// (a retried write whose first response was lost).
const (
	VerdictOwn Verdict = iota + 1
	VerdictHashMismatch
	VerdictDuplicate
	VerdictTerminalAgain
	VerdictInFlight
	VerdictTakeover
	VerdictAttemptsExhausted
	VerdictRetryWindowExpired
)

var verdictNames = [...]string{"", "own", "hash-mismatch", "duplicate", "terminal-again", "in-flight", "takeover", "attempts-exhausted", "retry-window-expired"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) && v > 0 {
		return verdictNames[v]
	}
	return "unknown"
}

// Decide reads an existing record and says what a delivery of req may do,
// at now, holding the freshly minted token. maxAttempts is the effective
// business-attempt limit (≥ 1).
func Decide(p stale.Policy, req *Request, rec *inbox.Record, token string, maxAttempts int, now time.Time) Verdict {
	switch {
	case rec.Status == inbox.StatusProcessing && rec.LeaseToken == token:
		return VerdictOwn
	case rec.RequestHash != req.RequestHash:
		return VerdictHashMismatch
	case rec.Status == inbox.StatusCompleted:
		return VerdictDuplicate
	case rec.Status == inbox.StatusFailedTerminal:
		return VerdictTerminalAgain
	case rec.Status == inbox.StatusProcessing && !p.Expired(rec.LeaseExpiry, now):
		return VerdictInFlight
	case rec.Attempts >= maxAttempts:
		return VerdictAttemptsExhausted
	case !req.RetryableUntil.IsZero() && now.After(req.RetryableUntil):
		return VerdictRetryWindowExpired
	default:
		// FAILED_RETRYABLE, or PROCESSING whose lease expired; an unknown
		// status is treated like FAILED_RETRYABLE, fenced by the condition.
		return VerdictTakeover
	}
}
