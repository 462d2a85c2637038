package failure

import (
	"fmt"
	"slices"
	"time"

	"github.com/ddbworker/ddbworker/inbox"
)

// DefaultMaxAttempts is the business-attempt limit when a message's
// attemptPolicy sets none: the worker's, the gate's and the test kit's.
const DefaultMaxAttempts = 5

// Policy says when retrying ends. It is the one attempts policy: the gate
// asks it before a takeover starts another business attempt (Before), the
// worker after an attempt failed (After). Attempts are counted in the inbox
// record, never trusted from SQS's receive count.
type Policy struct {
	// MaxAttempts is the business-attempt limit; at least 1.
	MaxAttempts int
	// RetryableUntil, when set, ends retries once it has passed.
	RetryableUntil time.Time
	// TerminalAfterCodes end retries at once when an attempt fails with one
	// of them.
	TerminalAfterCodes []string
}

// Before says whether another attempt may start when used attempts are
// spent, at now: nil, or the terminal failure that ends the work
// (MAX_ATTEMPTS_EXCEEDED, RETRY_WINDOW_EXPIRED). lastCode and lastMessage,
// the record's last failure, are quoted in the message when set.
func (p Policy) Before(used int, now time.Time, lastCode, lastMessage string) *Error {
	last := ""
	if lastCode != "" {
		last = "; last failure " + lastCode + ": " + lastMessage
	}
	switch {
	case used >= p.MaxAttempts:
		return NewTerminal(CodeMaxAttempts, fmt.Sprintf("%d of %d business attempts used%s", used, p.MaxAttempts, last))
	case !p.RetryableUntil.IsZero() && now.After(p.RetryableUntil):
		return NewTerminal(CodeRetryWindowExpired, "retryableUntil "+inbox.FormatTime(p.RetryableUntil)+" has passed"+last)
	}
	return nil
}

// After returns f, the failure of business attempt number attempt, made
// terminal when the policy ends retries: its code is in TerminalAfterCodes,
// the attempts are used up, or the retry window has passed. A terminal f is
// returned as it is.
func (p Policy) After(f *Error, attempt int, now time.Time) *Error {
	if f == nil || f.IsTerminal() {
		return f
	}
	if slices.Contains(p.TerminalAfterCodes, f.Code) {
		return &Error{Kind: Terminal, Code: f.Code, Message: f.Message + " (code listed in terminalAfterCodes)", Err: f.Err}
	}
	if end := p.Before(attempt, now, f.Code, f.Message); end != nil {
		end.Err = f
		return end
	}
	return f
}
