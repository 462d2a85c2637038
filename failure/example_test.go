package failure_test

import (
	"fmt"
	"time"

	"github.com/ddbworker/ddbworker/failure"
)

// The attempts policy: a retryable failure stays retryable while attempts
// are left, and becomes terminal when they are used up or its code is
// listed in TerminalAfterCodes.
func ExamplePolicy() {
	now := time.Now()
	p := failure.Policy{MaxAttempts: 3, TerminalAfterCodes: []string{"CARD_DECLINED"}}
	down := failure.NewRetryable("DOWNSTREAM_DOWN", "pricing is down")
	for attempt := 1; attempt <= 3; attempt++ {
		f := p.After(down, attempt, now)
		fmt.Println(attempt, f.Kind, f.Code)
	}
	f := p.After(failure.NewRetryable("CARD_DECLINED", "declined"), 1, now)
	fmt.Println(f.Kind, f.Code)
	fmt.Println(p.Before(3, now, "", "") != nil)
	// Output:
	// 1 retryable DOWNSTREAM_DOWN
	// 2 retryable DOWNSTREAM_DOWN
	// 3 terminal MAX_ATTEMPTS_EXCEEDED
	// terminal CARD_DECLINED
	// true
}
