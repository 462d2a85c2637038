package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// The compose test needs no services; the others run against the emulators
// that testenv.Main provides (runbooks_test.go's TestMain).

// buildBinary builds the example service as a team ships it (daemon.Main
// with its handlers, no development tools: internal/dev/cmd/caseworker);
// cmd/ddbworker, the operator command line, registers no handlers.
func buildBinary(t *testing.T) string { return build(t, "../caseworker") }

// buildOperatorBinary builds bin/ddbworker (cmd/ddbworker).
func buildOperatorBinary(t *testing.T) string { return build(t, "../../../../cmd/ddbworker") }

// buildDevBinary builds bin/ddbworker-dev (internal/dev/cmd/ddbworker-dev):
// the same service with the development tools and the fault flags the
// chaos harness drives.
func buildDevBinary(t *testing.T) string { return build(t, ".") }

// build builds the command pkg into a temporary directory.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ddbworker")
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// metricSum adds up every sample of a metric family from /metrics.
func metricSum(t *testing.T, addr, family string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, family+"{") || strings.HasPrefix(line, family+" ") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err)
			sum += v
		}
	}
	return sum
}

// The daemon as users run it: configured by DDBWORKER_* variables, serving
// metrics and health, stopped by SIGTERM mid-stream (exit 0, in-flight work
// finished), restarted, and in the end every work item applied exactly once.
func TestDaemonSIGTERMAndRestart(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	bin := buildBinary(t)
	dev := buildDevBinary(t) // example traffic is a development tool
	common := append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL)

	sc := caseflow.ScenarioConfig{Messages: 120, Poison: -1, Seed: 5}
	send := exec.Command(dev, "send", "--count", "120", "--poison", "-1", "--seed", "5")
	send.Env = common
	out, err := send.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "sent 120 messages")

	run := func(addr string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, "run")
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &logs
		cmd.Env = append(common, "DDBWORKER_METRICS_ADDR="+addr, "DDBWORKER_CONCURRENCY=4", "DDBWORKER_VISIBILITY_TIMEOUT=3s",
			"DDBWORKER_WAIT_TIME=1s", "DDBWORKER_TRACK_APPLICATIONS=true", "DDBWORKER_LOG_LEVEL=info")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, &logs
	}
	addr := freeAddr(t)
	first, logs := run(addr)
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "/readyz never became ready")
	testenv.Eventually(t, 30*time.Second, func() bool { return metricSum(t, addr, "ddbworker_messages_total") >= 20 }, "no progress")
	require.Equal(t, 1.0, metricSum(t, addr, "ddbworker_build_info"), "the binary exports its version")

	require.NoError(t, first.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "SIGTERM must end the daemon cleanly; logs:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon did not stop after SIGTERM; logs:\n%s", logs.String())
	}
	require.Contains(t, logs.String(), `"msg":"worker stopped"`)
	logged := logs.String()
	signalled := strings.Index(logged, `"msg":"shutting down: receiving stopped, in-flight work draining"`)
	require.GreaterOrEqual(t, signalled, 0, "SIGTERM is logged when it arrives")
	line, _, _ := strings.Cut(logged[signalled:], "\n")
	require.Contains(t, line, "terminated", "the line names the signal")
	require.Less(t, signalled, strings.Index(logged, `"msg":"worker stopped"`), "before the drain ends")
	require.NotContains(t, logged, `"error":"<nil>"`)
	require.Contains(t, logs.String(), `"idempotencyKey"`, "one JSON log line per message")

	second, _ := run(freeAddr(t))
	plan, err := caseflow.GeneratePlan(sc)
	require.NoError(t, err)
	testenv.Eventually(t, 60*time.Second, func() bool {
		return testenv.InspectQueue(t, env.Queues.URL).Total() == 0
	}, "the restarted daemon did not drain the queue")
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	require.NoError(t, second.Wait())

	report, err := caseflow.Verify(context.Background(), env.DynamoDB, env.Table, plan, nil)
	require.NoError(t, err)
	require.True(t, report.OK(), "violations: %v", report.Violations)
	require.Equal(t, len(plan.Work), report.WorkStates["APPLIED"]+report.WorkStates["SUPERSEDED"])
}

// A queue deleted under a running daemon is a permanent receive error: the
// daemon drains and exits non-zero with the reason, instead of retrying
// forever while /readyz says ready (worker.Ready is tested in worker).
func TestDaemonExitsWhenQueueGoes(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	bin := buildBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "run")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	cmd.Env = append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL,
		"DDBWORKER_METRICS_ADDR="+addr, "DDBWORKER_WAIT_TIME=1s", "DDBWORKER_VISIBILITY_TIMEOUT=3s", "DDBWORKER_DEPTH_INTERVAL=0s")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return readyz() == http.StatusOK }, "/readyz never became ready")

	_, err := env.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(env.Queues.URL)})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "logs:\n%s", logs.String())
		require.NotZero(t, exit.ExitCode())
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon kept running without its queue; logs:\n%s", logs.String())
	}
	require.Contains(t, logs.String(), `"msg":"receive failed for good; stopping"`)
	require.Regexp(t, `(?m)^ddbworker: worker: receive from \S+ failed for good`, logs.String())
}

// A queue URL that never answers (a typo) ends the daemon after
// --startup-timeout with the reason, instead of waiting forever.
func TestDaemonStartupTimeout(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		env   []string
		want  []string
		under time.Duration
	}{
		// What no wait heals ends the start at once, naming the variable.
		{"a typo'd queue URL", []string{"DDBWORKER_QUEUE_URL=" + env.Queues.URL + "-typo"},
			[]string{"--queue-url (DDBWORKER_QUEUE_URL)", "-typo", "no such queue"}, 10 * time.Second},
		// What may heal (nothing listens yet) is retried until the timeout.
		{"an SQS that does not answer", []string{"DDBWORKER_QUEUE_URL=" + env.Queues.URL, "DDBWORKER_SQS_ENDPOINT=http://127.0.0.1:1"},
			[]string{"did not answer within --startup-timeout 2s"}, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "run", "--startup-timeout", "2s", "--metrics-addr", "")
			cmd.Env = append(append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL), tc.env...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, string(out))
			require.Equal(t, 1, exit.ExitCode())
			require.Less(t, time.Since(start), tc.under)
			for _, w := range tc.want {
				require.Contains(t, string(out), w)
			}
		})
	}
}
