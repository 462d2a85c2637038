package devcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dev/bench"
)

func newBenchCmd(g daemonext.Globals) *cobra.Command {
	var (
		cfg      bench.Config
		conc     string
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
its version among its case's notes, a share of them late, a share of duplicates)
through each worker at each concurrency, and through a bare loop that issues
exactly that worker's DynamoDB and SQS calls with no worker around them: naive
(the update, no inbox), default (gate + transaction), fused (one transaction
with the inbox record), single (the single-write route: one conditional update
fenced in the case item, guarded by the note's version, late notes superseded).
Efficiency is the worker's throughput divided by its ceiling's. Calls per
message are counted by SDK middleware, separately for fresh messages and
duplicates; WCU are shown as DynamoDB Local reports them and, with read units,
computed in AWS terms from item sizes. Applied twice and lost are read back
from the case items.

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
	f.Float64Var(&cfg.DuplicateRatio, "duplicates", bench.DefaultDuplicateRatio, "share of duplicates in each run")
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

// fractions parses --throttle: fractions in (0, 1]; "" or only zeros: none.
func fractions(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("%q is not a fraction within [0, 1]", p)
		}
		if f > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}

func printBench(out io.Writer, r *bench.Report, took time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "worker\tconc\tmsg/s\tceiling\tefficiency\tvs naive\tp50\tp99\tCPU/msg\tpeak RSS\tDDB fresh\tDDB dup\tSQS fresh\tSQS dup\tWCU AWS fresh/dup\tRCU AWS fresh/dup\tWCU Local fresh/dup\titem/record B\tlate/superseded\tapplied twice\tlost\tredone\t"
	rows := func(title string, results []bench.Result) {
		if len(results) == 0 {
			return
		}
		fmt.Fprintf(tw, "\n%s\n", title)
		h := header
		if title != "CONCURRENCY SWEEP" {
			h = "inbox before\t" + h
		}
		fmt.Fprintln(tw, h)
		for _, x := range results {
			prefix := ""
			if title != "CONCURRENCY SWEEP" {
				prefix = fmt.Sprintf("%d\t", x.InboxBefore)
			}
			vs := "-"
			if x.VsNaive > 0 {
				vs = fmt.Sprintf("%.2f", x.VsNaive)
			}
			fmt.Fprintf(tw, "%s%s\t%d\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%.0f MiB\t%.2f\t%.2f\t%.2f\t%.2f\t%s / %s\t%s / %s\t%.1f / %.1f\t%d / %d\t%d / %d\t%d\t%d\t%d\t\n",
				prefix, x.Kind, x.Concurrency, x.Worker.Throughput, x.Ceiling.Throughput, x.Efficiency, vs,
				ms(x.Worker.P50), ms(x.Worker.P99), us(x.CPUPerMessage), float64(x.PeakRSS)/(1<<20),
				x.DynamoDBFresh, x.DynamoDBDup, x.SQSFresh, x.SQSDup, capUnits(x.AWSWCUFresh), capUnits(x.AWSWCUDup), capUnits(x.AWSRCUFresh), capUnits(x.AWSRCUDup),
				x.LocalWCUFresh, x.LocalWCUDup, x.ItemBytes, x.RecordBytes, x.Late, x.Superseded, x.DoubleApplies, x.Lost, x.Redone)
		}
	}
	rows("CONCURRENCY SWEEP", r.Concurrency)
	rows("SIZE SWEEP (default worker)", r.Sizes)
	_ = tw.Flush()
	if len(r.Concurrency)+len(r.Sizes) > 0 {
		c := r.Config
		keys := "keys as generated"
		if c.KeyBytes > 0 {
			keys = fmt.Sprintf("%d-byte keys", c.KeyBytes)
		}
		fmt.Fprintf(out, "\n%d messages per run, %.0f%% duplicates, %.0f%% of the fresh ones late, %d-byte notes, %s\n",
			c.Messages, 100*c.DuplicateRatio, 100*c.LateRatio, c.NoteBytes, keys)
	}
	printThrottled(out, r)
	fmt.Fprintf(out, "\ntook %s\n", took.Round(time.Second))
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
