package devcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dev/bench"
)

func newBenchCmd(g daemonext.Globals) *cobra.Command {
	var (
		cfg      bench.Config
		conc     string
		dups     string
		sizes    string
		kinds    string
		throttle string
		asJSON   bool
		emuDir   string
		profile  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure naive, default, fused and single-write workers against a bare-calls ceiling, and the default worker under throttling, on local emulators",
		Long: `bench runs the same CaseNoteRecorded messages (one ~1 KB case item per message,
its version among its case's notes, a share of them late, a share of
duplicates) through each worker at each concurrency, and through a bare loop
that issues exactly that worker's DynamoDB and SQS calls with no worker around
them: naive (the update, no inbox), default (gate + transaction), fused (one
transaction with the inbox record), single (the single-write route: one transaction of an update fenced
in the case item, guarded by the note's version, late notes superseded, and a
check that the work has no inbox record), single-skip (single with
SkipInboxCheck: the conditional update alone). Efficiency is
the worker's throughput divided by its ceiling's. Calls per message are counted
by SDK middleware; WCU are shown as DynamoDB Local reports them and, with read
units, computed in AWS terms from item sizes and the calls made. Applied twice
and lost are read back from the case items. --duplicates is a sweep: at each
concurrency, each ratio runs every worker (the size sweep runs the first).

By default each measurement runs in two phases, each through a consumer of its
own on a queue of its own: every fresh message, then every duplicate, so that
their costs are counted apart (the "fresh" and "dup" columns). With --mix it is
one phase whose stream interleaves the duplicates among the fresh messages, as
production does: each duplicate is sent 50 to 500 fresh messages after its
original (at the end of a shorter stream), so most arrive after their original
committed and a few while it is in flight; the per-message columns are then
over all messages ("/msg"), and "kept/in flight" counts the deliveries put back
for later, those of them because their original was in flight.

The throttled scenario (--throttle) runs the default worker against DynamoDB
Local through a proxy that throttles a share of the requests at random, once as
shipped (health gate and adaptive concurrency: "gated") and once without them
("ungated"), on a queue whose redrive policy dead-letters after 10 receives.
It reports DynamoDB requests per applied message as the proxy saw them (SDK
retries and throttled requests included), throughput, probes, time paused,
the concurrency limit, dead-lettered messages and business attempts used.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.LateRatio == 0 {
				cfg.LateRatio = -1 // none (in bench.Config, 0 is the default)
			}
			if strings.TrimSpace(conc) == "" {
				cfg.SkipConcurrency = true
			} else if cfg.Concurrency, err = ints(conc); err != nil {
				return fmt.Errorf("--concurrency: %w", err)
			}
			if cfg.Duplicates, err = ratios(dups); err != nil {
				return fmt.Errorf("--duplicates: %w", err)
			}
			if cfg.Throttle, err = fractions(throttle); err != nil {
				return fmt.Errorf("--throttle: %w", err)
			}
			if cfg.Sizes, err = ints(sizes); err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
			for _, k := range strings.Split(kinds, ",") {
				if k = strings.TrimSpace(k); k != "" {
					cfg.Kinds = append(cfg.Kinds, bench.Kind(k))
				}
			}
			cfg.Progress = cmd.ErrOrStderr()
			ctx := cmd.Context()
			at, stop, err := localOrGiven(ctx, g, emuDir, cmd.ErrOrStderr(), "bench")
			if err != nil {
				return err
			}
			defer stop()
			env := bench.Env{AWS: at.aws, Table: "ddbworker-bench-" + caseflow.NewID("")[:8], DynamoDBEndpoint: at.dynamoDB}
			env.DynamoDB, env.SQS = at.options()
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			started := time.Now()
			report, err := bench.Run(ctx, env, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			printBench(cmd.OutOrStdout(), report, time.Since(started))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Messages, "count", bench.DefaultMessages, "messages per run (fresh + duplicates)")
	f.StringVar(&dups, "duplicates", strconv.FormatFloat(bench.DefaultDuplicateRatio, 'g', -1, 64), "duplicate ratio sweep: each run's share of duplicates, comma-separated, each within [0, 1) (e.g. 0,0.1,0.3)")
	f.BoolVar(&cfg.Mix, "mix", false, "interleave the duplicates among the fresh messages in one phase per run, each 50-500 fresh messages after its original (default: two phases, fresh then duplicates)")
	f.StringVar(&conc, "concurrency", "1,4,16,64", `concurrency sweep, comma-separated ("": skip it)`)
	f.StringVar(&sizes, "sizes", "", "size sweep: messages per run, comma-separated (e.g. 1000,10000,50000); the inbox keeps growing")
	f.IntVar(&cfg.SizeConcurrency, "size-concurrency", bench.DefaultSizeConcurrency, "concurrency of the size sweep")
	f.IntVar(&cfg.BatchSize, "batch-size", 0, "messages per receive (default min(10, concurrency))")
	f.StringVar(&kinds, "workers", strings.Join(bench.KindNames(), ","), "workers to compare")
	f.Float64Var(&cfg.LateRatio, "late", bench.DefaultLateRatio, "share of each run's fresh messages sent after their case's next note (0: none)")
	f.IntVar(&cfg.KeyBytes, "key-bytes", 0, "length of every idempotency key, padded (0: as generated, about 30 bytes)")
	f.StringVar(&throttle, "throttle", "0.1,0.3,0.6,0.9", `throttled scenario: fractions of DynamoDB requests throttled, comma-separated, run after an unthrottled baseline row ("" or 0: skip the scenario)`)
	f.IntVar(&cfg.ThrottleMessages, "throttle-count", bench.DefaultThrottleMessages, "messages per run of the throttled scenario")
	f.IntVar(&cfg.ThrottleConcurrency, "throttle-concurrency", bench.DefaultThrottleConcurrency, "concurrency of the throttled scenario's worker")
	f.DurationVar(&cfg.ThrottleTimeout, "throttle-timeout", bench.DefaultThrottleTimeout, "longest run of the throttled scenario; a run stopped by it is reported as timed out")
	f.Uint64Var(&cfg.ThrottleSeed, "throttle-seed", bench.DefaultThrottleSeed, "seed of the proxy's throttling draws")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&emuDir, "emulators-dir", "", "where the emulators' npm packages are installed, on first use (default: $DDBWORKER_EMULATORS_DIR, else the user cache)")
	f.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	return cmd
}

func ints(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// ratios parses --duplicates: ratios within [0, 1), at least one.
func ratios(s string) ([]float64, error) {
	out, err := floats(s, func(f float64) bool { return f >= 0 && f < 1 }, "a ratio within [0, 1)")
	if err == nil && len(out) == 0 {
		err = errors.New("no ratio")
	}
	return out, err
}

// fractions parses --throttle: fractions in (0, 1]; "" or only zeros: none.
func fractions(s string) ([]float64, error) {
	all, err := floats(s, func(f float64) bool { return f >= 0 && f <= 1 }, "a fraction within [0, 1]")
	return slices.DeleteFunc(all, func(f float64) bool { return f == 0 }), err
}

// floats parses a comma-separated list of numbers, each of which ok must
// accept (what names them in the error); empty items are skipped.
func floats(s string, ok func(float64) bool, what string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !ok(f) {
			return nil, fmt.Errorf("%q is not %s", p, what)
		}
		out = append(out, f)
	}
	return out, nil
}

func printBench(out io.Writer, r *bench.Report, took time.Duration) {
	c := r.Config
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Two-phase: per fresh message and per duplicate; mixed: per message
	// over all of them, one column each.
	perMessage := "DDB fresh\tDDB dup\tSQS fresh\tSQS dup\tWCU AWS fresh/dup\tRCU AWS fresh/dup\tWCU Local fresh/dup"
	if c.Mix {
		perMessage = "DDB/msg\tSQS/msg\tWCU AWS/msg\tRCU AWS/msg\tWCU Local/msg"
	}
	header := "worker\tconc\tdups\tmsg/s\tceiling\tefficiency\tvs naive\tp50\tp99\tCPU/msg\tpeak RSS\t" + perMessage +
		"\titem/record B\tlate/superseded\tkept/in flight\tapplied twice\tlost\tredone\t"
	rows := func(title string, results []bench.Result, sizes bool) {
		if len(results) == 0 {
			return
		}
		if c.Mix {
			title += " — MIXED: duplicates interleaved with the fresh messages, one phase per run; per message = over all messages"
		}
		fmt.Fprintf(tw, "\n%s\n", title)
		h := header
		if sizes {
			h = "inbox before\t" + h
		}
		fmt.Fprintln(tw, h)
		for _, x := range results {
			if sizes {
				fmt.Fprintf(tw, "%d\t", x.InboxBefore)
			}
			vs := "-"
			if x.VsNaive > 0 {
				vs = fmt.Sprintf("%.2f", x.VsNaive)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%.0f MiB\t",
				x.Kind, x.Concurrency, 100*x.DuplicateRatio, x.Worker.Throughput, x.Ceiling.Throughput, x.Efficiency, vs,
				ms(x.Worker.P50), ms(x.Worker.P99), us(x.CPUPerMessage), float64(x.PeakRSS)/(1<<20))
			if x.Mixed {
				a := cellsOf(x.All)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", a.ddb, a.sqs, a.wcu, a.rcu, a.local)
			} else {
				f, d := cellsOf(x.Fresh), cellsOf(x.Duplicate)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s / %s\t%s / %s\t%s / %s\t",
					f.ddb, d.ddb, f.sqs, d.sqs, f.wcu, d.wcu, f.rcu, d.rcu, f.local, d.local)
			}
			fmt.Fprintf(tw, "%d / %d\t%d / %d\t%d / %d\t%d\t%d\t%d\t\n",
				x.ItemBytes, x.RecordBytes, x.Late, x.Superseded, x.Kept, x.InFlight, x.DoubleApplies, x.Lost, x.Redone)
		}
	}
	rows("CONCURRENCY SWEEP", r.Concurrency, false)
	rows("SIZE SWEEP (default worker)", r.Sizes, true)
	_ = tw.Flush()
	if len(r.Concurrency)+len(r.Sizes) > 0 {
		keys := "keys as generated"
		if c.KeyBytes > 0 {
			keys = fmt.Sprintf("%d-byte keys", c.KeyBytes)
		}
		dups := make([]string, len(c.Duplicates))
		for i, d := range c.Duplicates {
			dups[i] = fmt.Sprintf("%.0f%%", 100*d)
		}
		fmt.Fprintf(out, "\n%d messages per run, %s duplicates, %.0f%% of the fresh ones late, %d-byte notes, %s\n",
			c.Messages, strings.Join(dups, ", "), 100*c.LateRatio, c.NoteBytes, keys)
		if c.Mix {
			fmt.Fprintf(out, "Mixed: one phase per run, each duplicate sent %d-%d fresh messages after its original (at the end of a shorter stream).\n",
				bench.MixDistanceMin, bench.MixDistanceMax)
		} else {
			fmt.Fprintln(out, "Two phases per run, each through a consumer of its own: every fresh message, then every duplicate.")
		}
	}
	printThrottled(out, r)
	fmt.Fprintf(out, "\ntook %s\n", took.Round(time.Second))
}

// cells are a Cost's figures as printed: "-" each when its class of
// messages did not run (a run without duplicates).
type cells struct{ ddb, sqs, wcu, rcu, local string }

func cellsOf(c *bench.Cost) cells {
	if c == nil {
		return cells{"-", "-", "-", "-", "-"}
	}
	return cells{ddb: fmt.Sprintf("%.2f", c.DynamoDBCalls), sqs: fmt.Sprintf("%.2f", c.SQSCalls),
		wcu: capUnits(c.AWSWCU), rcu: capUnits(c.AWSRCU), local: fmt.Sprintf("%.1f", c.LocalWCU)}
}

// printThrottled prints the throttled scenario's table.
func printThrottled(out io.Writer, r *bench.Report) {
	if len(r.Throttled) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\nTHROTTLED (default worker)\n")
	fmt.Fprintln(tw, "throttled\tvariant\tmessages\tapplied\tmsg/s\tDDB req\tDDB req/msg\tthrottled/msg\treq/call\tprobes\tpaused\tlimit min/avg\tSQS/msg\tDLQ redrive/worker\tattempts used (max)\tapplied twice\tduration\tstatus\t")
	for _, x := range r.Throttled {
		perMsg := func(v float64) string {
			if x.Applied == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", v)
		}
		reqPerCall := "-"
		if x.Calls > 0 {
			reqPerCall = fmt.Sprintf("%.2f", float64(x.Requests)/float64(x.Calls))
		}
		paused := "-"
		if x.Pauses > 0 {
			paused = fmt.Sprintf("%d× %.1fs", x.Pauses, x.Paused.Seconds())
		}
		status := "done"
		if x.TimedOut {
			status = fmt.Sprintf("timed out, %d left", x.Left())
		}
		fmt.Fprintf(tw, "%.0f%%\t%s\t%d\t%d\t%.1f\t%d\t%s\t%s\t%s\t%d\t%s\t%d / %.1f\t%s\t%d / %d\t%d (%d)\t%d\t%.1fs\t%s\t\n",
			100*x.Fraction, x.Variant, x.Messages, x.Applied, x.Throughput, x.Requests, perMsg(x.RequestsPerMessage), perMsg(x.ThrottledPerMessage),
			reqPerCall, x.Probes, paused, x.MinLimit, x.AvgLimit, perMsg(x.SQSPerMessage), x.DeadLettered, x.WorkerDLQ, x.AttemptsUsed, x.MaxAttempts,
			x.AppliedTwice, x.Elapsed.Seconds(), status)
	}
	_ = tw.Flush()
	c := r.Config
	fmt.Fprintf(out, "\n%d fresh messages per run, concurrency %d, requests throttled at random (seed %d), maxReceiveCount %d, runs stopped after %s.\n",
		c.ThrottleMessages, c.ThrottleConcurrency, c.ThrottleSeed, bench.ThrottleMaxReceiveCount, c.ThrottleTimeout)
	fmt.Fprintln(out, "Per message = per applied message. gated: health gate + adaptive limit (as shipped); ungated: both off.")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// capUnits prints capacity units per message to two decimals at most
// (1, 0.5, 0.45): whole for a fixed shape, fractional where the read ahead
// shares a read among a batch or spares a duplicate its write.
func capUnits(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
