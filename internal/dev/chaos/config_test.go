package chaos

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFailpoints(t *testing.T) {
	got, err := ParseFailpoints(" after-gate=0.01, mid-batch=1 ,before-delete=0")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"after-gate": 0.01, "mid-batch": 1, "before-delete": 0}, got)
	require.Equal(t, "after-gate=0.01,mid-batch=1", formatFailpoints(got))

	got, err = ParseFailpoints("")
	require.NoError(t, err)
	require.Empty(t, got)

	for _, bad := range []string{"after-gate", "nowhere=0.1", "after-gate=x", "after-gate=1.5", "after-gate=-0.1", "after-gate=0.1,"} {
		_, err := ParseFailpoints(bad)
		require.Error(t, err, bad)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{Binary: "/bin/true"}
	require.NoError(t, c.defaults())
	require.Equal(t, 10000, c.Count)
	require.Equal(t, 4, c.Workers)
	require.Equal(t, 8, c.Concurrency)
	require.Equal(t, 20, c.MaxAttempts)
	require.Equal(t, 3*time.Second, c.Visibility)
	require.Equal(t, 1000, c.MaxReceiveCount)
	require.Equal(t, 20, c.Kills)
	require.Equal(t, 3, c.Pauses)
	require.Equal(t, 15*time.Minute, c.Timeout)
	require.Equal(t, DefaultFailpoints, c.Failpoints)
	want := DefaultFaults()
	want.DelayDuration = 4 * time.Second
	require.Equal(t, want, c.Faults, "the delay outlasts the visibility timeout")

	none := Config{Binary: "/bin/true", NoFaults: true, Failpoints: "none", Kills: -1, Pauses: -1}
	require.NoError(t, none.defaults())
	require.Zero(t, none.Faults.Throttle+none.Faults.Conflict+none.Faults.Timeout+none.Faults.LostResponse+none.Faults.SQSDelete+none.Faults.Delay)
	require.Empty(t, none.Failpoints)
	require.Zero(t, none.Kills)
	require.Zero(t, none.Pauses)

	for name, bad := range map[string]Config{
		"no binary":       {},
		"few duplicates":  {Binary: "x", DuplicateRatio: 0.1},
		"one worker":      {Binary: "x", Workers: 1},
		"odd visibility":  {Binary: "x", Visibility: 1500 * time.Millisecond},
		"fault rate":      {Binary: "x", Faults: Faults{Throttle: 0.9}},
		"failpoint":       {Binary: "x", Failpoints: "somewhere=0.1"},
		"receive count":   {Binary: "x", MaxReceiveCount: 5000},
		"kill range":      {Binary: "x", KillEveryMin: 2 * time.Second, KillEveryMax: time.Second},
		"too few message": {Binary: "x", Count: 10},
	} {
		require.Error(t, bad.defaults(), name)
	}
}

func TestWorkerArgs(t *testing.T) {
	c := Config{Binary: "/bin/true", Failpoints: "after-commit=0.01,mid-batch=0"}
	require.NoError(t, c.defaults())
	args := strings.Join(c.workerArgs(77), " ")
	for _, want := range []string{"run ", "--track-applications", "--visibility-timeout 3s", "--clock-skew 500ms", "--wait-time 1s",
		"--metrics-addr= ", "--concurrency 8", "--max-attempts 20", "--fault-seed 77", "--fault-throttle 0.02",
		"--fault-conflict 0.02", "--fault-timeout 0.01", "--fault-lost-response 0.02", "--fault-sqs-delete 0.02",
		"--fault-delay 0.005", "--fault-delay-duration 4s", "--failpoint-kill after-commit=0.01"} {
		require.Contains(t, args, want)
	}
	require.NotContains(t, args, "mid-batch", "zero rates are left out")

	require.NotContains(t, args, "--single-write")

	c = Config{Binary: "/bin/true", Failpoints: "none", SingleWrite: true}
	require.NoError(t, c.defaults())
	args = strings.Join(c.workerArgs(1), " ")
	require.NotContains(t, args, "--failpoint-kill")
	require.Contains(t, args, "--single-write")
	require.Contains(t, args, "--track-applications", "the stage changes' counters live in the case item")
}

func TestReport(t *testing.T) {
	r := &Report{Sent: 10, SentPhase1: 9, SentPhase2: 1, Duplicates: 3, LogDir: "/tmp/x",
		Logs: Snapshot{Faults: map[string]int{"throttle": 2}, FailpointKills: map[string]int{"after-gate": 1}, Outcomes: map[string]int{"applied": 7}}}
	r.check("first", nil)
	r.finish()
	require.True(t, r.OK())
	require.Equal(t, "HOLDS", r.Verdict)
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"messages sent (phase 1 + phase 2)  10 (9 + 1)", "faults injected throttle", "failpoint kills after-gate",
		"first  ok", "exactly-once invariant under chaos  HOLDS", "/tmp/x/workers.log"} {
		require.Contains(t, out.String(), want)
	}

	many := make([]string, 25)
	for i := range many {
		many[i] = "v"
	}
	r.check("second", many)
	r.finish()
	require.False(t, r.OK())
	require.Equal(t, "VIOLATED", r.Verdict)
	require.Equal(t, Check{Name: "second", Detail: "25"}, r.Checks[1])
	require.Len(t, r.Violations, 21, "20 violations and a summary line")
	out.Reset()
	r.Print(&out)
	require.Contains(t, out.String(), "second  FAILED (25)")
	require.Contains(t, out.String(), "VIOLATION: … and 5 more")

	out.Reset()
	require.NoError(t, r.WriteJSON(&out))
	var back map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	require.Equal(t, "VIOLATED", back["verdict"])

	timedOut := &Report{TimedOut: true}
	timedOut.finish()
	require.False(t, timedOut.OK())
}

func TestWarnings(t *testing.T) {
	r := &Report{Sent: 100, Logs: Snapshot{
		ErrorCodes: map[string]int{"AWS.SimpleQueueService.TooManyEntriesInBatchRequest": 25, "AWS.SimpleQueueService.InternalError": 3},
		Events:     map[string]int{"delete gave up; the redelivery will be a duplicate": 28},
	}, StopProblems: []string{"w1.2 did not stop"}}
	w := warnings(r)
	require.Len(t, w, 3)
	require.Contains(t, w[0], "25 failures with AWS.SimpleQueueService.TooManyEntriesInBatchRequest")
	require.Contains(t, w[1], "28 deletes were abandoned for 100 messages")
	require.Equal(t, "stop: w1.2 did not stop", w[2])

	require.Empty(t, warnings(&Report{Sent: 10000, Logs: Snapshot{Events: map[string]int{"delete gave up; the redelivery will be a duplicate": 3}}}))

	r.Warnings = w
	r.finish()
	require.True(t, r.OK(), "warnings do not fail the verdict")
	var out bytes.Buffer
	r.Print(&out)
	require.Contains(t, out.String(), "WARNING: the workers logged 25 failures")
	require.Contains(t, out.String(), "error code AWS.SimpleQueueService.TooManyEntriesInBatchRequest")
}
