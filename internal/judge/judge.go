package judge

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
)

// Kind is what a run came to.
type Kind int

const (
	// Applied: the writes commit; the work completes with Run.Outcome.
	Applied Kind = iota + 1
	// Superseded: a guard judged the work obsolete; nothing of the commit
	// applies and the work completes with Run.Outcome.
	Superseded
	// Rerun: a guard with the Rerun policy failed (an optimistic race
	// lost): the handler runs again.
	Rerun
	// Failed: Run.Failure; Failure.Infrastructure() says whether it is
	// trouble with the infrastructure (no business attempt counted) or a
	// business failure (Attempt says how the policy takes it).
	Failed
	// Duplicate: a single-write route's fence shows the work applied
	// already; nothing of the commit applies and the work completes as
	// applied (Run.Outcome APPLIED).
	Duplicate
)

func (k Kind) String() string {
	switch k {
	case Applied:
		return "applied"
	case Superseded:
		return "superseded"
	case Rerun:
		return "rerun"
	case Failed:
		return "failed"
	case Duplicate:
		return "duplicate"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Run is the judgement of one handler run and its commit.
type Run struct {
	Kind    Kind
	Outcome string         // Applied, Superseded: the inbox outcome
	Failure *failure.Error // Failed
	// Guard is the index of the write whose guard decided (Superseded,
	// Rerun, or Failed by a Fail guard, or by reruns used up); -1 when
	// none did.
	Guard int
}

// Of judges a run: err is the handler's error, or its commit's (a
// *mutation.GuardError when a domain guard cancelled the transaction), or
// nil when the commit applied with outcome (the handler's Result.Outcome).
// run numbers the handler's runs within the attempt (0 first); a Rerun
// guard re-runs it while run < maxReruns, after which the lost race fails
// retryably with CONCURRENT_MODIFICATION. Any other error is classified
// (failure.Classify): a *failure.Error as it is, AWS throttling, 5xx and
// timeouts as infrastructure trouble, anything else retryable
// HANDLER_ERROR.
func Of(err error, outcome string, run, maxReruns int) Run {
	if err == nil {
		return Run{Kind: Applied, Outcome: cmp.Or(outcome, inbox.OutcomeApplied), Guard: -1}
	}
	var ge *mutation.GuardError
	if !errors.As(err, &ge) {
		return Run{Kind: Failed, Failure: failure.Classify(err, failure.CodeHandlerError), Guard: -1}
	}
	switch ge.Verdict.Kind {
	case mutation.Supersede:
		return Run{Kind: Superseded, Outcome: cmp.Or(ge.Verdict.Outcome, inbox.OutcomeSuperseded), Guard: ge.Index}
	case mutation.Duplicate:
		return Run{Kind: Duplicate, Outcome: inbox.OutcomeApplied, Guard: ge.Index}
	case mutation.Fail:
		return Run{Kind: Failed, Guard: ge.Index,
			Failure: failure.NewTerminal(ge.Verdict.Code, cmp.Or(ge.Verdict.Message, fmt.Sprintf("domain write %d failed its condition", ge.Index)))}
	}
	if run < maxReruns {
		return Run{Kind: Rerun, Guard: ge.Index}
	}
	return Run{Kind: Failed, Guard: ge.Index, Failure: failure.Wrap(failure.Retryable, failure.CodeConcurrentModification, err)}
}

// Attempt is the failure f of business attempt number attempt as it is
// recorded: made terminal when policy ends retries (its code is in
// terminalAfterCodes, the attempts are used up, the retry window has
// passed at now). Infrastructure trouble is returned as it is: it is never
// recorded as an attempt.
func Attempt(f *failure.Error, policy failure.Policy, attempt int, now time.Time) *failure.Error {
	if f.Infrastructure() {
		return f
	}
	return policy.After(f, attempt, now)
}

// DefaultMaxReruns is how often a Rerun guard re-runs the handler within
// one attempt unless the worker is configured otherwise
// (worker.Config.MaxGuardRetries).
const DefaultMaxReruns = 3

// Policy is the attempts policy of env's work: its attemptPolicy, with
// maxAttempts when the envelope sets no maxBusinessAttempts.
func Policy(env *envelope.Envelope, maxAttempts int) failure.Policy {
	p := failure.Policy{MaxAttempts: maxAttempts}
	if ap := env.AttemptPolicy; ap != nil {
		p.MaxAttempts = cmp.Or(ap.MaxBusinessAttempts, maxAttempts)
		p.TerminalAfterCodes = ap.TerminalAfterCodes
		if ap.RetryableUntil != nil {
			p.RetryableUntil = *ap.RetryableUntil
		}
	}
	return p
}

// Undecodable is the terminal failure of a body the envelope decoder
// refused: its *envelope.Error's code (HANDLER_ERROR for another error).
func Undecodable(err error) *failure.Error {
	code := failure.CodeHandlerError
	var ee *envelope.Error
	if errors.As(err, &ee) {
		code = string(ee.Code)
	}
	return &failure.Error{Kind: failure.Terminal, Code: code, Message: err.Error(), Err: err}
}
