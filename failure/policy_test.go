package failure_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
)

func TestPolicyBeforeAndAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	retry := failure.NewRetryable("DOWNSTREAM_DOWN", "pricing is down")
	tests := []struct {
		name       string
		p          failure.Policy
		used       int
		f          *failure.Error
		wantBefore string // "" = may start
		wantAfter  string // the code After returns
		wantKind   failure.Kind
	}{
		{"attempts left", failure.Policy{MaxAttempts: 3}, 2, retry, "", "DOWNSTREAM_DOWN", failure.Retryable},
		{"attempts used up", failure.Policy{MaxAttempts: 3}, 3, retry, failure.CodeMaxAttempts, failure.CodeMaxAttempts, failure.Terminal},
		{"window passed", failure.Policy{MaxAttempts: 9, RetryableUntil: now.Add(-time.Second)}, 1, retry, failure.CodeRetryWindowExpired, failure.CodeRetryWindowExpired, failure.Terminal},
		{"window exactly now", failure.Policy{MaxAttempts: 9, RetryableUntil: now}, 1, retry, "", "DOWNSTREAM_DOWN", failure.Retryable},
		{"attempts beat the window", failure.Policy{MaxAttempts: 1, RetryableUntil: now.Add(-time.Second)}, 1, retry, failure.CodeMaxAttempts, failure.CodeMaxAttempts, failure.Terminal},
		{"terminalAfterCodes", failure.Policy{MaxAttempts: 9, TerminalAfterCodes: []string{"DOWNSTREAM_DOWN"}}, 1, retry, "", "DOWNSTREAM_DOWN", failure.Terminal},
		{"terminal stays as it is", failure.Policy{MaxAttempts: 1}, 5, failure.NewTerminal("CASE_NOT_FOUND", "x"), failure.CodeMaxAttempts, "CASE_NOT_FOUND", failure.Terminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.p.Before(tt.used, now, "", "")
			if tt.wantBefore == "" {
				require.Nil(t, before)
			} else {
				require.NotNil(t, before)
				require.Equal(t, tt.wantBefore, before.Code)
				require.True(t, before.IsTerminal())
			}
			after := tt.p.After(tt.f, tt.used, now)
			require.Equal(t, tt.wantAfter, after.Code)
			require.Equal(t, tt.wantKind, after.Kind)
			if after.Code == failure.CodeMaxAttempts {
				require.Contains(t, after.Message, "last failure DOWNSTREAM_DOWN: pricing is down")
			}
		})
	}
}
