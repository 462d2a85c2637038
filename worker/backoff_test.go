package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/stretchr/testify/require"
)

func TestBackoffWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Backoff
		want Backoff
		errs []string
	}{
		{"zero value gets defaults", Backoff{}, Backoff{Base: time.Second, Max: 5 * time.Minute, Jitter: 0.5}, nil},
		{"explicit values kept", Backoff{Base: 2 * time.Second, Max: time.Hour, Jitter: 0.1}, Backoff{Base: 2 * time.Second, Max: time.Hour, Jitter: 0.1}, nil},
		{"Max may equal Base", Backoff{Base: 3 * time.Second, Max: 3 * time.Second, Jitter: 1}, Backoff{Base: 3 * time.Second, Max: 3 * time.Second, Jitter: 1}, nil},
		{"Max may be 12h", Backoff{Max: 12 * time.Hour}, Backoff{Base: time.Second, Max: 12 * time.Hour, Jitter: 0.5}, nil},
		{"negative Base", Backoff{Base: -time.Second}, Backoff{}, []string{"0 < Base (-1s)"}},
		{"Max below Base", Backoff{Base: time.Minute, Max: time.Second}, Backoff{}, []string{"Base (1m0s) <= Max (1s)"}},
		{"Max below the default Base", Backoff{Max: 500 * time.Millisecond}, Backoff{}, []string{"<= Max (500ms)"}},
		{"Max beyond SQS's 12h", Backoff{Max: 12*time.Hour + time.Second}, Backoff{}, []string{"<= 12h"}},
		{"negative Jitter", Backoff{Jitter: -0.1}, Backoff{}, []string{"Jitter -0.1 must be within [0, 1]"}},
		{"Jitter above 1", Backoff{Jitter: 1.01}, Backoff{}, []string{"Jitter 1.01"}},
		{"both problems at once", Backoff{Max: 13 * time.Hour, Jitter: 2}, Backoff{}, []string{"<= 12h", "Jitter 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.WithDefaults()
			if tt.errs == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			for _, e := range tt.errs {
				require.ErrorContains(t, err, e)
			}
		})
	}
}

var backoffConfigs = []struct {
	name string
	b    Backoff
}{
	{"defaults", Backoff{}},
	{"large jitter", Backoff{Base: 2 * time.Second, Max: time.Minute, Jitter: 0.9}},
	{"sub-second base", Backoff{Base: 300 * time.Millisecond, Max: 10 * time.Minute, Jitter: 0.25}},
	{"12h cap", Backoff{Base: time.Minute, Max: 12 * time.Hour, Jitter: 0.99}},
}

func mustDefaults(t *testing.T, b Backoff) Backoff {
	t.Helper()
	b, err := b.WithDefaults()
	require.NoError(t, err)
	return b
}

// uncapped reports whether retry n's exponential step is still below the
// cap (Max before the jitter stretch, Max/(1+Jitter)).
func uncapped(b Backoff, n int) bool {
	return float64(b.Base)*float64(uint64(1)<<min(n-1, 40)) < float64(b.Max)/(1+b.Jitter)
}

// TestBackoffDelayGrows: with Jitter < 1 every step is longer than the one
// before until the cap — for the same draw, and even from the longest
// stretch of step n to the shortest of step n+1 — and constant after it.
func TestBackoffDelayGrows(t *testing.T) {
	us := []float64{0, 0.999}
	for _, tc := range backoffConfigs {
		t.Run(tc.name, func(t *testing.T) {
			b := mustDefaults(t, tc.b)
			require.Less(t, b.Jitter, 1.0)
			for _, u := range us {
				for n := 1; n < 60; n++ {
					cur, next := b.Delay(n, u), b.Delay(n+1, u)
					if uncapped(b, n+1) {
						require.Greater(t, next, cur, "u=%v n=%d", u, n)
					} else if !uncapped(b, n) {
						require.Equal(t, cur, next, "u=%v n=%d: constant at the cap", u, n)
					}
				}
			}
			for n := 1; uncapped(b, n+1); n++ {
				require.Greater(t, b.Delay(n+1, 0), b.Delay(n, 0.999), "n=%d: the shortest next step beats the longest current one", n)
			}
		})
	}
}

func TestBackoffDelayValues(t *testing.T) {
	b := mustDefaults(t, Backoff{})
	tests := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0.5, 4 * time.Second * 5 / 4},
		{8, 0, 128 * time.Second},
		{9, 0, 200 * time.Second},    // the step is capped at Max/(1+Jitter)…
		{9, 1, 5 * time.Minute},      // …so the stretched delay reaches Max, never more
		{10, 0.5, 250 * time.Second}, // and capped steps still spread out
		{0, 0, time.Second},          // n < 1 counts as the first retry
		{-7, 0.5, 1250 * time.Millisecond},
		{1 << 30, 0, 200 * time.Second}, // no overflow for absurd n
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, b.Delay(tt.n, tt.u), "n=%d u=%v", tt.n, tt.u)
	}
}

// TestBackoffDelayBounds: no delay exceeds Max (nor SQS's 12h).
func TestBackoffDelayBounds(t *testing.T) {
	for _, tc := range backoffConfigs {
		b := mustDefaults(t, tc.b)
		for n := 1; n <= 100; n++ {
			require.LessOrEqual(t, b.Delay(n, 0), b.Max, "%s n=%d", tc.name, n)
			require.LessOrEqual(t, b.Delay(n, 0.999), maxVisibility, "%s n=%d", tc.name, n)
			require.LessOrEqual(t, b.Delay(n, 0.999), time.Duration(float64(b.Max)*(1+b.Jitter)), "%s n=%d", tc.name, n)
		}
	}
	b := mustDefaults(t, Backoff{Base: time.Hour, Max: 12 * time.Hour, Jitter: 1})
	require.Equal(t, maxVisibility, b.Delay(50, 1), "at the cap the full stretch lands on Max = SQS's ceiling")
	require.Equal(t, 6*time.Hour, b.Delay(50, 0))
}

func TestBackoffDelayRespectsMax(t *testing.T) {
	for _, tc := range backoffConfigs {
		b := mustDefaults(t, tc.b)
		for n := 1; n <= 60; n++ {
			require.LessOrEqual(t, b.Delay(n, 0.999), b.Max, "%s n=%d", tc.name, n)
		}
	}
}

// TestBackoffDelayWholeSeconds: delay (with real randomness) is what goes
// to ChangeMessageVisibility: whole seconds, at least one.
func TestBackoffDelayWholeSeconds(t *testing.T) {
	for _, tc := range backoffConfigs {
		b := mustDefaults(t, tc.b)
		for n := 0; n <= 40; n++ {
			for range 20 {
				d := b.delay(n)
				require.GreaterOrEqual(t, d, time.Second, "%s n=%d", tc.name, n)
				require.Zero(t, d%time.Second, "%s n=%d: %s is not whole seconds", tc.name, n, d)
				require.LessOrEqual(t, d, b.Delay(n, 0.999999)+time.Second, "%s n=%d", tc.name, n)
				require.LessOrEqual(t, d, maxVisibility)
			}
		}
	}
	tiny := mustDefaults(t, Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	require.Equal(t, time.Second, tiny.delay(1), "never below one second")
}

func TestVisibilitySeconds(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{12 * time.Hour, 43200},
		{13 * time.Hour, 43200},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, visibilitySeconds(tt.in), "%s", tt.in)
	}
}

// Zero sets a field whose zero value means "the default" to an explicit
// zero; every other negative value stays an error.
func TestZeroIsExplicit(t *testing.T) {
	b, err := Backoff{Jitter: Zero}.WithDefaults()
	require.NoError(t, err)
	require.Zero(t, b.Jitter)
	require.Equal(t, 4*time.Second, b.Delay(3, 0.99), "no stretch without jitter")
	_, err = Backoff{Jitter: -0.5}.WithDefaults()
	require.ErrorContains(t, err, "Jitter -0.5")

	require.Equal(t, 3, withDefault(0, 3))
	require.Equal(t, 0, withDefault(Zero, 3))
	require.Equal(t, 7, withDefault(7, 3))
	require.Equal(t, time.Duration(0), withDefault(time.Duration(Zero), time.Second))
	require.Equal(t, time.Second, withDefault(time.Duration(0), time.Second))

	w, err := New(Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: oneRoute()},
		Config{Store: inbox.Store{Table: "t"}, QueueURL: "q", DLQURL: "d", ClockSkew: Zero, MaxGuardRetries: Zero, DeleteFlushInterval: Zero, DrainTimeout: Zero})
	require.NoError(t, err)
	require.Zero(t, w.policy.Skew)
	require.Zero(t, w.cfg.MaxGuardRetries)
	require.Zero(t, w.cfg.DeleteFlushInterval)
	require.Zero(t, w.cfg.DrainTimeout)
	_, err = New(Deps{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}, Handlers: oneRoute()}, Config{Store: inbox.Store{Table: "t"}, QueueURL: "q", DLQURL: "d", DrainTimeout: -time.Second})
	require.ErrorContains(t, err, "must not be negative")
}

func oneRoute() *ddbworker.Registry {
	r := ddbworker.NewRegistry()
	_ = r.Register("T", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) { return ddbworker.Result{}, nil }))
	return r
}
