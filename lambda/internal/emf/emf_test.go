package emf_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/lambda/internal/emf"
	"github.com/ddbworker/ddbworker/lambda/internal/emf/emftest"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// fixture is a registry with one metric of each kind the worker reports.
type fixture struct {
	reg      *prometheus.Registry
	outcomes *prometheus.CounterVec
	hashes   prometheus.Counter
	latency  *prometheus.HistogramVec
	commit   prometheus.Histogram
	healthy  prometheus.Gauge
	other    prometheus.Counter // registered, not reported
	r        *emf.Reporter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		reg:      prometheus.NewRegistry(),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ddbworker_messages_total", Help: "h"}, []string{"message_type", "outcome"}),
		hashes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ddbworker_hash_mismatches_total", Help: "h"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ddbworker_processing_seconds", Help: "h",
			Buckets: []float64{0.01, 0.1, 1}}, []string{"message_type"}),
		commit:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ddbworker_transaction_seconds", Help: "h", Buckets: []float64{0.01, 0.1}}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ddbworker_database_healthy", Help: "h"}),
		other:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ddbworker_received_total", Help: "h"}),
	}
	f.reg.MustRegister(f.outcomes, f.hashes, f.latency, f.commit, f.healthy, f.other)
	r, err := emf.New(f.reg, emf.Config{Namespace: "ddbworker", Dimensions: []emf.Dimension{{"function_name", "invoices"}, {"queue_name", "orders"}},
		Metrics: []emf.Metric{{"ddbworker_messages_total", emf.UnitCount}, {"ddbworker_hash_mismatches_total", emf.UnitCount},
			{"ddbworker_processing_seconds", emf.UnitSeconds}, {"ddbworker_transaction_seconds", emf.UnitSeconds},
			{"ddbworker_database_healthy", emf.UnitNone}}})
	require.NoError(t, err)
	f.r = r
	return f
}

// report reports at now and returns the documents, each checked against
// the specification.
func (f *fixture) report(t *testing.T, now time.Time) []*emftest.Document {
	t.Helper()
	lines, err := f.r.Report(now)
	require.NoError(t, err)
	var docs []*emftest.Document
	for _, l := range lines {
		require.NotContains(t, string(l), "\n", "one line")
		doc, err := emftest.Validate(l)
		require.NoError(t, err, "%s", l)
		require.Equal(t, now.UnixMilli(), doc.Timestamp)
		require.Equal(t, "ddbworker", doc.Namespace)
		require.Len(t, doc.Dimensions, 1, "one dimension set")
		require.Equal(t, []string{"function_name", "queue_name"}, doc.Dimensions[0][:2], "the fixed dimensions first")
		require.Equal(t, "invoices", doc.Values["function_name"])
		require.Equal(t, "orders", doc.Values["queue_name"])
		docs = append(docs, doc)
	}
	return docs
}

// find returns the documents with these label values (beyond the fixed
// dimensions), merged: metric → values.
func find(docs []*emftest.Document, labels map[string]string) map[string][]float64 {
	out := map[string][]float64{}
	for _, d := range docs {
		if len(d.Dimensions[0]) != 2+len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && d.Values[k] == v
		}
		if !match {
			continue
		}
		for m, vs := range d.Metrics {
			out[m] = append(out[m], vs...)
		}
	}
	return out
}

func TestReportDeltas(t *testing.T) {
	f := newFixture(t)
	f.healthy.Set(1)
	f.outcomes.WithLabelValues("OrderInvoiceRequested", "applied").Add(3)
	f.outcomes.WithLabelValues("OrderInvoiceRequested", "duplicate").Inc()
	f.outcomes.WithLabelValues("", "terminal").Inc() // an undecodable body: no message type
	f.other.Add(9)

	docs := f.report(t, t0)
	require.Equal(t, map[string][]float64{"ddbworker_messages_total": {3}}, find(docs, map[string]string{"message_type": "OrderInvoiceRequested", "outcome": "applied"}))
	require.Equal(t, map[string][]float64{"ddbworker_messages_total": {1}}, find(docs, map[string]string{"message_type": "OrderInvoiceRequested", "outcome": "duplicate"}))
	require.Equal(t, map[string][]float64{"ddbworker_messages_total": {1}}, find(docs, map[string]string{"outcome": "terminal"}),
		"an empty label is no dimension, as in Prometheus")
	require.Equal(t, map[string][]float64{"ddbworker_database_healthy": {1}}, find(docs, nil), "the gauge; no zero counters")
	for _, d := range docs {
		require.NotContains(t, d.Metrics, "ddbworker_received_total", "only the metrics asked for")
		require.NotContains(t, d.Metrics, "ddbworker_hash_mismatches_total", "a counter that did not move is not reported")
		for m := range d.Metrics {
			require.Contains(t, []string{"Count", "None"}, d.Units[m])
		}
	}
	require.Len(t, docs, 4, "one document per label set")

	require.Empty(t, f.report(t, t0.Add(time.Second)), "nothing happened: nothing is written")

	f.outcomes.WithLabelValues("OrderInvoiceRequested", "applied").Add(2)
	f.hashes.Inc()
	docs = f.report(t, t0.Add(2*time.Second))
	require.Equal(t, map[string][]float64{"ddbworker_messages_total": {2}}, find(docs, map[string]string{"message_type": "OrderInvoiceRequested", "outcome": "applied"}),
		"the increase since the last report")
	require.Equal(t, map[string][]float64{"ddbworker_hash_mismatches_total": {1}, "ddbworker_database_healthy": {1}}, find(docs, nil))
	require.Len(t, docs, 2)

	f.healthy.Set(0)
	docs = f.report(t, t0.Add(3*time.Second))
	require.Equal(t, map[string][]float64{"ddbworker_database_healthy": {0}}, find(docs, nil), "a gauge that changed is news by itself")
	require.Len(t, docs, 1)
}

func TestReportHistograms(t *testing.T) {
	f := newFixture(t)
	f.commit.Observe(0.0042)
	docs := f.report(t, t0)
	got := find(docs, nil)
	require.Len(t, got["ddbworker_transaction_seconds"], 1)
	require.InDelta(t, 0.0042, got["ddbworker_transaction_seconds"][0], 1e-12, "one observation: its exact value")
	require.Equal(t, "Seconds", docs[0].Units["ddbworker_transaction_seconds"])
	require.True(t, docs[0].Arrays["ddbworker_transaction_seconds"], "a histogram's observations are an array")

	for _, v := range []float64{0.005, 0.05, 0.05, 0.5, 7} {
		f.latency.WithLabelValues("OrderInvoiceRequested").Observe(v)
	}
	got = find(f.report(t, t0.Add(time.Second)), map[string]string{"message_type": "OrderInvoiceRequested"})
	require.Equal(t, []float64{0.01, 0.1, 0.1, 1, 1}, got["ddbworker_processing_seconds"],
		"one value per observation: its bucket's upper bound, the largest finite one for +Inf")

	f.latency.WithLabelValues("OrderInvoiceRequested").Observe(0.02)
	got = find(f.report(t, t0.Add(2*time.Second)), map[string]string{"message_type": "OrderInvoiceRequested"})
	require.InDeltaSlice(t, []float64{0.02}, got["ddbworker_processing_seconds"], 1e-12, "only the new observation")

	// 250 observations: three documents of at most 100 values.
	for i := range 250 {
		f.latency.WithLabelValues("OrderInvoiceRequested").Observe(float64(i%3) * 0.04)
	}
	f.commit.Observe(0.5)
	docs = f.report(t, t0.Add(3*time.Second))
	var arrays []int
	total := 0
	for _, d := range docs {
		if vs, ok := d.Metrics["ddbworker_processing_seconds"]; ok {
			arrays = append(arrays, len(vs))
			total += len(vs)
		}
	}
	slices.Sort(arrays)
	require.Equal(t, []int{50, 100, 100}, arrays)
	require.Equal(t, 250, total)
}

func TestReportSplitsAtOneHundredMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var metrics []emf.Metric
	for i := range 150 {
		name := fmt.Sprintf("ddbworker_m%03d_total", i)
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "h"})
		reg.MustRegister(c)
		c.Inc()
		metrics = append(metrics, emf.Metric{Name: name, Unit: emf.UnitCount})
	}
	r, err := emf.New(reg, emf.Config{Namespace: "ddbworker", Metrics: metrics})
	require.NoError(t, err)
	lines, err := r.Report(t0)
	require.NoError(t, err)
	require.Len(t, lines, 2)
	seen := map[string]bool{}
	for _, l := range lines {
		doc, err := emftest.Validate(l)
		require.NoError(t, err)
		require.LessOrEqual(t, len(doc.Metrics), 100)
		require.Equal(t, [][]string{{}}, doc.Dimensions, "no dimensions: an empty set")
		for m := range doc.Metrics {
			seen[m] = true
		}
	}
	require.Len(t, seen, 150, "every metric, once")
}

// Reports made concurrently (invocations in parallel) report every
// increase exactly once.
func TestReportConcurrent(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	total := 0.0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				f.outcomes.WithLabelValues("OrderInvoiceRequested", "applied").Inc()
				lines, err := f.r.Report(t0)
				require.NoError(t, err)
				for _, l := range lines {
					doc, err := emftest.Validate(l)
					require.NoError(t, err)
					mu.Lock()
					for _, v := range doc.Metrics["ddbworker_messages_total"] {
						total += v
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	lines, err := f.r.Report(t0)
	require.NoError(t, err)
	for _, l := range lines {
		doc, err := emftest.Validate(l)
		require.NoError(t, err)
		total += doc.Metrics["ddbworker_messages_total"][0]
	}
	require.Equal(t, 400.0, total)
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  emf.Config
		want string
	}{
		{"no namespace", emf.Config{}, "namespace"},
		{"all spaces", emf.Config{Namespace: "   "}, "not all spaces"},
		{"too long", emf.Config{Namespace: strings.Repeat("n", 256)}, "1..255"},
		{"a character CloudWatch refuses", emf.Config{Namespace: "ddbworker|prod"}, `'|' is not allowed`},
		{"AWS's own", emf.Config{Namespace: "AWS/Lambda"}, "AWS's own"},
		{"a unit CloudWatch does not know", emf.Config{Namespace: "n", Metrics: []emf.Metric{{"m", "Messages"}}}, "not a CloudWatch unit"},
		{"a metric that is a dimension", emf.Config{Namespace: "n", Dimensions: []emf.Dimension{{"m", "v"}}, Metrics: []emf.Metric{{"m", emf.UnitCount}}},
			"is also a dimension"},
		{"a dimension twice", emf.Config{Namespace: "n", Dimensions: []emf.Dimension{{"d", "v"}, {"d", "w"}}}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := emf.New(prometheus.NewRegistry(), tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := emf.New(prometheus.NewRegistry(), emf.Config{Namespace: "ddbworker/invoices prod#1:a_b-c.d"})
	require.NoError(t, err, "every character CloudWatch allows")
}

// A fixed dimension with no value (the function's name, outside Lambda) is
// left out; a label that collides with a root member is refused, the rest
// reported.
func TestReportDimensions(t *testing.T) {
	reg := prometheus.NewRegistry()
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ddbworker_clash_total", Help: "h"}, []string{"queue_name"})
	ok := prometheus.NewCounter(prometheus.CounterOpts{Name: "ddbworker_ok_total", Help: "h"})
	reg.MustRegister(clash, ok)
	clash.WithLabelValues("x").Inc()
	ok.Inc()
	r, err := emf.New(reg, emf.Config{Namespace: "n", Dimensions: []emf.Dimension{{"function_name", ""}, {"queue_name", "orders"}},
		Metrics: []emf.Metric{{"ddbworker_clash_total", emf.UnitCount}, {"ddbworker_ok_total", emf.UnitCount}}})
	require.NoError(t, err)
	lines, err := r.Report(t0)
	require.ErrorContains(t, err, `label "queue_name" is also a dimension`)
	require.Len(t, lines, 1)
	doc, verr := emftest.Validate(lines[0])
	require.NoError(t, verr)
	require.Equal(t, [][]string{{"queue_name"}}, doc.Dimensions)
	require.Equal(t, map[string][]float64{"ddbworker_ok_total": {1}}, doc.Metrics)
}
