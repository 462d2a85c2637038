package health

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// buckets is how many slices the window is cut into.
const buckets = 10

// The defaults of Config and Probes.
const (
	DefaultWindow       = 10 * time.Second
	DefaultMinFailures  = 5
	DefaultFailureRatio = 0.5
	DefaultConsecutive  = 3
	DefaultProbeInitial = 2 * time.Second
	DefaultProbeMax     = 15 * time.Second
	DefaultProbeFactor  = 1.5
	DefaultProbeJitter  = 0.2
)

// Config configures a Detector.
type Config struct {
	// Window is how far back outcomes count. Default: 10s.
	Window time.Duration
	// MinFailures is the fewest failures in the window that trip it.
	// Default: 5.
	MinFailures int
	// FailureRatio is the least share of failures among the window's calls
	// that trips it, in (0, 1]. Default: 0.5.
	FailureRatio float64
	// Consecutive failures in a row trip it while the window is sparse:
	// while it holds fewer than twice MinFailures calls (a busy window is
	// judged by MinFailures and FailureRatio alone). Default: 3.
	Consecutive int
}

// WithDefaults fills zero fields and validates.
func (c Config) WithDefaults() (Config, error) {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MinFailures == 0 {
		c.MinFailures = DefaultMinFailures
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultFailureRatio
	}
	if c.Consecutive == 0 {
		c.Consecutive = DefaultConsecutive
	}
	if c.Consecutive < 1 {
		return c, fmt.Errorf("health: Consecutive %d must be at least 1", c.Consecutive)
	}
	var errs []error
	if c.Window < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("health: Window %s must be at least 100ms", c.Window))
	}
	if c.MinFailures < 1 {
		errs = append(errs, fmt.Errorf("health: MinFailures %d must be at least 1", c.MinFailures))
	}
	if c.FailureRatio <= 0 || c.FailureRatio > 1 {
		errs = append(errs, fmt.Errorf("health: FailureRatio %v must be within (0, 1]", c.FailureRatio))
	}
	return c, errors.Join(errs...)
}

type bucket struct {
	start      time.Time
	ok, failed int
}

// Detector is a sliding window of call outcomes. It is safe for concurrent
// use.
type Detector struct {
	cfg   Config
	width time.Duration
	mu    sync.Mutex
	b     [buckets]bucket
	run   int // failures in a row
}

// New returns a Detector for cfg (zero fields take their defaults).
func New(cfg Config) (*Detector, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return &Detector{cfg: cfg, width: cfg.Window / buckets}, nil
}

// Config is the configuration in effect.
func (d *Detector) Config() Config { return d.cfg }

// slot returns the bucket for now, emptied if it held an older slice.
func (d *Detector) slot(now time.Time) *bucket {
	start := now.Truncate(d.width)
	b := &d.b[(start.UnixNano()/int64(d.width))%buckets]
	if !b.start.Equal(start) {
		*b = bucket{start: start}
	}
	return b
}

// Record adds one call's outcome at now and reports whether the window now
// says the database is unhealthy.
func (d *Detector) Record(now time.Time, failed bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.slot(now)
	if failed {
		b.failed++
		d.run++
	} else {
		b.ok++
		d.run = 0
	}
	calls, failures := d.counts(now)
	// Failures in a row judge only a sparse window (calls that hang are
	// few); a busy window is judged by its counts, or a worker would pause
	// for a short run of bad luck among many good calls.
	sparse := calls < 2*d.cfg.MinFailures
	return (sparse && d.run >= d.cfg.Consecutive) || d.trips(calls, failures)
}

// Counts returns the calls and failures in the window ending at now.
func (d *Detector) Counts(now time.Time) (calls, failures int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts(now)
}

func (d *Detector) counts(now time.Time) (calls, failures int) {
	oldest := now.Add(-d.cfg.Window)
	for _, b := range d.b {
		if b.start.IsZero() || !b.start.After(oldest) || b.start.After(now) {
			continue
		}
		calls += b.ok + b.failed
		failures += b.failed
	}
	return calls, failures
}

func (d *Detector) trips(calls, failures int) bool {
	return failures >= d.cfg.MinFailures && float64(failures) >= d.cfg.FailureRatio*float64(calls)
}

// Reset forgets every outcome (after a recovery, the window starts afresh).
func (d *Detector) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.b = [buckets]bucket{}
	d.run = 0
}

// Probes is the schedule of health probes while the database is unhealthy:
// the first after Initial, each later one Factor times longer, never longer
// than Max, each stretched or shrunk by up to Jitter at random so a fleet's
// probes spread out.
type Probes struct {
	// Initial is the wait before the first probe. Default: 2s.
	Initial time.Duration
	// Max caps the wait between probes. Default: 15s.
	Max time.Duration
	// Factor grows the wait after each failed probe. Default: 1.5.
	Factor float64
	// Jitter is the random spread, a fraction in [0, 1). Default: 0.2.
	Jitter float64
}

// WithDefaults fills zero fields and validates.
func (p Probes) WithDefaults() (Probes, error) {
	if p.Initial == 0 {
		p.Initial = DefaultProbeInitial
	}
	if p.Max == 0 {
		p.Max = DefaultProbeMax
	}
	if p.Factor == 0 {
		p.Factor = DefaultProbeFactor
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultProbeJitter
	}
	var errs []error
	if p.Initial <= 0 || p.Max < p.Initial {
		errs = append(errs, fmt.Errorf("health: probes need 0 < Initial (%s) <= Max (%s)", p.Initial, p.Max))
	}
	if p.Factor < 1 {
		errs = append(errs, fmt.Errorf("health: probe Factor %v must be at least 1", p.Factor))
	}
	if p.Jitter < 0 || p.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("health: probe Jitter %v must be within [0, 1)", p.Jitter))
	}
	return p, errors.Join(errs...)
}

// Wait is the wait before probe n (n ≥ 1: n-1 probes have failed), given u
// in [0, 1) (pass rand.Float64()).
func (p Probes) Wait(n int, u float64) time.Duration {
	d := float64(p.Initial) * math.Pow(p.Factor, float64(max(0, min(n-1, 60))))
	d = min(d, float64(p.Max))
	d *= 1 + p.Jitter*(2*u-1)
	return time.Duration(d)
}
