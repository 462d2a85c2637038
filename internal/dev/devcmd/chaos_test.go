package devcmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/chaos"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// The chaos run, short: real worker processes (the binary built from this
// package) SIGKILLed, restarted and paused past their visibility timeout,
// every fault kind injected at a high rate, failpoint kills — and in the
// end the exactly-once invariant holds, read back from DynamoDB and SQS.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and runs for about a minute")
	}
	chaosShort(t, false)
}

// The same with the stage changes on the single-write route: their fence
// and application counters in the case item, their outcomes in the logs,
// a hash-mismatch probe refused by the fence.
func TestChaosSingleWriteShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and runs for about a minute")
	}
	rep := chaosShort(t, true)
	require.True(t, rep.SingleWrite)
	require.Positive(t, rep.SingleWriteStages["APPLIED, no record"], "stage changes applied on the fresh path: %v", rep.SingleWriteStages)
	require.True(t, slices.ContainsFunc(rep.Checks, func(c chaos.Check) bool { return strings.Contains(c.Name, "single-write") && c.OK }),
		"the single-write check ran: %v", rep.Checks)
	require.Positive(t, rep.Logs.Outcomes["superseded"], "out-of-order stage changes were superseded")
	require.Positive(t, rep.Rejections["IDEMPOTENCY_HASH_MISMATCH"])
	// Kills, pauses and lost deletes hit stage changes between their write
	// and their ack: redelivered, they took the gated path (a record) and
	// the fence answered — duplicate, or superseded once a newer version
	// had applied (the route's account of "not applied by this delivery").
	require.Positive(t, rep.Logs.Redelivered["CaseStageChanged"]["duplicate"]+rep.SingleWriteStages["APPLIED, record COMPLETED SUPERSEDED"],
		"a single-write stage change redelivered after it applied: %v; %v", rep.Logs.Redelivered["CaseStageChanged"], rep.SingleWriteStages)
}

func chaosShort(t *testing.T, singleWrite bool) *chaos.Report {
	aws := testenv.AWSConfig(t) // fails unless the endpoints are the local emulators
	bin := buildDevBinary(t)
	var progress bytes.Buffer
	cfg := chaos.Config{
		SingleWrite:      singleWrite,
		Binary:           bin,
		DynamoDBEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		SQSEndpoint:      os.Getenv("AWS_ENDPOINT_URL_SQS"),
		AWS:              aws,
		Count:            400,
		Seed:             21,
		SendRate:         40, // ten seconds of traffic while the killer works
		Workers:          3,
		Concurrency:      8,
		Kills:            4,
		Pauses:           1,
		KillEveryMin:     500 * time.Millisecond,
		KillEveryMax:     2 * time.Second,
		// High enough that every kind fires on a few hundred messages;
		// throttles and timeouts are mostly absorbed by the SDK's retries.
		Faults:     chaos.Faults{Throttle: 0.05, Conflict: 0.05, Timeout: 0.05, LostResponse: 0.05, SQSDelete: 0.1, Delay: 0.05},
		Failpoints: "after-gate=0.005,after-commit=0.005,before-delete=0.005,mid-batch=0.005",
		Timeout:    110 * time.Second,
		LogDir:     t.TempDir(),
		Progress:   &progress,
	}
	rep, err := chaos.Run(context.Background(), cfg)
	require.NoError(t, err, "progress:\n%s", progress.String())
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	explain := func() string {
		logs, _ := os.ReadFile(cfg.LogDir + "/workers.log")
		if len(logs) > 20000 {
			logs = logs[len(logs)-20000:]
		}
		return "progress:\n" + progress.String() + "\nreport:\n" + out.String() + "\nlast worker log lines:\n" + string(logs)
	}

	require.Equal(t, "HOLDS", rep.Verdict, explain())
	require.True(t, rep.OK(), explain())
	require.False(t, rep.TimedOut)
	require.Empty(t, rep.Violations)
	require.NotEmpty(t, rep.Checks)
	for _, c := range rep.Checks {
		require.True(t, c.OK, "check %q: %s\n%s", c.Name, c.Detail, explain())
	}
	require.Empty(t, rep.UnexpectedExits)

	require.GreaterOrEqual(t, rep.HarnessKills, 4)
	require.GreaterOrEqual(t, rep.Pauses, 1)
	require.GreaterOrEqual(t, rep.ProcessesStarted, 3+rep.HarnessKills+rep.Logs.FailpointKillTotal())
	for _, kind := range []string{"throttle", "transaction_conflict", "timeout", "lost_response", "sqs_error", "delay"} {
		require.Positive(t, rep.Logs.Faults[kind], "fault %s never fired: %v", kind, rep.Logs.Faults)
	}

	// caseflow.GeneratePlan makes Count minus its CASE_NOT_FOUND items
	// messages; the check "every plan message was sent" holds the harness
	// to the plan's own count.
	require.InDelta(t, 400, rep.Sent, 10)
	require.Equal(t, rep.SentPhase1+rep.SentPhase2, rep.Sent)
	require.GreaterOrEqual(t, float64(rep.Duplicates)/float64(rep.Sent), 0.25)
	require.Positive(t, rep.Logs.Outcomes["applied"])
	require.Positive(t, rep.Logs.Outcomes["duplicate"])
	require.Positive(t, rep.Logs.Outcomes["terminal"])
	require.Equal(t, rep.DLQ.Expected, rep.DLQ.Sources)
	require.Zero(t, rep.QueueLeft)
	require.Equal(t, rep.WorkItems, rep.WorkStates["APPLIED"]+rep.WorkStates["SUPERSEDED"]+rep.WorkStates["FAILED_TERMINAL:CASE_NOT_FOUND"])
	return rep
}

// The command's flags map onto chaos.Config: 0 kills or pauses means none,
// zero fault rates mean no faults.
func TestChaosFlags(t *testing.T) {
	root := daemon.Command(daemon.App{Extension: Extension()})
	cmd, _, err := root.Find([]string{"chaos"})
	require.NoError(t, err)
	require.Equal(t, "chaos", cmd.Name())
	for flag, want := range map[string]string{"count": "10000", "workers": "4", "concurrency": "8", "kills": "20", "pauses": "3",
		"timeout": "15m0s", "visibility-timeout": "3s", "max-attempts": "20", "throttle": "0.02", "conflict": "0.02",
		"timeout-rate": "0.01", "lost-response": "0.02", "sqs-delete": "0.02", "delay": "0.005",
		"failpoints": chaos.DefaultFailpoints, "json": "false", "seed": "1", "single-write": "false", "max-receive-count": "0", "outage": "false",
		"outage-throttle": "2m30s", "outage-5xx": "1m30s", "outage-hang": "1m0s", "outage-recover": "2m0s", "outage-rate": "1", "outage-gap": "10s"} {
		f := cmd.Flags().Lookup(flag)
		require.NotNil(t, f, flag)
		require.Equal(t, want, f.DefValue, flag)
	}
	for _, flag := range []string{"emulators-dir", "log-dir", "send-rate"} {
		require.NotNil(t, cmd.Flags().Lookup(flag), flag)
	}
}

// --outage: a window of 0 is skipped, and the flags left at the kill-heavy
// run's defaults take the outage run's; flags given stay as given.
func TestChaosOutageFlags(t *testing.T) {
	base := chaos.Config{Faults: chaos.DefaultFaults(), Kills: 5, Pauses: 3, Visibility: 3 * time.Second, Timeout: 15 * time.Minute,
		Failpoints: chaos.DefaultFailpoints, Outage: chaos.Outage{Enabled: true, Throttle: 150 * time.Second, ServerError: 0, Hang: 60 * time.Second}}
	none := func(string) bool { return false }
	got := chaosConfig(base, none)
	require.Equal(t, time.Duration(-1), got.Outage.ServerError, "0 skips the window")
	require.Equal(t, 150*time.Second, got.Outage.Throttle)
	require.Zero(t, got.Visibility, "the outage run's default")
	require.Zero(t, got.Timeout, "the outage run's default")
	require.Empty(t, got.Failpoints, "the outage run's default: none")
	require.Equal(t, 5, got.Kills)

	given := chaosConfig(base, func(f string) bool { return f == "visibility-timeout" || f == "failpoints" })
	require.Equal(t, 3*time.Second, given.Visibility)
	require.Equal(t, chaos.DefaultFailpoints, given.Failpoints)

	base.Outage.Enabled = false
	plain := chaosConfig(base, none)
	require.Equal(t, 3*time.Second, plain.Visibility, "without --outage nothing changes")
	require.Equal(t, chaos.DefaultFailpoints, plain.Failpoints)
	require.Equal(t, 15*time.Minute, plain.Timeout)
}

// The outage run, short: two worker processes reach DynamoDB Local through
// the harness's fault proxy; after a warm-up with kills, every DynamoDB
// request is throttled for 12 s, then answered 5xx for 12 s, then held
// unanswered for 12 s (each window after 10 s of quiet), while traffic
// keeps arriving, and the queue's maxReceiveCount is the realistic 10. Each
// window must show the database health gate at work — the workers pause
// (a health transition each way) and make few requests — and a deploy in
// its middle (workers SIGTERMed and restarted), and the run must
// dead-letter no healthy message, end no work item terminal for
// infrastructure reasons, drain within the bound after each window, and
// keep the exactly-once invariant.
func TestChaosOutageShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and runs for about three minutes")
	}
	aws := testenv.AWSConfig(t) // fails unless the endpoints are the local emulators
	bin := buildDevBinary(t)
	var progress bytes.Buffer
	const window, rate = 12 * time.Second, 4.0
	cfg := chaos.Config{
		Binary:           bin,
		DynamoDBEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		SQSEndpoint:      os.Getenv("AWS_ENDPOINT_URL_SQS"),
		AWS:              aws,
		Count:            300,
		Seed:             33,
		Workers:          2,
		Concurrency:      8,
		Kills:            2,
		Pauses:           -1,
		KillEveryMin:     500 * time.Millisecond,
		KillEveryMax:     2 * time.Second,
		Outage: chaos.Outage{Enabled: true, Throttle: window, ServerError: window, Hang: window,
			// A window's mid-window deploy leaves the replaced workers'
			// parked messages hidden for up to ParkVisibility (1 min) after
			// their last renewal, and their successors wait out the
			// outage in the startup check: 90 s bounds the drain.
			Recover: 90 * time.Second,
			// Enough traffic that each worker has several calls failing at
			// once early in a short window, hanging calls included (the
			// detector needs 5 failures within 10 s; the adaptive limit
			// halves the calls in flight after the first): the pause shows
			// in every window. The full run sends 1 message/s.
			Rate: rate},
		// Each window drains in up to 90 s after its mid-window deploy
		// (the replaced workers' parked messages stay hidden for
		// ParkVisibility, by design): about 3 minutes in all, more on a
		// loaded machine.
		Timeout:  540 * time.Second,
		LogDir:   t.TempDir(),
		Progress: &progress,
	}
	rep, err := chaos.Run(context.Background(), cfg)
	require.NoError(t, err, "progress:\n%s", progress.String())
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	explain := func() string {
		logs, _ := os.ReadFile(cfg.LogDir + "/workers.log")
		if len(logs) > 20000 {
			logs = logs[len(logs)-20000:]
		}
		return "progress:\n" + progress.String() + "\nreport:\n" + out.String() + "\nlast worker log lines:\n" + string(logs)
	}

	require.Equal(t, "HOLDS", rep.Verdict, explain())
	require.False(t, rep.TimedOut)
	require.Empty(t, rep.Violations)
	for _, c := range rep.Checks {
		require.True(t, c.OK, "check %q: %s\n%s", c.Name, c.Detail, explain())
	}
	names := make([]string, len(rep.Checks))
	for i, c := range rep.Checks {
		names[i] = c.Name
	}
	for _, want := range []string{"no healthy message dead-lettered by the redrive policy (maxReceiveCount 10)",
		"no work item terminal for infrastructure reasons", "DynamoDB requests during each window ≤ 5 per second per worker",
		"a deploy replaced the workers in the middle of each window",
		fmt.Sprintf("queue drained within %s after each window", cfg.Outage.Recover), "every sent message reached a final outcome (worker logs)"} {
		require.Contains(t, names, want)
	}
	require.Empty(t, rep.UnexpectedExits)
	require.GreaterOrEqual(t, rep.HarnessKills, 2)
	require.Equal(t, 10, rep.MaxReceiveCount)
	require.Zero(t, rep.DeadLettered)
	require.Zero(t, rep.DLQ.Redriven)
	require.Zero(t, rep.QueueLeft)

	o := rep.Outage
	require.NotNil(t, o)
	require.Positive(t, o.WarmupSent)
	require.Equal(t, 10*time.Second, o.Gap, "the workers' health window")
	require.Len(t, o.Windows, 3)
	for i, name := range []string{chaos.WindowThrottle, chaos.WindowServerError, chaos.WindowHang} {
		w := o.Windows[i]
		require.Equal(t, name, w.Name)
		require.GreaterOrEqual(t, w.Duration, window, name)
		require.Equal(t, int(window.Seconds()*rate), w.Sent, "%s: traffic kept arriving during the window", name)
		require.Positive(t, w.Requests, "%s: the workers probe", name)
		require.LessOrEqual(t, w.RequestRate, 5.0, "%s: requests/s per worker\n%s", name, explain())
		require.Positive(t, w.Unhealthy, "%s: the health gate tripped\n%s", name, explain())
		// The deploy in the window's middle happened: it waits for a slot's
		// successor rather than skip a slot whose worker just exited.
		require.GreaterOrEqual(t, w.Deployed, 1, "%s: a worker was replaced (SIGTERM, restart) mid-window\n%s", name, explain())
		// The fleet serves again: a paused worker resumed, or the successor
		// the deploy started in its place passed its startup checks.
		require.Positive(t, w.Healthy+w.Started, "%s: the fleet recovered\n%s", name, explain())
		require.Equal(t, w.WorkersPaused, w.WorkersResumed, "%s: every paused worker slot serves again", name)
		require.Zero(t, w.DeadLettered, name)
		require.Zero(t, w.TerminalInfra, name)
		require.LessOrEqual(t, w.Recovered, cfg.Outage.Recover, name)
		require.Less(t, w.MaxReceiveCount, 10, "%s: no message came near maxReceiveCount", name)
	}
}

// buildDevBinary builds bin/ddbworker-dev: the ddbworker service with the
// development tools and the fault flags the chaos harness drives.
func buildDevBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ddbworker-dev")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/ddbworker-dev").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}
