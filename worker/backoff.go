package worker

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// maxVisibility is SQS's ceiling for a visibility timeout.
const maxVisibility = 12 * time.Hour

// The defaults of Backoff.
const (
	DefaultBackoffBase   = time.Second
	DefaultBackoffMax    = 5 * time.Minute
	DefaultBackoffJitter = 0.5
)

// Backoff spaces retries: Base·2^(n-1), stretched by up to Jitter (a
// fraction) at random so failures that happened together do not retry
// together, and never longer than Max. With Jitter < 1 each step is longer
// than the one before, until the cap.
type Backoff struct {
	// Base is the first delay. Default: DefaultBackoffBase. SQS counts visibility in whole
	// seconds, so delays round up to seconds.
	Base time.Duration
	// Max caps the delay. Default: DefaultBackoffMax. At most 12h (SQS's limit).
	Max time.Duration
	// Jitter is the random stretch, a fraction in [0, 1]. Default:
	// DefaultBackoffJitter; Zero for none.
	Jitter float64
}

// WithDefaults returns b with every zero field set to its default, and
// every problem with the result, joined.
func (b Backoff) WithDefaults() (Backoff, error) {
	b.Base = cmp.Or(b.Base, DefaultBackoffBase)
	b.Max = cmp.Or(b.Max, DefaultBackoffMax)
	b.Jitter = withDefault(b.Jitter, DefaultBackoffJitter)
	var errs []error
	if b.Base < 0 || b.Max < b.Base || b.Max > maxVisibility {
		errs = append(errs, fmt.Errorf("worker: Backoff needs 0 < Base (%s) <= Max (%s) <= 12h", b.Base, b.Max))
	}
	if b.Jitter < 0 || b.Jitter > 1 {
		errs = append(errs, fmt.Errorf("worker: Backoff.Jitter %v must be within [0, 1]", b.Jitter))
	}
	return b, errors.Join(errs...)
}

// Delay is the wait before retry n (n ≥ 1), given u in [0, 1) (pass
// rand.Float64()).
func (b Backoff) Delay(n int, u float64) time.Duration {
	if n < 1 {
		n = 1
	}
	// Cap the step before stretching it, so the stretched delay never
	// exceeds Max and steps at the cap still spread out.
	d := float64(b.Base) * math.Pow(2, float64(min(n-1, 40)))
	d = min(d, float64(b.Max)/(1+b.Jitter))
	d *= 1 + b.Jitter*u
	return min(time.Duration(d), maxVisibility)
}

// delay is Delay with fresh randomness, truncated to whole seconds (SQS's
// unit) and at least one second. Truncating, not rounding up, keeps each
// step longer than the one before when Jitter < 1.
func (b Backoff) delay(n int) time.Duration {
	return max(time.Second, b.Delay(n, rand.Float64()).Truncate(time.Second))
}

// visibilitySeconds rounds d up to whole seconds within SQS's range.
func visibilitySeconds(d time.Duration) int32 {
	s := int32(math.Ceil(d.Seconds()))
	return max(0, min(s, int32(maxVisibility/time.Second)))
}
