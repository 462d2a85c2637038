package chaos

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/ddbproxy"
)

func TestOutageDefaults(t *testing.T) {
	c := Config{Binary: "/bin/true", Outage: Outage{Enabled: true}}
	require.NoError(t, c.defaults())
	require.Equal(t, Outage{Enabled: true, Throttle: 150 * time.Second, ServerError: 90 * time.Second, Hang: 60 * time.Second,
		Recover: 2 * time.Minute, Rate: 1, MaxRequestRate: 5, Gap: 10 * time.Second}, c.Outage)
	require.Equal(t, 10, c.MaxReceiveCount, "the realistic maxReceiveCount")
	require.Equal(t, 10*time.Second, c.Visibility, "longer than the workers' call timeout")
	require.Empty(t, c.Failpoints, "no failpoint kills during windows")
	require.Equal(t, 20, c.Kills)
	require.Equal(t, 15*time.Minute+3*10*time.Second+300*time.Second+3*2*time.Minute, c.Timeout, "room for every window, its quiet lead and its drain")
	require.Equal(t, 300, c.Outage.windowMessages())
	require.Equal(t, []window{{WindowThrottle, ddbproxy.Throttle, 150 * time.Second}, {WindowServerError, ddbproxy.ServerError, 90 * time.Second},
		{WindowHang, ddbproxy.Hang, 60 * time.Second}}, c.Outage.windows())

	// Explicit settings win; a negative window is skipped.
	c = Config{Binary: "/bin/true", MaxReceiveCount: 5, Visibility: 6 * time.Second, Failpoints: "after-gate=0.01",
		Outage: Outage{Enabled: true, Throttle: 12 * time.Second, ServerError: -1, Hang: 10 * time.Second, Rate: 2.5}}
	require.NoError(t, c.defaults())
	require.Equal(t, 5, c.MaxReceiveCount)
	require.Equal(t, 6*time.Second, c.Visibility)
	require.Equal(t, "after-gate=0.01", c.Failpoints)
	require.Equal(t, []string{WindowThrottle, WindowHang}, []string{c.Outage.windows()[0].Name, c.Outage.windows()[1].Name})
	require.Equal(t, 30+25, c.Outage.windowMessages())
	require.Equal(t, 10*time.Second, c.Outage.Gap)

	// The quiet time follows the workers' health window; negative: none.
	c = Config{Binary: "/bin/true", HealthWindow: 4 * time.Second, Outage: Outage{Enabled: true}}
	require.NoError(t, c.defaults())
	require.Equal(t, 4*time.Second, c.Outage.Gap)
	c = Config{Binary: "/bin/true", Outage: Outage{Enabled: true, Gap: -1}}
	require.NoError(t, c.defaults())
	require.Zero(t, c.Outage.Gap)

	for name, bad := range map[string]Config{
		"every window skipped":              {Binary: "x", Outage: Outage{Enabled: true, Throttle: -1, ServerError: -1, Hang: -1}},
		"short window":                      {Binary: "x", Outage: Outage{Enabled: true, Hang: 500 * time.Millisecond}},
		"rate":                              {Binary: "x", Outage: Outage{Enabled: true, Rate: -1}},
		"recover":                           {Binary: "x", Outage: Outage{Enabled: true, Recover: -time.Second}},
		"visibility below the call timeout": {Binary: "x", Visibility: 3 * time.Second, Outage: Outage{Enabled: true}},
		"too few messages":                  {Binary: "x", Count: 300, Outage: Outage{Enabled: true}},
	} {
		require.Error(t, bad.defaults(), name)
	}

	off := Config{Binary: "/bin/true"}
	require.NoError(t, off.defaults())
	require.Equal(t, Outage{}, off.Outage, "no outage: nothing changes")
	require.Equal(t, 1000, off.MaxReceiveCount)
}

func TestWorkerHealthArgs(t *testing.T) {
	c := Config{Binary: "/bin/true", CallTimeout: 2 * time.Second, HealthMinFailures: 3, HealthWindow: 5 * time.Second, ProbeMaxInterval: 4 * time.Second}
	require.NoError(t, c.defaults())
	args := strings.Join(c.workerArgs(1), " ")
	for _, want := range []string{"--call-timeout 2s", "--health-min-failures 3", "--health-window 5s", "--probe-max-interval 4s"} {
		require.Contains(t, args, want)
	}
	c = Config{Binary: "/bin/true"}
	require.NoError(t, c.defaults())
	require.NotContains(t, strings.Join(c.workerArgs(1), " "), "--call-timeout", "the worker's defaults")
}

func TestPeakRate(t *testing.T) {
	require.Zero(t, peakRate([]int{0}, 10))
	require.InDelta(t, 2.0, peakRate([]int{0, 2, 4, 6}, 10), 1e-9, "shorter than the span: the average")
	// 40 requests in the first 4 seconds, then one every 2 seconds.
	samples := []int{0, 10, 20, 30, 40, 40, 41, 41, 42, 42, 43, 43, 44, 44, 45, 45, 46}
	require.InDelta(t, 4.3, peakRate(samples, 10), 1e-9, "seconds 0..10")
}

func TestInfraTerminal(t *testing.T) {
	for _, tc := range []struct {
		code, message string
		want          bool
	}{
		{"THROTTLED", "", true},
		{"SERVICE_UNAVAILABLE", "", true},
		{"TIMEOUT", "", true},
		{"TRANSACTION_CONFLICT", "", true},
		{"SHUTDOWN", "", true},
		{"MAX_ATTEMPTS_EXCEEDED", "20 of 20 business attempts used; last failure THROTTLED: operation error DynamoDB: PutItem", true},
		{"RETRY_WINDOW_EXPIRED", "retryableUntil 2026-01-01T00:00:00.000Z has passed; last failure TIMEOUT: deadline", true},
		{"MAX_ATTEMPTS_EXCEEDED", "5 of 5 business attempts used; last failure HANDLER_ERROR: boom", false},
		{"MAX_ATTEMPTS_EXCEEDED", "5 of 5 business attempts used", false},
		{"CASE_NOT_FOUND", "last failure THROTTLED: quoted, but not an attempts verdict", false},
		{"INVALID_ENVELOPE", "", false},
	} {
		require.Equal(t, tc.want, InfraTerminal(tc.code, tc.message), "%s %q", tc.code, tc.message)
	}
}

func TestOutageVerdictAttribution(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := WindowReport{start: t0, end: t0.Add(10 * time.Second), drained: t0.Add(25 * time.Second)}
	require.True(t, w.contains(t0))
	require.True(t, w.contains(t0.Add(20*time.Second)), "the drain after the window belongs to it")
	require.True(t, w.contains(t0.Add(25*time.Second)))
	require.False(t, w.contains(t0.Add(-time.Millisecond)))
	require.False(t, w.contains(t0.Add(26*time.Second)))
}

func TestOutageReportPrint(t *testing.T) {
	r := &Report{MaxReceiveCount: 10, Outage: &OutageReport{MaxReceiveCount: 10, Rate: 1, RecoverBound: 2 * time.Minute, MaxRequestRate: 5, Gap: 10 * time.Second,
		WarmupSent: 1700, WarmupDrained: 61 * time.Second, Windows: []WindowReport{
			{Name: WindowThrottle, Mode: "Throttle", Duration: 150 * time.Second, Sent: 150, Requests: 240, RequestsByOp: map[string]int{"PutItem": 240},
				RequestRate: 0.4, PeakRequestRate: 3.1, Unhealthy: 4, Healthy: 4, WorkersPaused: 4, WorkersResumed: 4, Recovered: 31 * time.Second},
			{Name: WindowHang, Mode: "Hang", Duration: 60 * time.Second, Sent: 60, Requests: 30, RequestsByOp: map[string]int{"PutItem": 28, "UpdateItem": 2},
				RequestRate: 0.125, Recovered: 20 * time.Second},
		}}}
	r.check("first", nil)
	r.finish()
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"OUTAGE PHASES", "window throttle hang", "proxy answers Throttle Hang", "PutItem 240 28",
		"UpdateItem 0 2", "requests/s per worker (bound 5) 0.40 0.12", "health transitions unhealthy / healthy 4 / 4 0 / 0",
		"drained after the window's end (bound 2m0s) 31s 20s", "warm-up: messages sent (drained in) 1700 (1m1s)", "traffic during each window (quiet before each) 1 messages/s (10s)",
		"exactly-once invariant and outage bounds under chaos HOLDS"} {
		require.Contains(t, squeeze(out.String()), want)
	}
	out.Reset()
	require.NoError(t, r.WriteJSON(&out))
	var back struct {
		Outage struct {
			Windows []map[string]any `json:"windows"`
		} `json:"outage"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	require.Len(t, back.Outage.Windows, 2)
	require.Equal(t, "throttle", back.Outage.Windows[0]["name"])
	require.InDelta(t, 0.4, back.Outage.Windows[0]["requestsPerSecondPerWorker"], 1e-9)
}

// squeeze collapses runs of spaces (the table's alignment) to one.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		lines[i] = strings.Join(f, " ")
	}
	return strings.Join(lines, "\n")
}
