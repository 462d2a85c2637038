//go:build ddbworker_dev

package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/chaos"
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
	aws := testenv.AWSConfig(t) // fails unless the endpoints are the local emulators
	bin := buildDevBinary(t)
	var progress bytes.Buffer
	cfg := chaos.Config{
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
}

// The command's flags map onto chaos.Config: 0 kills or pauses means none,
// zero fault rates mean no faults.
func TestChaosFlags(t *testing.T) {
	root := newRootCmd()
	cmd, _, err := root.Find([]string{"chaos"})
	require.NoError(t, err)
	require.Equal(t, "chaos", cmd.Name())
	for flag, want := range map[string]string{"count": "10000", "workers": "4", "concurrency": "8", "kills": "20", "pauses": "3",
		"timeout": "15m0s", "visibility-timeout": "3s", "max-attempts": "20", "throttle": "0.02", "conflict": "0.02",
		"timeout-rate": "0.01", "lost-response": "0.02", "sqs-delete": "0.02", "delay": "0.005",
		"failpoints": chaos.DefaultFailpoints, "json": "false", "seed": "1"} {
		f := cmd.Flags().Lookup(flag)
		require.NotNil(t, f, flag)
		require.Equal(t, want, f.DefValue, flag)
	}
	for _, flag := range []string{"emulators-dir", "log-dir", "send-rate"} {
		require.NotNil(t, cmd.Flags().Lookup(flag), flag)
	}
}
