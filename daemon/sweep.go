package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/worker"
)

type sweepFlags struct {
	grace       time.Duration
	lease       time.Duration
	skew        time.Duration
	useIndex    bool
	dryRun      bool
	max         int
	every       time.Duration
	metricsAddr string
	output      string
}

func newSweepCmd(g *globals) *cobra.Command {
	f := &sweepFlags{}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Find PROCESSING records whose lease expired; mark abandoned ones FAILED_TERMINAL LEASE_ABANDONED",
		Long: fmt.Sprintf(`sweep finds inbox records left PROCESSING after their lease expired with no
delivery taking them over (a worker died and its message went to the DLQ, or
expired). It reports every one; those expired for longer than --grace are
marked FAILED_TERMINAL with code LEASE_ABANDONED (fenced: a record that was
renewed, taken over or settled meanwhile is left alone), so they show up in
"%s inbox list --status FAILED_TERMINAL --code LEASE_ABANDONED" and in
alerts. Nothing is lost: a later delivery of the same work (e.g. a DLQ
redrive) takes an abandoned record over and runs it.

With --use-index it pages the attention index, which holds PROCESSING records
only when the workers run with --index-processing. Without it, it scans the
whole table with strongly consistent reads: about one RCU per 4 KB of table.

--lease and --clock-skew must match the workers' --visibility-timeout and
--clock-skew. With --every it sweeps repeatedly and serves the metrics
ddbworker_stuck_records{state} and ddbworker_sweep_marked_total on
--metrics-addr until SIGTERM.`, g.app.name()),
		Example: examples(g.app.name(),
			"sweep --dry-run",
			"sweep --grace 2h --max 100",
			"sweep --use-index --every 5m --metrics-addr 127.0.0.1:9091"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runSweep(ctx, g, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.grace, "grace", stale.DefaultGrace, "mark a record abandoned once its lease expired this long ago")
	fl.DurationVar(&f.lease, "lease", worker.DefaultVisibilityTimeout, "the workers' lease (their --visibility-timeout)")
	fl.DurationVar(&f.skew, "clock-skew", worker.DefaultClockSkew, "the workers' --clock-skew")
	fl.BoolVar(&f.useIndex, "use-index", false, "page the attention index instead of scanning the table (the default with --index-processing)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "report only; mark nothing")
	fl.IntVar(&f.max, "max", 0, "mark at most this many records per sweep (0: all)")
	fl.DurationVar(&f.every, "every", 0, "sweep repeatedly at this interval (0: once)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "with --every: serve /metrics, /healthz, /readyz here (e.g. 127.0.0.1:9091)")
	fl.StringVarP(&f.output, "output", "o", "table", "output: table or json")
	return cmd
}

func runSweep(ctx context.Context, g *globals, f *sweepFlags, out io.Writer) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if f.metricsAddr != "" && f.every <= 0 {
		return fmt.Errorf("--metrics-addr needs --every")
	}
	log, err := g.logger(os.Stderr)
	if err != nil {
		return err
	}
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return err
	}
	ddb, _ := g.clients(cfg, nil, nil)
	var metrics *prommetrics.Provider
	if f.every > 0 {
		reg := prometheus.NewRegistry()
		metrics = prommetrics.New(reg)
		if f.metricsAddr != "" {
			stopOps, err := serveOps(f.metricsAddr, reg, func() bool { return true }, log)
			if err != nil {
				return err
			}
			defer stopOps()
		}
	}
	store, err := g.resolveStore(ctx, ddb)
	if err != nil {
		return err
	}
	swcfg := stale.SweepConfig{Store: store, Policy: stale.Policy{Lease: f.lease, Skew: explicit(f.skew)}, Grace: explicit(f.grace),
		UseIndex: f.useIndex}
	if metrics != nil {
		swcfg.Metrics = metrics // a nil *Provider is not a nil Provider
	}
	sw, err := stale.NewSweeper(ddb, swcfg)
	if err != nil {
		return err
	}
	if metrics != nil {
		if err := metrics.Err(); err != nil {
			return err
		}
	}
	opts := stale.SweepOptions{DryRun: f.dryRun, MaxMarks: f.max}
	for {
		rep, err := sw.Sweep(ctx, opts)
		if err != nil {
			if f.every <= 0 || ctx.Err() != nil {
				return err
			}
			log.Warn("sweep failed; next one at the interval", "error", err.Error())
		} else if err := writeSweep(out, f.output, rep, f.dryRun); err != nil {
			return err
		}
		if f.every <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.every):
		}
	}
}

type sweepJSON struct {
	At        string      `json:"at"`
	Source    string      `json:"source"`
	DryRun    bool        `json:"dryRun"`
	Read      int         `json:"read"`
	Expired   int         `json:"expired"`
	Abandoned int         `json:"abandoned"`
	Marked    int         `json:"marked"`
	Stuck     []stuckJSON `json:"stuck"`
}

type stuckJSON struct {
	Key          string `json:"idempotencyKey"`
	MessageType  string `json:"messageType"`
	Owner        string `json:"leaseOwner"`
	LeaseExpired string `json:"leaseExpiresAt"`
	ExpiredForS  int64  `json:"expiredForSeconds"`
	Attempts     int    `json:"attempts"`
	Aggregate    string `json:"aggregate"`
	State        string `json:"state"`
	Action       string `json:"action"`
}

func stuckState(s stale.Stuck) (state, action string) {
	state, action = "expired", "reported (a redelivery takes it over)"
	if s.Abandoned {
		state = "abandoned"
		action = "marked LEASE_ABANDONED"
		if !s.Marked {
			action = "not marked: " + s.Note
		}
	}
	return state, action
}

func writeSweep(out io.Writer, output string, rep stale.SweepReport, dryRun bool) error {
	if output == "json" {
		doc := sweepJSON{At: inbox.FormatTime(rep.At), Source: rep.Source, DryRun: dryRun, Read: rep.Read,
			Expired: rep.Expired, Abandoned: rep.Abandoned, Marked: rep.Marked, Stuck: []stuckJSON{}}
		for _, s := range rep.Stuck {
			state, action := stuckState(s)
			r := s.Record
			doc.Stuck = append(doc.Stuck, stuckJSON{Key: r.Key, MessageType: r.MessageType, Owner: r.LeaseOwner,
				LeaseExpired: inbox.FormatTime(r.LeaseExpiry), ExpiredForS: int64(s.ExpiredFor / time.Second),
				Attempts: r.Attempts, Aggregate: r.AggregateType + "/" + r.AggregateID, State: state, Action: action})
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	fmt.Fprintf(out, "sweep at %s (%s): %d expired lease(s) read — %d expired within grace, %d abandoned, %d marked",
		inbox.FormatTime(rep.At), rep.Source, rep.Read, rep.Expired, rep.Abandoned, rep.Marked)
	if dryRun {
		fmt.Fprint(out, " (dry run)")
	}
	fmt.Fprintln(out)
	if len(rep.Stuck) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE\tAGGREGATE\tOWNER\tEXPIRED AGO\tATTEMPTS\tSTATE\tACTION")
	for _, s := range rep.Stuck {
		state, action := stuckState(s)
		r := s.Record
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, r.MessageType, r.AggregateType, r.AggregateID,
			orDash(r.LeaseOwner), s.ExpiredFor.Round(time.Second), strconv.Itoa(r.Attempts), state, action)
	}
	return tw.Flush()
}
