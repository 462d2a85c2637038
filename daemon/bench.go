//go:build ddbworker_dev

package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/internal/bench"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		cfg     bench.Config
		conc    string
		sizes   string
		kinds   string
		asJSON  bool
		emuDir  string
		profile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure naive, default and fused workers against a bare-calls ceiling on local emulators",
		Long: `bench runs the same CaseNoteRecorded messages (one ~1 KB case item per message,
a share of duplicates) through each worker at each concurrency, and through a
bare loop that issues exactly that worker's DynamoDB and SQS calls with no
worker around them. Efficiency is the worker's throughput divided by its
ceiling's. Calls per message are counted by SDK middleware, separately for
fresh messages and duplicates; WCU are shown as DynamoDB Local reports them and
computed in AWS terms from item sizes.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Concurrency, err = ints(conc); err != nil {
				return fmt.Errorf("--concurrency: %w", err)
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
			awsCfg, stop, err := g.localOrGiven(ctx, emuDir, cmd.ErrOrStderr(), "bench")
			if err != nil {
				return err
			}
			defer stop()
			env := bench.Env{AWS: awsCfg, Table: "ddbworker-bench-" + caseflow.NewID("")[:8]}
			env.DynamoDB = []func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(g.ddbEndpoint) }}
			env.SQS = []func(*sqs.Options){func(o *sqs.Options) { o.BaseEndpoint = aws.String(g.sqsEndpoint) }}
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
	f.IntVar(&cfg.Messages, "count", 2000, "messages per run (fresh + duplicates)")
	f.Float64Var(&cfg.DuplicateRatio, "duplicates", 0.25, "share of duplicates in each run")
	f.StringVar(&conc, "concurrency", "1,4,16,64", "concurrency sweep, comma-separated")
	f.StringVar(&sizes, "sizes", "", "size sweep: messages per run, comma-separated (e.g. 1000,10000,50000); the inbox keeps growing")
	f.IntVar(&cfg.SizeConcurrency, "size-concurrency", 16, "concurrency of the size sweep")
	f.IntVar(&cfg.BatchSize, "batch-size", 0, "messages per receive (default min(10, concurrency))")
	f.StringVar(&kinds, "workers", "naive,default,fused", "workers to compare")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&emuDir, "emulators-dir", "", "directory of the emulators' npm install")
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

func printBench(out io.Writer, r *bench.Report, took time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "worker\tconc\tmsg/s\tceiling\tefficiency\tvs naive\tp50\tp99\tCPU/msg\tpeak RSS\tDDB fresh\tDDB dup\tSQS fresh\tSQS dup\tWCU AWS fresh/dup\tWCU Local fresh/dup\tapplied twice\tredone\t"
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
			fmt.Fprintf(tw, "%s%s\t%d\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%.0f MiB\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f / %.0f\t%.1f / %.1f\t%d\t%d\t\n",
				prefix, x.Kind, x.Concurrency, x.Worker.Throughput, x.Ceiling.Throughput, x.Efficiency, vs,
				ms(x.Worker.P50), ms(x.Worker.P99), us(x.CPUPerMessage), float64(x.PeakRSS)/(1<<20),
				x.DynamoDBFresh, x.DynamoDBDup, x.SQSFresh, x.SQSDup, x.AWSWCUFresh, x.AWSWCUDup, x.LocalWCUFresh, x.LocalWCUDup, x.DoubleApplies, x.Redone)
		}
	}
	rows("CONCURRENCY SWEEP", r.Concurrency)
	rows("SIZE SWEEP (default worker)", r.Sizes)
	_ = tw.Flush()
	fmt.Fprintf(out, "\n%d messages per run, %.0f%% duplicates; took %s\n", r.Config.Messages, 100*r.Config.DuplicateRatio, took.Round(time.Second))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
