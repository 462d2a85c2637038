package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// The production binaries link nothing of the development tooling — no
// package under internal/dev/ (fault injection, the harnesses, the
// development commands) or ddbworkertest/ (the test kits, the emulators) —
// and of example/ only the domain it runs. The libraries a team's binary
// links (daemon, lambda) link none of it: their dependency graphs hold
// nothing under internal/dev/, ddbworkertest/ or example/. None of them
// links gRPC or golang.org/x/net/trace (which gRPC imports; otlptracehttp
// imports gRPC): x/net/trace's init reaches html/template, whose
// MethodByName makes the linker keep every exported method of every type.
// development commands), ddbworkertest/ (the test kits, the emulators),
// example/, or the core's test support (the example domains, the
// emulator environment, the fault injectors) — and of the example domain
// only caseworker, the example service, links its domain. The libraries a
// team's binary links (daemon, lambda) link none of it.
func TestProductionDependencies(t *testing.T) {
	const module = "github.com/ddbworker/ddbworker/"
	testSupport := []string{"internal/caseflow", "internal/invoices", "internal/testenv", "internal/faults", "internal/ddbproxy",
		"internal/payments", "internal/spanrec"}
	for _, tc := range []struct {
		pkg     string
		allowed []string // test support and internal/dev packages it may link
	}{
		{"../../../../cmd/ddbworker", nil},
		{"../caseworker", []string{module + "internal/caseflow", module + "internal/dev/caseapp", module + "internal/dev/cmd/caseworker"}},
		{"../../../../daemon", nil},
		{"../../../../lambda", nil},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tc.pkg).Output()
			require.NoError(t, err, "go list -deps %s", tc.pkg)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, module+"worker", "go list -deps %s lists the module's packages", tc.pkg)
			for _, dep := range deps {
				require.Falsef(t, dep == "golang.org/x/net/trace" || dep == "google.golang.org/grpc" || strings.HasPrefix(dep, "google.golang.org/grpc/"),
					"%s links %s: it reaches text/template's MethodByName, which keeps every exported method (+16 MB; see maxBinarySize)", tc.pkg, dep)
				rel, ours := strings.CutPrefix(dep, module)
				if !ours {
					continue
				}
				if strings.HasPrefix(rel, "internal/dev/") {
					require.Containsf(t, tc.allowed, dep, "%s links %s: development tooling", tc.pkg, dep)
				}
				require.Falsef(t, rel == "ddbworkertest" || strings.HasPrefix(rel, "ddbworkertest/"), "%s links %s: a test kit", tc.pkg, dep)
				require.Falsef(t, strings.HasPrefix(rel, "example/"), "%s links %s: an example", tc.pkg, dep)
				for _, ts := range testSupport {
					if rel == ts || strings.HasPrefix(rel, ts+"/") {
						require.Containsf(t, tc.allowed, dep, "%s links %s: test support", tc.pkg, dep)
					}
				}
			}
		})
	}
}

// faultEnv turns every fault on — in a binary that has fault injection:
// every DynamoDB call throttled, and a SIGKILL right after the gate.
var faultEnv = []string{"DDBWORKER_FAULT_THROTTLE=1", "DDBWORKER_FAILPOINT_KILL=after-gate=1", "DDBWORKER_FAULT_SEED=3"}

// A production binary (the example service as a team ships it,
// internal/dev/cmd/caseworker; and for the flags cmd/ddbworker, as the
// Dockerfile builds it) has no fault injection: run refuses the fault flags as unknown,
// the DDBWORKER_FAULT_* and DDBWORKER_FAILPOINT_KILL variables do nothing
// (with them set it applies example traffic exactly once, never logs an
// injected fault or a failpoint kill, and exits 0 on SIGTERM), and its help
// does not list chaos. The development binary is the control: it accepts
// the flags, lists chaos, and the same variables kill it at the failpoint.
// Old behaviour: the fault flags were part of every build (hidden, but
// settable by flag or environment in production).
func TestProductionBinaryHasNoFaults(t *testing.T) {
	bin := buildBinary(t)

	// The binary's size, on the build the other subtests run.
	t.Run("size", func(t *testing.T) { requireBinarySize(t, bin) })

	dev := buildDevBinary(t)

	t.Run("flags", func(t *testing.T) {
		operator := buildOperatorBinary(t) // cmd/ddbworker, the default image's
		for _, args := range [][]string{{"run", "--fault-throttle", "1"}, {"run", "--failpoint-kill", "after-gate=1"}} {
			for _, prod := range []string{bin, operator} {
				out, err := exec.Command(prod, args...).CombinedOutput()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "%v: %s", args, out)
				require.Contains(t, string(out), "unknown flag: "+args[1])
			}

			devOut, err := exec.Command(dev, append(args, "--help")...).CombinedOutput()
			require.NoError(t, err, "the development binary accepts %v: %s", args, devOut)
			require.NotContains(t, string(devOut), "unknown flag")
		}
		help, err := exec.Command(bin, "--help").CombinedOutput()
		require.NoError(t, err, string(help))
		require.Contains(t, string(help), "Available Commands:")
		for _, tool := range []string{"chaos", "demo", "bench", "send", "emulators", "faultproxy"} {
			require.NotContains(t, string(help), "\n  "+tool+" ", "a development tool in the production binary")
		}
		devHelp, err := exec.Command(dev, "--help").CombinedOutput()
		require.NoError(t, err, string(devHelp))
		require.Contains(t, string(devHelp), "chaos")
	})

	t.Run("environment does nothing in production", func(t *testing.T) {
		env := testenv.New(t, testenv.Options{})
		common := append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL)
		sc := caseflow.ScenarioConfig{Messages: 12, Poison: -1, Seed: 9}
		send := exec.Command(dev, "send", "--count", "12", "--poison", "-1", "--seed", "9")
		send.Env = common
		out, err := send.CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "sent 12 messages")

		cmd := exec.Command(bin, "run")
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &logs
		cmd.Env = append(append(common, faultEnv...), "DDBWORKER_METRICS_ADDR="+freeAddr(t), "DDBWORKER_CONCURRENCY=4",
			"DDBWORKER_VISIBILITY_TIMEOUT=3s", "DDBWORKER_WAIT_TIME=1s", "DDBWORKER_TRACK_APPLICATIONS=true", "DDBWORKER_LOG_LEVEL=info")
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		drained := false
		deadline := time.After(60 * time.Second)
		for !drained {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("the daemon exited before the queue drained: %v\n%s", err, logs.String())
			case <-deadline:
				t.Fatalf("the queue did not drain: %+v", testenv.InspectQueue(t, env.Queues.URL))
			case <-time.After(50 * time.Millisecond):
				drained = testenv.InspectQueue(t, env.Queues.URL).Total() == 0
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		var runErr error
		select {
		case runErr = <-done:
			done <- runErr
		case <-time.After(30 * time.Second):
			t.Fatal("the daemon did not stop after SIGTERM")
		}
		require.NoError(t, runErr, "SIGTERM ends the daemon with exit 0; logs:\n%s", logs.String())
		for _, line := range strings.Split(logs.String(), "\n") {
			require.NotContains(t, line, "fault injected")
			require.NotContains(t, line, "failpoint kill")
			require.NotContains(t, line, `"level":"ERROR"`)
		}
		require.Contains(t, logs.String(), `"result":"applied"`)

		plan, err := caseflow.GeneratePlan(sc)
		require.NoError(t, err)
		report, err := caseflow.Verify(context.Background(), env.DynamoDB, env.Table, plan, nil)
		require.NoError(t, err)
		require.True(t, report.OK(), "violations: %v", report.Violations)
		require.Equal(t, len(plan.Work), report.WorkStates["APPLIED"]+report.WorkStates["SUPERSEDED"])
	})

	// The control: the same variables do reach the development binary.
	t.Run("control: the development binary honours the environment", func(t *testing.T) {
		env := testenv.New(t, testenv.Options{})
		common := append(os.Environ(), "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL,
			"DDBWORKER_WAIT_TIME=1s", "DDBWORKER_STARTUP_TIMEOUT=0s")
		send := exec.Command(dev, "send", "--count", "1", "--poison", "-1", "--seed", "9")
		send.Env = common
		out, err := send.CombinedOutput()
		require.NoError(t, err, string(out))

		for _, tc := range []struct {
			env, logged string
			killed      bool
		}{
			// The kill first: it needs the message (a throttled run
			// could hold it hidden); the throttle shows on any call.
			{"DDBWORKER_FAILPOINT_KILL=after-gate=1", "failpoint kill", true},
			{"DDBWORKER_FAULT_THROTTLE=1", "fault injected", false},
		} {
			cmd := exec.Command(dev, "run")
			logs := &testenv.Buffer{}
			cmd.Stdout, cmd.Stderr = io.Discard, logs
			cmd.Env = append(common, tc.env, "DDBWORKER_METRICS_ADDR="+freeAddr(t))
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var runErr error
			exited := false
			deadline := time.After(30 * time.Second)
			for !exited && !strings.Contains(logs.String(), tc.logged) {
				select {
				case runErr = <-done:
					exited = true
				case <-deadline:
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("%s: the development binary never logged %q; logs:\n%s", tc.env, tc.logged, logs.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
			if !exited {
				if !tc.killed {
					_ = cmd.Process.Kill()
				}
				select {
				case runErr = <-done:
				case <-time.After(30 * time.Second):
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("%s: the development binary did not exit; logs:\n%s", tc.env, logs.String())
				}
			}
			require.Contains(t, logs.String(), tc.logged, tc.env)
			if tc.killed {
				var exit *exec.ExitError
				require.True(t, errors.As(runErr, &exit), "%v\n%s", runErr, logs.String())
				status, ok := exit.Sys().(syscall.WaitStatus)
				require.True(t, ok)
				require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "killed by its failpoint: %v\n%s", runErr, logs.String())
			}
		}
	})
}

// maxBinarySize is the most a plain `go build ./cmd/ddbworker` may weigh:
// 27 MiB (26.1 MiB at the time of writing; the Dockerfile's -trimpath -s -w
// build is 18.1 MiB). Linking a package that reaches reflect's
// Value.Method or MethodByName with a name known only at run time (as
// text/template does) turns off the linker's removal of unused methods:
// 41.7 MiB when otlptracehttp brought in gRPC and with it
// golang.org/x/net/trace. To find what reaches it:
//
//	go build -ldflags=-dumpdep ./cmd/ddbworker 2>&1 | grep ReflectMethod
const maxBinarySize = 27 << 20

// requireBinarySize fails when bin weighs more than maxBinarySize (size is
// not speed: a test, skipped in -short mode, as the build takes a while).
func requireBinarySize(t *testing.T, bin string) {
	if testing.Short() {
		t.Skip("the production binary's size: not in -short mode")
	}
	info, err := os.Stat(bin)
	require.NoError(t, err)
	t.Logf("go build ./cmd/ddbworker: %d bytes (%.1f MiB)", info.Size(), float64(info.Size())/(1<<20))
	require.LessOrEqualf(t, info.Size(), int64(maxBinarySize), "the production binary weighs %.1f MiB, more than %d MiB: see maxBinarySize",
		float64(info.Size())/(1<<20), maxBinarySize>>20)
}
