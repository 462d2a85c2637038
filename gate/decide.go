package gate

import (
	"time"

	"github.com/ddbworker/ddbworker/failure"
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
// at now, holding the freshly minted token, under the effective attempts
// policy (MaxAttempts ≥ 1).
//
// A FAILED_TERMINAL record ends every delivery the same way, except one the
// sweeper marked LEASE_ABANDONED: that verdict was about the lease, not the
// work, and a delivery of the same work proves its message was not lost,
// so it is taken over like an expired lease (attempts still count).
//
// The hash row compares like with like (Request.SameWork): a record
// written by an older worker, whose requestHash is in an older canonical
// form, is compared with req's hash in that form.
func Decide(p stale.Policy, req *Request, rec *inbox.Record, token string, attempts failure.Policy, now time.Time) Verdict {
	switch {
	case rec.Status == inbox.StatusProcessing && rec.LeaseToken == token:
		return VerdictOwn
	case !req.SameWork(rec.RequestHash):
		return VerdictHashMismatch
	case rec.Status == inbox.StatusCompleted:
		return VerdictDuplicate
	case rec.Status == inbox.StatusFailedTerminal && rec.FailureCode != failure.CodeLeaseAbandoned:
		return VerdictTerminalAgain
	case rec.Status == inbox.StatusProcessing && !p.Expired(rec.LeaseExpiry, now):
		return VerdictInFlight
	}
	if end := attempts.Before(rec.Attempts, now, "", ""); end != nil {
		if end.Code == failure.CodeMaxAttempts {
			return VerdictAttemptsExhausted
		}
		return VerdictRetryWindowExpired
	}
	// FAILED_RETRYABLE, PROCESSING whose lease expired, or an abandoned
	// lease; an unknown status is treated like FAILED_RETRYABLE, fenced by
	// the condition.
	return VerdictTakeover
}
