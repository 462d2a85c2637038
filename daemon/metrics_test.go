package daemon

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/worker"
)

// recorder is a Registerer that keeps what is registered with it.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// exported are the series names a registry's collectors export, whether
// or not they have series yet: a counter's name, a gauge's, a histogram's
// with _bucket, _sum and _count, a summary's with _sum and _count.
func exported(t *testing.T, r *recorder) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	add := func(name string, typ dto.MetricType) {
		switch typ {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	for _, c := range r.collectors {
		// A vector's type is its Go type (it may have no series yet); any
		// other collector's, its series'.
		typ := dto.MetricType_UNTYPED
		switch c := c.(type) {
		case *prometheus.HistogramVec:
			typ = dto.MetricType_HISTOGRAM
		case *prometheus.SummaryVec:
			typ = dto.MetricType_SUMMARY
		case prometheus.Metric:
			var m dto.Metric
			require.NoError(t, c.Write(&m))
			switch {
			case m.Histogram != nil:
				typ = dto.MetricType_HISTOGRAM
			case m.Summary != nil:
				typ = dto.MetricType_SUMMARY
			}
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				add(m[1], typ)
			}
		}
	}
	// The Go and process collectors' own types.
	mfs, err := r.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		add(mf.GetName(), mf.GetType())
	}
	return out
}

// registries are the collectors the daemon's commands serve: `run` (with
// the worker's instruments, watchDepth's queue depths, and an effects.Log
// a handler builds on Env.Metrics), `relay` (with the relay's) and `sweep
// --every` (the sweeper's). The library's components declare their
// instruments when they are built: each is built here, as the command
// builds it, without calling AWS.
func registries(t *testing.T) map[string]bool {
	t.Helper()
	app := App{Name: "orders"}
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	q := sqs.New(sqs.Options{Region: "us-east-1"})
	const queueURL = "https://sqs.us-east-1.amazonaws.com/000000000000/orders"
	store := inbox.Store{Table: "orders"}

	run := &recorder{Registry: prometheus.NewRegistry()}
	metrics, err := registerRun(run, app)
	require.NoError(t, err)
	handlers := ddbworker.NewRegistry()
	require.NoError(t, handlers.Register("OrderPlaced", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Result{}, nil
	})))
	_, err = worker.New(worker.Deps{DynamoDB: ddb, SQS: q, Handlers: handlers, Metrics: metrics}, worker.Config{QueueURL: queueURL, DLQURL: queueURL + "-dlq", Store: store})
	require.NoError(t, err)
	require.NoError(t, run.Register(newQueueDepth()))
	_, err = effects.New(ddb, effects.Config{Inbox: store, Metrics: metrics})
	require.NoError(t, err)
	require.NoError(t, metrics.Err())

	rel := &recorder{Registry: prometheus.NewRegistry()}
	relayMetrics, err := registerRelay(rel, app)
	require.NoError(t, err)
	_, err = relay.New(relay.Deps{DynamoDB: ddb, Streams: dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1"}), SQS: q, Metrics: relayMetrics},
		relay.Config{Table: store.Table, QueueURL: queueURL})
	require.NoError(t, err)
	require.NoError(t, relayMetrics.Err())

	sweep := &recorder{Registry: prometheus.NewRegistry()}
	sweepMetrics := prommetrics.New(sweep)
	_, err = stale.NewSweeper(ddb, stale.SweepConfig{Store: store, Metrics: sweepMetrics})
	require.NoError(t, err)
	require.NoError(t, sweepMetrics.Err())
	names := map[string]bool{}
	for _, r := range []*recorder{run, rel, sweep} {
		for n := range exported(t, r) {
			names[n] = true
		}
	}
	return names
}

// metricNames are the metric names a PromQL expression selects: every
// identifier that is neither a function, a keyword, a label name nor a
// duration, taken as the name of a series.
func metricNames(expr string) []string {
	expr = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)   // label values
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, `{}`) // matchers
	expr = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(expr, "")
	expr = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(expr, "")                     // ranges
	expr = regexp.MustCompile(`\boffset\s+\S+`).ReplaceAllString(expr, "")                 // offsets
	expr = regexp.MustCompile(`\|\s*[a-zA-Z]+`).ReplaceAllString(expr, "")                 // templates' pipes
	expr = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`).ReplaceAllString(expr, "") // variables
	var out []string
	for _, m := range regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`).FindAllString(expr, -1) {
		if strings.HasSuffix(strings.TrimSpace(m), "(") {
			continue // a function or an aggregation
		}
		switch m {
		case "and", "or", "unless", "bool", "inf", "nan", "Inf", "NaN":
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (outcome) (rate(ddbworker_messages_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))`, []string{"ddbworker_messages_total"}},
		{`histogram_quantile(0.99, sum by (job, le) (rate(ddbworker_message_age_seconds_bucket[5m]))) > 300`, []string{"ddbworker_message_age_seconds_bucket"}},
		{"max by (job) (a{q=\"dlq\"}) > max by (job) (a offset 10m)\nunless on (job) b > 0 or (c unless c offset 10m)", []string{"a", "a", "b", "c", "c"}},
		{`label_values(ddbworker_build_info{job=~"$job"}, instance)`, []string{"ddbworker_build_info", "instance"}},
	} {
		require.Equal(t, tc.want, metricNames(tc.expr), tc.expr)
	}
}

// The shipped dashboard, alert rules and ScaledObject name only metrics the
// daemon's commands register (deploy/): a renamed metric fails here, not
// on an operator's empty panel or silent alert.
func TestShippedAssetsNameRegisteredMetrics(t *testing.T) {
	names := registries(t)
	for _, n := range []string{"ddbworker_messages_total", "ddbworker_processing_seconds_bucket", "ddbworker_database_capacity",
		"ddbworker_queue_messages", "ddbworker_relay_lag_seconds", "ddbworker_stuck_records", "ddbworker_effect_unknown_total", "ddbworker_build_info"} {
		require.True(t, names[n], "the registries lack %s: the check would be vacuous", n)
	}
	require.False(t, names["ddbworker_processing_seconds"], "a histogram is selected by its series' names")

	var exprs []string
	// The dashboard's queries and its variables' queries.
	raw, err := os.ReadFile("../deploy/grafana/ddbworker.json")
	require.NoError(t, err)
	var d struct {
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			exprs = append(exprs, q["query"].(string))
		}
	}
	// The alert rules.
	raw, err = os.ReadFile("../deploy/prometheus/ddbworker-alerts.yaml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	// The ScaledObject's Prometheus triggers.
	raw, err = os.ReadFile("../deploy/keda/scaledobject.yaml")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)^\s+query: (.+)$`).FindAllStringSubmatch(string(raw), -1) {
		exprs = append(exprs, m[1])
	}
	require.Greater(t, len(exprs), 30)

	seen := map[string]bool{}
	for _, e := range exprs {
		selected := metricNames(e)
		if strings.HasPrefix(e, "label_values(") {
			selected = selected[:1] // label_values(metric, label)
		}
		require.NotEmpty(t, selected, "%s selects no metric", e)
		for _, n := range selected {
			require.True(t, names[n], "%q names %s, which the daemon does not register", e, n)
			seen[n] = true
		}
	}
	var used []string
	for n := range seen {
		used = append(used, n)
	}
	slices.Sort(used)
	t.Logf("%d metrics named by the shipped assets, all registered: %s", len(used), strings.Join(used, " "))
}
