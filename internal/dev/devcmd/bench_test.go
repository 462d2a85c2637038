package devcmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dev/bench"
)

// --duplicates is a sweep of ratios within [0, 1); 0 is a ratio, not the
// default.
func TestRatios(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float64
		err  string
	}{
		{"0.25", []float64{0.25}, ""},
		{"0, 0.1,0.3", []float64{0, 0.1, 0.3}, ""},
		{"0", []float64{0}, ""},
		{"1", nil, "not a ratio"},
		{"-0.1", nil, "not a ratio"},
		{"x", nil, "not a ratio"},
		{" , ", nil, "no ratio"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ratios(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// The table says which mode it shows: two-phase, per fresh message and per
// duplicate ("-" for a run without duplicates); mixed, one column per
// figure over all messages, and a title that says so.
func TestPrintBench(t *testing.T) {
	cost := func(ddb, wcu float64) *bench.Cost {
		return &bench.Cost{DynamoDBCalls: ddb, SQSCalls: 0.2, LocalWCU: 6, AWSWCU: wcu, AWSRCU: 0.5}
	}
	for _, tc := range []struct {
		name       string
		mix        bool
		results    []bench.Result
		want, not  []string
		cells      []string // of the first row, in order
		footerMode string
	}{
		{
			name: "two-phase",
			results: []bench.Result{
				{Kind: bench.KindFused, Concurrency: 16, DuplicateRatio: 0, Fresh: cost(1.25, 5)},
				{Kind: bench.KindFused, Concurrency: 16, DuplicateRatio: 0.1, Fresh: cost(1.25, 5), Duplicate: cost(0.25, 0)},
			},
			want:       []string{"CONCURRENCY SWEEP\n", "DDB fresh", "DDB dup", "WCU AWS fresh/dup", "0%, 10% duplicates"},
			not:        []string{"MIXED", "DDB/msg"},
			cells:      []string{"fused", "16", "0%", "1.25", "-", "0.20", "-", "5 / -", "0.5 / -", "6.0 / -"},
			footerMode: "Two phases per run",
		},
		{
			name: "mixed",
			mix:  true,
			results: []bench.Result{
				{Kind: bench.KindFused, Concurrency: 16, DuplicateRatio: 0.1, Mixed: true, All: cost(0.97, 4.58), Kept: 3, InFlight: 1},
			},
			want:       []string{"MIXED", "per message = over all messages", "DDB/msg", "WCU AWS/msg", "kept/in flight"},
			not:        []string{"DDB fresh", "DDB dup", "fresh/dup"},
			cells:      []string{"fused", "16", "10%", "0.97", "0.20", "4.58", "0.5", "6.0", "3 / 1"},
			footerMode: "Mixed: one phase per run",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &bench.Report{Config: bench.Config{Messages: 1000, Duplicates: []float64{0, 0.1}, Mix: tc.mix}, Concurrency: tc.results}
			if tc.mix {
				r.Config.Duplicates = []float64{0.1}
			}
			printBench(&out, r, time.Second)
			text := out.String()
			for _, w := range tc.want {
				require.Contains(t, text, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, text, n)
			}
			require.Contains(t, text, tc.footerMode)
			var row string
			for _, line := range strings.Split(text, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "fused" {
					row = line
					break
				}
			}
			rest := row
			for _, c := range tc.cells {
				i := strings.Index(rest, c)
				require.GreaterOrEqual(t, i, 0, "%q in order in %q", c, row)
				rest = rest[i+len(c):]
			}
		})
	}
}
