package judge_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

func TestOf(t *testing.T) {
	guard := func(k mutation.VerdictKind, code, outcome string) error {
		return &mutation.GuardError{Index: 2, Verdict: mutation.Verdict{Kind: k, Code: code, Outcome: outcome}}
	}
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for _, tc := range []struct {
		name      string
		err       error
		outcome   string
		run       int
		kind      judge.Kind
		code      string
		terminal  bool
		infra     bool
		wantOut   string
		wantGuard int
	}{
		{"applied", nil, "", 0, judge.Applied, "", false, false, "APPLIED", -1},
		{"applied with the handler's outcome", nil, "INVOICED", 0, judge.Applied, "", false, false, "INVOICED", -1},
		{"superseded by a guard", guard(mutation.Supersede, "", ""), "", 0, judge.Superseded, "", false, false, "SUPERSEDED", 2},
		{"superseded with the guard's outcome", guard(mutation.Supersede, "", "ALREADY_EXISTS"), "", 0, judge.Superseded, "", false, false, "ALREADY_EXISTS", 2},
		{"a Fail guard is terminal with its code", guard(mutation.Fail, "CASE_NOT_FOUND", ""), "", 0, judge.Failed, "CASE_NOT_FOUND", true, false, "", 2},
		{"a Rerun guard re-runs while runs are left", guard(mutation.Retry, "", ""), "", 2, judge.Rerun, "", false, false, "", 2},
		{"a Rerun guard with no runs left fails retryably", guard(mutation.Retry, "", ""), "", 3, judge.Failed, failure.CodeConcurrentModification, false, false, "", 2},
		{"a handler's own failure as it is", failure.NewTerminal("BAD", "no"), "", 0, judge.Failed, "BAD", true, false, "", -1},
		{"any other error is HANDLER_ERROR", errors.New("boom"), "", 0, judge.Failed, failure.CodeHandlerError, false, false, "", -1},
		{"throttling is infrastructure", fmt.Errorf("read: %w", throttled), "", 0, judge.Failed, failure.CodeThrottled, false, true, "", -1},
		{"a deadline is infrastructure", context.DeadlineExceeded, "", 0, judge.Failed, failure.CodeTimeout, false, true, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judge.Of(tc.err, tc.outcome, tc.run, judge.DefaultMaxReruns)
			require.Equal(t, tc.kind, j.Kind)
			require.Equal(t, tc.wantGuard, j.Guard)
			if tc.kind == judge.Applied || tc.kind == judge.Superseded {
				require.Equal(t, tc.wantOut, j.Outcome)
			}
			if tc.kind == judge.Failed {
				require.Equal(t, tc.code, j.Failure.Code)
				require.Equal(t, tc.terminal, j.Failure.IsTerminal())
				require.Equal(t, tc.infra, j.Failure.Infrastructure())
			}
		})
	}
}

func TestAttempt(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	p := failure.Policy{MaxAttempts: 3, TerminalAfterCodes: []string{"NEVER_AGAIN"}}
	throttle := failure.NewRetryable(failure.CodeThrottled, "x")
	require.Same(t, throttle, judge.Attempt(throttle, p, 3, now), "infrastructure trouble is never an attempt: not made terminal")
	require.False(t, judge.Attempt(failure.NewRetryable("DOWN", "x"), p, 2, now).IsTerminal())
	end := judge.Attempt(failure.NewRetryable("DOWN", "x"), p, 3, now)
	require.Equal(t, failure.CodeMaxAttempts, end.Code)
	require.True(t, judge.Attempt(failure.NewRetryable("NEVER_AGAIN", "x"), p, 1, now).IsTerminal())
}

func TestPolicyAndUndecodable(t *testing.T) {
	until := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	env := &envelope.Envelope{AttemptPolicy: &envelope.AttemptPolicy{MaxBusinessAttempts: 7, RetryableUntil: &until, TerminalAfterCodes: []string{"X"}}}
	require.Equal(t, failure.Policy{MaxAttempts: 7, RetryableUntil: until, TerminalAfterCodes: []string{"X"}}, judge.Policy(env, 5))
	require.Equal(t, failure.Policy{MaxAttempts: 5}, judge.Policy(&envelope.Envelope{}, 5))

	_, err := (*envelope.Decoder)(nil).Decode([]byte("not json"))
	f := judge.Undecodable(err)
	require.True(t, f.IsTerminal())
	require.Equal(t, string(envelope.CodeInvalidJSON), f.Code)
	require.ErrorIs(t, f, err)
	require.Equal(t, failure.CodeHandlerError, judge.Undecodable(errors.New("other")).Code)
}
