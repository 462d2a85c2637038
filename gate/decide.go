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
// (a retried write whose first response was lost), and TakeoversExhausted:
// the lease expired without an outcome more often than the bound allows.
const (
	VerdictOwn Verdict = iota + 1
	VerdictHashMismatch
	VerdictDuplicate
	VerdictTerminalAgain
	VerdictInFlight
	VerdictTakeover
	VerdictAttemptsExhausted
	VerdictRetryWindowExpired
	VerdictTakeoversExhausted
)

var verdictNames = [...]string{"", "own", "hash-mismatch", "duplicate", "terminal-again", "in-flight", "takeover",
	"attempts-exhausted", "retry-window-expired", "takeovers-exhausted"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) && v > 0 {
		return verdictNames[v]
	}
	return "unknown"
}

// Limits end retrying: the attempts policy (business attempts, counted when
// a failure is recorded) and the bound on takeovers of leases that expired
// without any outcome (crashes, hangs, a lost database).
type Limits struct {
	// Attempts is the effective attempts policy (MaxAttempts ≥ 1).
	Attempts failure.Policy
	// MaxTakeovers is how many expired leases may be taken over (≥ 1).
	MaxTakeovers int
}

// Decide reads an existing record and says what a delivery of req may do,
// at now, holding the freshly minted token, within limits.
//
// A FAILED_TERMINAL record ends every delivery the same way, except one the
// sweeper marked LEASE_ABANDONED: that verdict was about the lease, not the
// work, and a delivery of the same work proves its message was not lost,
// so it is taken over like an expired lease.
//
// No row counts a business attempt: a takeover only claims the lease, and
// the attempt is counted if, and when, its failure is recorded. A takeover
// of a lease that expired without an outcome counts a takeover instead,
// bounded by limits.MaxTakeovers: a message that kills its worker every
// time ends MAX_TAKEOVERS_EXCEEDED instead of looping. A released lease
// (given back after infrastructure trouble or a shutdown) is taken over
// at once and counts nothing.
//
// The hash row compares like with like (Request.SameWork): a record
// written by an older worker, whose requestHash is in an older canonical
// form, is compared with req's hash in that form.
func Decide(p stale.Policy, req *Request, rec *inbox.Record, token string, limits Limits, now time.Time) Verdict {
	switch {
	case rec.Status == inbox.StatusProcessing && rec.LeaseToken == token && req.SameWork(rec.RequestHash):
		// The same work only: a held lease's token may come with a copy of
		// the message (a parked message re-sent), and a token never
		// claims other work under the key.
		return VerdictOwn
	case !req.SameWork(rec.RequestHash):
		return VerdictHashMismatch
	case rec.Status == inbox.StatusCompleted:
		return VerdictDuplicate
	case rec.Status == inbox.StatusFailedTerminal && rec.FailureCode != failure.CodeLeaseAbandoned:
		return VerdictTerminalAgain
	case rec.Status == inbox.StatusProcessing && !rec.Released() && !p.Expired(rec.LeaseExpiry, now):
		return VerdictInFlight
	}
	if end := limits.Attempts.Before(rec.Attempts, now, "", ""); end != nil {
		if end.Code == failure.CodeMaxAttempts {
			return VerdictAttemptsExhausted
		}
		return VerdictRetryWindowExpired
	}
	if rec.AbandonedLease() && rec.Takeovers >= limits.MaxTakeovers {
		return VerdictTakeoversExhausted
	}
	// FAILED_RETRYABLE, a released lease, an expired one, or an abandoned
	// lease; an unknown status is treated like FAILED_RETRYABLE, fenced by
	// the condition.
	return VerdictTakeover
}
