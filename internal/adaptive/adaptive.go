package adaptive

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Config configures a Limiter.
type Config struct {
	// Max is the ceiling (the configured concurrency). Required.
	Max int
	// Min is the floor. Default: 1.
	Min int
	// Decrease multiplies the limit on overload, in (0, 1). Default: 0.5.
	Decrease float64
	// Cooldown is the least time between two decreases. Default: 1s.
	Cooldown time.Duration
	// LatencyTolerance: latency above this multiple of the baseline counts
	// as the database slowing. Default: 2.
	LatencyTolerance float64
	// BaselineWindow is the time constant of the latency baseline.
	// Default: 1m.
	BaselineWindow time.Duration
}

// WithDefaults fills zero fields and validates.
func (c Config) WithDefaults() (Config, error) {
	if c.Min == 0 {
		c.Min = 1
	}
	if c.Decrease == 0 {
		c.Decrease = 0.5
	}
	if c.Cooldown == 0 {
		c.Cooldown = time.Second
	}
	if c.LatencyTolerance == 0 {
		c.LatencyTolerance = 2
	}
	if c.BaselineWindow == 0 {
		c.BaselineWindow = time.Minute
	}
	var errs []error
	if c.Min < 1 || c.Max < c.Min {
		errs = append(errs, fmt.Errorf("adaptive: need 1 <= Min (%d) <= Max (%d)", c.Min, c.Max))
	}
	if c.Decrease <= 0 || c.Decrease >= 1 {
		errs = append(errs, fmt.Errorf("adaptive: Decrease %v must be within (0, 1)", c.Decrease))
	}
	if c.Cooldown < 0 || c.BaselineWindow <= 0 {
		errs = append(errs, errors.New("adaptive: Cooldown must not be negative and BaselineWindow must be positive"))
	}
	if c.LatencyTolerance <= 1 {
		errs = append(errs, fmt.Errorf("adaptive: LatencyTolerance %v must be above 1", c.LatencyTolerance))
	}
	return c, errors.Join(errs...)
}

// minSamples is how many latencies the baseline needs before it judges.
const minSamples = 20

// shortWindow is the time constant of the recent-latency average.
const shortWindow = time.Second

// Limiter computes the limit. It is safe for concurrent use.
type Limiter struct {
	cfg          Config
	mu           sync.Mutex
	limit        float64
	ssthresh     float64
	lastDecrease time.Time
	short, base  float64 // seconds, time-decayed averages
	lastSample   time.Time
	samples      int
}

// New returns a Limiter at Max.
func New(cfg Config) (*Limiter, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return &Limiter{cfg: cfg, limit: float64(cfg.Max), ssthresh: float64(cfg.Max)}, nil
}

// Limit is the current limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.intLimit()
}

func (l *Limiter) intLimit() int { return int(math.Floor(l.limit)) }

// Succeeded records a call that succeeded at now. latency, when positive,
// feeds the latency signal (pass commit latencies only: one kind of call,
// one baseline). It returns the new limit.
func (l *Limiter) Succeeded(now time.Time, latency time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if latency > 0 && l.observe(now, latency.Seconds()) {
		l.decrease(now, 0.9)
		return l.intLimit()
	}
	if l.limit < l.ssthresh {
		l.limit++
	} else {
		l.limit += 1 / l.limit
	}
	l.limit = min(l.limit, float64(l.cfg.Max))
	return l.intLimit()
}

// observe updates the latency averages and reports whether recent latency
// is above tolerance.
func (l *Limiter) observe(now time.Time, s float64) bool {
	if l.samples == 0 {
		l.short, l.base = s, s
	} else {
		dt := max(now.Sub(l.lastSample), time.Millisecond).Seconds()
		a := 1 - math.Exp(-dt/shortWindow.Seconds())
		b := 1 - math.Exp(-dt/l.cfg.BaselineWindow.Seconds())
		l.short += a * (s - l.short)
		l.base += b * (s - l.base)
	}
	l.samples++
	l.lastSample = now
	return l.samples >= minSamples && l.short > l.cfg.LatencyTolerance*l.base
}

// Overloaded records throttling, a 5xx or a timeout at now and returns the
// new limit.
func (l *Limiter) Overloaded(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decrease(now, l.cfg.Decrease)
	return l.intLimit()
}

func (l *Limiter) decrease(now time.Time, factor float64) {
	if !l.lastDecrease.IsZero() && now.Sub(l.lastDecrease) < l.cfg.Cooldown {
		return
	}
	l.lastDecrease = now
	l.limit = max(float64(l.cfg.Min), math.Floor(l.limit*factor))
	l.ssthresh = l.limit
}

// Restart drops the limit to Min after an outage; it grows back by one per
// success up to half the limit before the outage, then additively.
func (l *Limiter) Restart(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ssthresh = max(float64(l.cfg.Min), math.Floor(max(l.limit, l.ssthresh)/2))
	l.limit = float64(l.cfg.Min)
	l.lastDecrease = now
	return l.intLimit()
}
