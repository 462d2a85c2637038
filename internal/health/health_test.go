package health_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/health"
)

func TestDetector(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	type call struct {
		at     time.Duration
		failed bool
	}
	calls := func(at time.Duration, n int, failed bool) []call {
		out := make([]call, n)
		for i := range out {
			out[i] = call{at: at, failed: failed}
		}
		return out
	}
	interleave := func(at time.Duration, n int) []call { // failure, success, failure, …
		var out []call
		for i := range n {
			out = append(out, call{at: at, failed: true})
			if i < n-1 {
				out = append(out, call{at: at, failed: false})
			}
		}
		return out
	}
	join := func(parts ...[]call) []call {
		var out []call
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls []call
		trips bool
	}{
		{"four failures are not enough", interleave(0, 4), false},
		{"five failures in a row trip", calls(0, 5, true), true},
		{"five failures among many successes do not", join(calls(0, 20, false), interleave(time.Second, 5)), false},
		{"three failures in a row do not trip a busy window", join(calls(0, 100, false), calls(time.Second, 3, true)), false},
		{"three failures in a row trip a sparse window", join(calls(0, 2, false), calls(time.Second, 3, true)), true},
		{"slow failures: three in a row over 15 s trip", []call{{0, true}, {5 * time.Second, true}, {10 * time.Second, true}}, true},
		{"half of the window failing trips", join(calls(0, 6, false), calls(time.Second, 6, true)), true},
		{"failures spread beyond the window do not add up", join(interleave(0, 4), interleave(11*time.Second, 4)), false},
		{"old successes leave the window", join(calls(0, 100, false), calls(10500*time.Millisecond, 5, true)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := health.New(health.Config{})
			require.NoError(t, err)
			tripped := false
			for _, c := range tc.calls {
				tripped = d.Record(t0.Add(c.at), c.failed)
			}
			require.Equal(t, tc.trips, tripped)
		})
	}
}

func TestDetectorCountsAndReset(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	d, err := health.New(health.Config{Window: time.Second, MinFailures: 2, FailureRatio: 1, Consecutive: 10})
	require.NoError(t, err)
	d.Record(t0, false)
	d.Record(t0.Add(100*time.Millisecond), true)
	calls, failures := d.Counts(t0.Add(200 * time.Millisecond))
	require.Equal(t, 2, calls)
	require.Equal(t, 1, failures)
	require.False(t, d.Record(t0.Add(300*time.Millisecond), true), "ratio 1 needs every call failed")
	calls, _ = d.Counts(t0.Add(2 * time.Second))
	require.Zero(t, calls, "everything left the window")
	d.Record(t0.Add(3*time.Second), true)
	d.Reset()
	calls, _ = d.Counts(t0.Add(3 * time.Second))
	require.Zero(t, calls)
}

func TestConfigValidation(t *testing.T) {
	_, err := health.New(health.Config{Window: time.Millisecond, MinFailures: -1, FailureRatio: 2})
	require.Error(t, err)
	for _, want := range []string{"Window", "MinFailures", "FailureRatio"} {
		require.ErrorContains(t, err, want)
	}
	_, err = health.Probes{Initial: time.Second, Max: time.Millisecond, Factor: 0.5, Jitter: 1}.WithDefaults()
	for _, want := range []string{"Initial", "Factor", "Jitter"} {
		require.ErrorContains(t, err, want)
	}
}

func TestProbeSchedule(t *testing.T) {
	p, err := health.Probes{}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, p.Wait(1, 0.5), "no jitter at u=0.5")
	require.Equal(t, 3*time.Second, p.Wait(2, 0.5))
	require.Equal(t, 15*time.Second, p.Wait(20, 0.5), "capped")
	prev := time.Duration(0)
	for n := 1; n < 30; n++ {
		lo, hi := p.Wait(n, 0), p.Wait(n, 0.999999)
		require.GreaterOrEqual(t, lo, time.Duration(float64(p.Initial)*0.8), "n=%d", n)
		require.LessOrEqual(t, hi, time.Duration(float64(p.Max)*1.2), "n=%d", n)
		mid := p.Wait(n, 0.5)
		require.GreaterOrEqual(t, mid, prev, "waits never shrink (n=%d)", n)
		prev = mid
	}
}
