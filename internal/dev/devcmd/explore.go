package devcmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dev/explore"
)

func newExploreCmd(g daemonext.Globals) *cobra.Command {
	var cfg explore.Config
	var asJSON bool
	var workerLogs string
	cmd := &cobra.Command{
		Use:   "explore",
		Short: "Seeded, replayable randomized exploration of routes × hosts × faults × operator actions, with an invariant check",
		Long: `explore starts DynamoDB Local and the SQS emulator (unless --dynamodb-endpoint and
--sqs-endpoint are given) and, for each seed, generates one schedule from it —
the queue (standard or FIFO, a small maxReceiveCount), the terminal policy, a
commit mode per message type (gated, fused, single-write), envelope and adapted
bodies (SNS, EventBridge, own JSON, a type in a message attribute), an
effect-log handler, daemon workers side by side and a Lambda adapter driven as
an event source mapping, duplicates, out-of-order versions, one key under two
types, reused keys, poison, flaky and deferred work, faults on a timeline (lost
responses per call kind, throttling, 5xx, hangs, SQS latency, database outages,
deploys, crashes at failpoints) and operator actions (inbox reopen, DLQ
redrive, SQS's own redrive, the sweeper) — runs it in process, and checks
DynamoDB and both queues against every invariant when the work has drained.
It prints each seed's schedule and figures, and for a failing seed the one
command that replays it. It exits non-zero when any seed found a violation.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DynamoDBEndpoint, cfg.SQSEndpoint = g.Endpoints()
			if cfg.DynamoDBEndpoint != "" && cfg.SQSEndpoint != "" {
				var err error
				if cfg.AWS, err = g.AWSConfig(cmd.Context()); err != nil {
					return err
				}
			}
			cfg.Progress = cmd.ErrOrStderr()
			if workerLogs != "" {
				f, err := os.Create(workerLogs)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.WorkerLogs = f
			}
			return runExplore(cmd, cfg, asJSON, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&cfg.Seed, "seed", 1, "the first seed")
	fl.IntVar(&cfg.Seeds, "seeds", explore.DefaultSeeds, "how many consecutive seeds to run")
	fl.DurationVar(&cfg.Budget, "budget", 0, "start no new seed after this long (0: run every seed)")
	fl.DurationVar(&cfg.Stream, "stream", explore.DefaultStream, "how long each seed's messages keep arriving")
	fl.DurationVar(&cfg.Recover, "recover", explore.DefaultRecover, "the recovery bound: the backlog must drain within it")
	fl.BoolVar(&cfg.NoFaults, "no-faults", false, "no faults, no host events (a clean run)")
	fl.BoolVar(&cfg.NoOps, "no-ops", false, "no operator actions")
	fl.StringVar(&cfg.Plant, "plant", "", `plant a violation to see the checker find it: "lost" (a message deleted before any worker saw it) "double" (a work applied twice), "app-item" (an application item changed behind its back) or "app-index" (an inbox-like record in the application's index; both on a seed whose table is adopted)`)
	fl.BoolVar(&cfg.StopOnViolation, "stop-on-violation", false, "stop at the first seed that finds a violation")
	fl.StringVar(&cfg.EmulatorsDir, "emulators-dir", "", "where the emulators' npm packages are installed, on first use (default: $DDBWORKER_EMULATORS_DIR, else the user cache)")
	fl.StringVar(&workerLogs, "worker-logs", "", "write the workers' JSON logs to this file")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON instead of a summary")
	return cmd
}

func runExplore(cmd *cobra.Command, cfg explore.Config, asJSON bool, out io.Writer) error {
	switch cfg.Plant {
	case "", explore.PlantLost, explore.PlantDouble, explore.PlantAppItem, explore.PlantAppIndex:
	default:
		return fmt.Errorf("explore: --plant %q: lost, double, app-item or app-index", cfg.Plant)
	}
	if cfg.Stream < time.Second {
		return fmt.Errorf("explore: --stream %s: at least 1s", cfg.Stream)
	}
	rep, err := explore.Run(cmd.Context(), cfg)
	if rep != nil {
		if asJSON {
			if jerr := rep.WriteJSON(out); jerr != nil {
				return jerr
			}
		} else {
			rep.Print(out)
		}
	}
	if err != nil {
		return err
	}
	if n := rep.Violations(); n > 0 {
		return &daemonext.ExitError{Code: 1, Msg: fmt.Sprintf("explore: %d violations in %d seeds", n, len(rep.Failing()))}
	}
	return nil
}
