package gate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// TestDecide walks every row of the decision table (DESIGN §4.2) and the
// precedence between rows. Pure logic: no emulator involved.
func TestDecide(t *testing.T) {
	policy, err := stale.Policy{Lease: 30 * time.Second, Skew: 2 * time.Second}.WithDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const (
		mine     = "token-mine"
		theirs   = "token-theirs"
		hash     = "hash-A"
		other    = "hash-B"
		maxTries = 3
	)
	var (
		live         = now.Add(10 * time.Second)               // lease still running
		endedInSkew  = now.Add(-time.Second)                   // ended 1s ago: < Skew, still in flight
		endedAtSkew  = now.Add(-policy.Skew)                   // ended exactly Skew ago: not yet expired
		endedPastSkw = now.Add(-policy.Skew - time.Nanosecond) // just past the skew margin
		expired      = now.Add(-policy.Lease)                  // long gone
		past         = now.Add(-time.Minute)                   // a retryableUntil that has passed
		future       = now.Add(time.Hour)                      // a retryableUntil still ahead
		noLease      = time.Time{}                             // FAILED_* records carry no lease
	)
	const maxTakeovers = 2
	type rec struct {
		status    inbox.Status
		hash      string
		token     string
		lease     time.Time
		attempts  int
		takeovers int
	}
	tests := []struct {
		name           string
		rec            rec
		retryableUntil time.Time
		want           gate.Verdict
	}{
		// Own: our own (retried) write is already there.
		{"own token, live lease", rec{inbox.StatusProcessing, hash, mine, live, 1, 0}, time.Time{}, gate.VerdictOwn},
		{"own token even when the lease looks expired", rec{inbox.StatusProcessing, hash, mine, expired, 1, 0}, time.Time{}, gate.VerdictOwn},
		{"own token even with attempts exhausted and window passed", rec{inbox.StatusProcessing, hash, mine, live, maxTries, 0}, past, gate.VerdictOwn},
		{"own token but COMPLETED is a duplicate, not own", rec{inbox.StatusCompleted, hash, mine, noLease, 1, 0}, time.Time{}, gate.VerdictDuplicate},
		{"own token but FAILED_RETRYABLE is a takeover, not own", rec{inbox.StatusFailedRetryable, hash, mine, noLease, 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"own token but other work is a hash mismatch, not own", rec{inbox.StatusProcessing, "other-hash", mine, live, 1, 0}, time.Time{}, gate.VerdictHashMismatch},

		// Hash mismatch beats every status.
		{"hash mismatch on COMPLETED", rec{inbox.StatusCompleted, other, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch on FAILED_TERMINAL", rec{inbox.StatusFailedTerminal, other, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch on live PROCESSING", rec{inbox.StatusProcessing, other, theirs, live, 1, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch on expired PROCESSING", rec{inbox.StatusProcessing, other, theirs, expired, 1, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch on FAILED_RETRYABLE", rec{inbox.StatusFailedRetryable, other, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch beats exhausted attempts", rec{inbox.StatusFailedRetryable, other, theirs, noLease, maxTries, 0}, time.Time{}, gate.VerdictHashMismatch},
		{"hash mismatch beats a passed window", rec{inbox.StatusFailedRetryable, other, theirs, noLease, 1, 0}, past, gate.VerdictHashMismatch},

		// COMPLETED: duplicate, whatever else is true.
		{"COMPLETED is a duplicate", rec{inbox.StatusCompleted, hash, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictDuplicate},
		{"COMPLETED with attempts at max is still a duplicate", rec{inbox.StatusCompleted, hash, theirs, noLease, maxTries, 0}, time.Time{}, gate.VerdictDuplicate},
		{"COMPLETED after the window is still a duplicate", rec{inbox.StatusCompleted, hash, theirs, noLease, 1, 0}, past, gate.VerdictDuplicate},

		// FAILED_TERMINAL: terminal again, never re-run.
		{"FAILED_TERMINAL is terminal again", rec{inbox.StatusFailedTerminal, hash, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictTerminalAgain},
		{"FAILED_TERMINAL with attempts at max is terminal again", rec{inbox.StatusFailedTerminal, hash, theirs, noLease, maxTries, 0}, past, gate.VerdictTerminalAgain},

		// PROCESSING with a live lease (including the skew margin): in flight.
		{"PROCESSING live lease is in flight", rec{inbox.StatusProcessing, hash, theirs, live, 1, 0}, time.Time{}, gate.VerdictInFlight},
		{"PROCESSING that ended less than Skew ago is in flight", rec{inbox.StatusProcessing, hash, theirs, endedInSkew, 1, 0}, time.Time{}, gate.VerdictInFlight},
		{"PROCESSING that ended exactly Skew ago is in flight", rec{inbox.StatusProcessing, hash, theirs, endedAtSkew, 1, 0}, time.Time{}, gate.VerdictInFlight},
		{"PROCESSING live with attempts at max is in flight", rec{inbox.StatusProcessing, hash, theirs, live, maxTries, 0}, time.Time{}, gate.VerdictInFlight},
		{"PROCESSING live after the window is in flight", rec{inbox.StatusProcessing, hash, theirs, live, 1, 0}, past, gate.VerdictInFlight},

		// Takeover.
		{"PROCESSING just past the skew margin is taken over", rec{inbox.StatusProcessing, hash, theirs, endedPastSkw, 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"PROCESSING expired is taken over", rec{inbox.StatusProcessing, hash, theirs, expired, 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"PROCESSING expired with attempts below max", rec{inbox.StatusProcessing, hash, theirs, expired, maxTries - 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"FAILED_RETRYABLE is taken over", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"FAILED_RETRYABLE with retryableUntil ahead", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, 0}, future, gate.VerdictTakeover},
		{"PROCESSING expired with retryableUntil ahead", rec{inbox.StatusProcessing, hash, theirs, expired, 1, 0}, future, gate.VerdictTakeover},
		{"retryableUntil exactly now has not passed", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, 0}, now, gate.VerdictTakeover},
		{"unknown status is treated like FAILED_RETRYABLE", rec{inbox.Status("WEIRD"), hash, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictTakeover},

		// Attempts exhausted.
		{"PROCESSING expired with attempts = max is exhausted", rec{inbox.StatusProcessing, hash, theirs, expired, maxTries, 0}, time.Time{}, gate.VerdictAttemptsExhausted},
		{"PROCESSING expired with attempts > max is exhausted", rec{inbox.StatusProcessing, hash, theirs, expired, maxTries + 4, 0}, time.Time{}, gate.VerdictAttemptsExhausted},
		{"FAILED_RETRYABLE with attempts = max is exhausted", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, maxTries, 0}, time.Time{}, gate.VerdictAttemptsExhausted},
		{"FAILED_RETRYABLE with attempts > max is exhausted", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, maxTries + 1, 0}, time.Time{}, gate.VerdictAttemptsExhausted},
		{"exhausted attempts beat a passed window", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, maxTries, 0}, past, gate.VerdictAttemptsExhausted},

		// Retry window expired.
		{"FAILED_RETRYABLE after retryableUntil", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, 0}, past, gate.VerdictRetryWindowExpired},
		{"PROCESSING expired after retryableUntil", rec{inbox.StatusProcessing, hash, theirs, expired, 1, 0}, past, gate.VerdictRetryWindowExpired},
		{"one nanosecond after retryableUntil", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, 0}, now.Add(-time.Nanosecond), gate.VerdictRetryWindowExpired},

		// A lease given back (no token) is taken over at once, whatever its
		// expiry, and counts no takeover.
		{"released (no token) with a recent end is taken over at once", rec{inbox.StatusProcessing, hash, "", now, 0, 0}, time.Time{}, gate.VerdictTakeover},
		{"released (no token) past max takeovers is still taken over", rec{inbox.StatusProcessing, hash, "", now, 0, maxTakeovers}, time.Time{}, gate.VerdictTakeover},
		{"released by an old worker (expiry 0) is taken over", rec{inbox.StatusProcessing, hash, theirs, noLease, 1, 0}, time.Time{}, gate.VerdictTakeover},
		{"released with attempts at max is exhausted", rec{inbox.StatusProcessing, hash, "", now, maxTries, 0}, time.Time{}, gate.VerdictAttemptsExhausted},

		// Takeovers of expired leases are bounded.
		{"expired lease below max takeovers is taken over", rec{inbox.StatusProcessing, hash, theirs, expired, 0, maxTakeovers - 1}, time.Time{}, gate.VerdictTakeover},
		{"expired lease at max takeovers is exhausted", rec{inbox.StatusProcessing, hash, theirs, expired, 0, maxTakeovers}, time.Time{}, gate.VerdictTakeoversExhausted},
		{"live lease at max takeovers is still in flight", rec{inbox.StatusProcessing, hash, theirs, live, 0, maxTakeovers}, time.Time{}, gate.VerdictInFlight},
		{"FAILED_RETRYABLE at max takeovers is taken over (no lease to abandon)", rec{inbox.StatusFailedRetryable, hash, theirs, noLease, 1, maxTakeovers}, time.Time{}, gate.VerdictTakeover},
		{"exhausted attempts beat exhausted takeovers", rec{inbox.StatusProcessing, hash, theirs, expired, maxTries, maxTakeovers}, time.Time{}, gate.VerdictAttemptsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &inbox.Record{
				Status: tt.rec.status, RequestHash: tt.rec.hash, LeaseToken: tt.rec.token,
				Attempts: tt.rec.attempts, Takeovers: tt.rec.takeovers, LeaseExpiry: tt.rec.lease,
			}
			if !tt.rec.lease.IsZero() {
				r.LeaseExpiresAt = tt.rec.lease.UnixMilli()
			}
			req := &gate.Request{Work: inbox.Work{Key: "k-1", MessageType: "CaseOpened", RequestHash: hash}}
			limits := gate.Limits{Attempts: failure.Policy{MaxAttempts: maxTries, RetryableUntil: tt.retryableUntil}, MaxTakeovers: maxTakeovers}
			got := gate.Decide(policy, req, r, mine, limits, now)
			require.Equal(t, tt.want, got, "got %s, want %s", got, tt.want)
		})
	}
}

// A FAILED_TERMINAL record the sweeper marked LEASE_ABANDONED is not a
// verdict on the work: a delivery of the same work takes it over like an
// expired lease (its attempts and takeovers still bound it); every other
// terminal code ends it again.
func TestDecideLeaseAbandoned(t *testing.T) {
	policy, err := stale.Policy{}.WithDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	req := &gate.Request{Work: inbox.Work{Key: "k-1", MessageType: "CaseOpened", RequestHash: "h"}}
	tests := []struct {
		code      string
		hash      string
		attempts  int
		takeovers int
		want      gate.Verdict
	}{
		{failure.CodeLeaseAbandoned, "h", 1, 0, gate.VerdictTakeover},
		{failure.CodeLeaseAbandoned, "h", 3, 0, gate.VerdictAttemptsExhausted},
		{failure.CodeLeaseAbandoned, "h", 0, 5, gate.VerdictTakeoversExhausted},
		{failure.CodeLeaseAbandoned, "other", 1, 0, gate.VerdictHashMismatch},
		{"CASE_NOT_FOUND", "h", 1, 0, gate.VerdictTerminalAgain},
		{failure.CodeMaxAttempts, "h", 3, 0, gate.VerdictTerminalAgain},
	}
	for _, tt := range tests {
		t.Run(tt.code+"/"+tt.hash, func(t *testing.T) {
			r := &inbox.Record{Status: inbox.StatusFailedTerminal, RequestHash: tt.hash, LeaseToken: "old", Attempts: tt.attempts, Takeovers: tt.takeovers, FailureCode: tt.code}
			require.Equal(t, tt.want, gate.Decide(policy, req, r, "new", gate.Limits{Attempts: failure.Policy{MaxAttempts: 3}, MaxTakeovers: 5}, now))
		})
	}
}

func TestVerdictString(t *testing.T) {
	tests := []struct {
		v    gate.Verdict
		want string
	}{
		{gate.VerdictOwn, "own"},
		{gate.VerdictHashMismatch, "hash-mismatch"},
		{gate.VerdictDuplicate, "duplicate"},
		{gate.VerdictTerminalAgain, "terminal-again"},
		{gate.VerdictInFlight, "in-flight"},
		{gate.VerdictTakeover, "takeover"},
		{gate.VerdictAttemptsExhausted, "attempts-exhausted"},
		{gate.VerdictRetryWindowExpired, "retry-window-expired"},
		{gate.VerdictTakeoversExhausted, "takeovers-exhausted"},
		{gate.Verdict(0), "unknown"},
		{gate.Verdict(-1), "unknown"},
		{gate.Verdict(99), "unknown"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.v.String())
	}
}

func TestActionString(t *testing.T) {
	tests := []struct {
		a    gate.Action
		want string
	}{
		{gate.Acquired, "acquired"},
		{gate.Duplicate, "duplicate"},
		{gate.InFlight, "in-flight"},
		{gate.Terminal, "terminal"},
		{gate.Action(0), "unknown"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.a.String())
	}
}
