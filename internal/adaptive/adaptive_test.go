package adaptive_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/adaptive"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, cfg adaptive.Config) *adaptive.Limiter {
	t.Helper()
	l, err := adaptive.New(cfg)
	require.NoError(t, err)
	return l
}

func TestOverloadHalvesOncePerCooldown(t *testing.T) {
	l := newLimiter(t, adaptive.Config{Max: 16})
	require.Equal(t, 16, l.Limit())
	require.Equal(t, 8, l.Overloaded(t0))
	require.Equal(t, 8, l.Overloaded(t0.Add(500*time.Millisecond)), "a burst of failures counts once")
	require.Equal(t, 4, l.Overloaded(t0.Add(1500*time.Millisecond)))
	for i := range 10 {
		l.Overloaded(t0.Add(time.Duration(i+3) * time.Second))
	}
	require.Equal(t, 1, l.Limit(), "never below Min")
}

func TestAdditiveIncreaseNeverAboveMax(t *testing.T) {
	l := newLimiter(t, adaptive.Config{Max: 8})
	l.Overloaded(t0) // 4, ssthresh 4
	successes := 0
	for l.Limit() < 5 {
		l.Succeeded(t0.Add(time.Second), 0)
		successes++
	}
	require.InDelta(t, 4, successes, 1, "about one slot per limit successes above the threshold")
	for range 1000 {
		l.Succeeded(t0.Add(2*time.Second), 0)
	}
	require.Equal(t, 8, l.Limit())
}

func TestRestartSlowStart(t *testing.T) {
	l := newLimiter(t, adaptive.Config{Max: 16})
	require.Equal(t, 1, l.Restart(t0))
	var seen []int
	for range 12 {
		seen = append(seen, l.Succeeded(t0.Add(time.Second), 0))
	}
	require.Equal(t, []int{2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 8}, seen[:12], "one per success to half the old limit, then slower")
	require.Less(t, l.Limit(), 16, "no burst back to the ceiling")
}

func TestRisingLatencyShrinksGently(t *testing.T) {
	l := newLimiter(t, adaptive.Config{Max: 20})
	now := t0
	for range 100 { // a steady 10 ms baseline
		now = now.Add(10 * time.Millisecond)
		l.Succeeded(now, 10*time.Millisecond)
	}
	require.Equal(t, 20, l.Limit())
	for range 50 { // the database slows to 60 ms
		now = now.Add(60 * time.Millisecond)
		l.Succeeded(now, 60*time.Millisecond)
	}
	require.Less(t, l.Limit(), 20)
	require.Greater(t, l.Limit(), 10, "latency cuts by 10%% per cooldown, not by half")
}

func TestConfigValidation(t *testing.T) {
	_, err := adaptive.New(adaptive.Config{Max: 0, Decrease: 2, LatencyTolerance: 0.5})
	for _, want := range []string{"Min", "Decrease", "LatencyTolerance"} {
		require.ErrorContains(t, err, want)
	}
}
