package emf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// EMF's and CloudWatch's limits.
const (
	// MaxMetrics is the most MetricDefinitions a document's directive holds.
	MaxMetrics = 100
	// MaxValues is the most values a metric's array holds.
	MaxValues = 100
	// MaxDimensions is the most dimension keys a DimensionSet holds.
	MaxDimensions = 30
	// MaxDimensionValue is the longest dimension value, in characters.
	MaxDimensionValue = 1024
	// MaxDimensionKey is the longest dimension key, in characters.
	MaxDimensionKey = 250
	// MaxNamespace is the longest CloudWatch namespace.
	MaxNamespace = 255
	// StorageResolution is the resolution every metric is stored at:
	// standard, one minute.
	StorageResolution = 60
)

// CloudWatch units.
const (
	UnitCount   = "Count"
	UnitSeconds = "Seconds"
	UnitNone    = "None"
)

// Metric is a Prometheus metric family to report: a counter, a gauge or a
// histogram, by its full name (ddbworker_messages_total), with its
// CloudWatch unit.
type Metric struct {
	Name string
	Unit string
}

// Dimension is a dimension every document carries.
type Dimension struct{ Key, Value string }

// Config configures a Reporter.
type Config struct {
	// Namespace is the CloudWatch namespace. Required: 1..255 of
	// 0-9A-Za-z . - _ / # : and space, not all spaces, not AWS/….
	Namespace string
	// Dimensions are added to every document, before the series' labels;
	// one with an empty value is left out.
	Dimensions []Dimension
	// Metrics are the families reported; others are ignored.
	Metrics []Metric
}

// Reporter reports what changed in a registry since its last report. It
// is safe for concurrent use: every increase is reported once, by the
// report that first sees it.
type Reporter struct {
	g     prometheus.Gatherer
	ns    string
	fixed []Dimension
	units map[string]string

	mu   sync.Mutex
	last map[string]seriesState // by family and label signature
}

// seriesState is a series' value at the last report.
type seriesState struct {
	value   float64   // counter, gauge
	count   uint64    // histogram
	sum     float64   // histogram
	buckets []float64 // histogram: cumulative counts by upper bound, in order
}

// New validates cfg and returns a Reporter of g.
func New(g prometheus.Gatherer, cfg Config) (*Reporter, error) {
	var errs []error
	if err := CheckNamespace(cfg.Namespace); err != nil {
		errs = append(errs, err)
	}
	r := &Reporter{g: g, ns: cfg.Namespace, units: map[string]string{}, last: map[string]seriesState{}}
	keys := map[string]bool{}
	for _, d := range cfg.Dimensions {
		switch {
		case d.Key == "" || utf8.RuneCountInString(d.Key) > MaxDimensionKey:
			errs = append(errs, fmt.Errorf("emf: dimension key %q must have 1..%d characters", d.Key, MaxDimensionKey))
		case keys[d.Key]:
			errs = append(errs, fmt.Errorf("emf: dimension %q twice", d.Key))
		case d.Value != "":
			keys[d.Key] = true
			r.fixed = append(r.fixed, Dimension{Key: d.Key, Value: truncate(d.Value)})
		}
	}
	for _, m := range cfg.Metrics {
		switch {
		case m.Name == "":
			errs = append(errs, errors.New("emf: a metric needs a name"))
		case keys[m.Name]:
			errs = append(errs, fmt.Errorf("emf: metric %q is also a dimension", m.Name))
		case !validUnit(m.Unit):
			errs = append(errs, fmt.Errorf("emf: metric %q: unit %q is not a CloudWatch unit", m.Name, m.Unit))
		}
		r.units[m.Name] = m.Unit
	}
	if len(r.fixed) >= MaxDimensions {
		errs = append(errs, fmt.Errorf("emf: %d fixed dimensions leave no room for labels (at most %d)", len(r.fixed), MaxDimensions))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// CheckNamespace applies CloudWatch's rules for a custom namespace.
func CheckNamespace(ns string) error {
	if ns == "" || len(ns) > MaxNamespace || strings.TrimSpace(ns) == "" {
		return fmt.Errorf("emf: namespace %q must have 1..%d characters, not all spaces", ns, MaxNamespace)
	}
	for _, c := range ns {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune("._-/#: ", c)) {
			return fmt.Errorf("emf: namespace %q: %q is not allowed (0-9A-Za-z . - _ / # : and space)", ns, c)
		}
	}
	if strings.HasPrefix(ns, "AWS/") {
		return fmt.Errorf("emf: namespace %q: AWS/ is AWS's own", ns)
	}
	return nil
}

// validUnit reports a unit EMF accepts ("" is None).
func validUnit(u string) bool {
	switch u {
	case "", "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
		"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
		"Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
		"Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None":
		return true
	}
	return false
}

// truncate cuts a dimension value to MaxDimensionValue characters.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= MaxDimensionValue {
		return s
	}
	return string([]rune(s)[:MaxDimensionValue])
}

// entry is one metric of a label set's report: a number, or values.
type entry struct {
	name   string
	unit   string
	values []float64
	single bool // a number, not an array
}

// group is one label set's report.
type group struct {
	labels  []Dimension // the series' labels with values, by name
	entries []entry
}

// Report gathers the registry and returns the documents of what changed
// since the last report, at now: none when nothing did. A series it cannot
// report (a label that is also a fixed dimension or a metric's name, more
// labels than EMF's dimensions allow) is left out and named in the error;
// the rest is reported.
func (r *Reporter) Report(now time.Time) ([][]byte, error) {
	r.mu.Lock() // gathered under the lock: a later gather is compared with a later state
	defer r.mu.Unlock()
	mfs, gatherErr := r.g.Gather()
	var errs []error
	if gatherErr != nil {
		errs = append(errs, fmt.Errorf("emf: gathering: %w", gatherErr))
	}
	groups := map[string]*group{}
	var order []string
	changed := false
	for _, mf := range mfs {
		unit, ok := r.units[mf.GetName()]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels, err := r.labels(mf.GetName(), m)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			key := mf.GetName() + "\xff" + signature(labels)
			e, moved, ok := r.delta(key, mf.GetName(), unit, mf.GetType(), m)
			if !ok {
				errs = append(errs, fmt.Errorf("emf: %s is a %s: only counters, gauges and histograms are reported", mf.GetName(), mf.GetType()))
				break
			}
			changed = changed || moved
			if e == nil {
				continue
			}
			gk := signature(labels)
			g := groups[gk]
			if g == nil {
				g = &group{labels: labels}
				groups[gk] = g
				order = append(order, gk)
			}
			g.entries = append(g.entries, *e)
		}
	}
	if !changed {
		return nil, errors.Join(errs...)
	}
	slices.Sort(order)
	var docs [][]byte
	for _, gk := range order {
		for _, part := range split(groups[gk].entries) {
			doc, err := r.document(now, groups[gk].labels, part)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			docs = append(docs, doc)
		}
	}
	return docs, errors.Join(errs...)
}

// labels are m's labels with values, by name, checked against the
// document's other root members.
func (r *Reporter) labels(family string, m *dto.Metric) ([]Dimension, error) {
	var out []Dimension
	for _, lp := range m.GetLabel() {
		if lp.GetValue() == "" {
			continue
		}
		k := lp.GetName()
		if _, isMetric := r.units[k]; isMetric || slices.ContainsFunc(r.fixed, func(d Dimension) bool { return d.Key == k }) {
			return nil, fmt.Errorf("emf: %s: label %q is also a dimension or a metric", family, k)
		}
		out = append(out, Dimension{Key: k, Value: truncate(lp.GetValue())})
	}
	slices.SortFunc(out, func(a, b Dimension) int { return strings.Compare(a.Key, b.Key) })
	if len(r.fixed)+len(out) > MaxDimensions {
		return nil, fmt.Errorf("emf: %s: %d labels and %d fixed dimensions exceed EMF's %d", family, len(out), len(r.fixed), MaxDimensions)
	}
	return out, nil
}

func signature(labels []Dimension) string {
	var b strings.Builder
	for _, l := range labels {
		b.WriteString(l.Key)
		b.WriteByte(0)
		b.WriteString(l.Value)
		b.WriteByte(0)
	}
	return b.String()
}

// delta compares m with its state at the last report, records its state
// now and returns what to report (nil: nothing), whether it changed, and
// false for a type it does not report.
func (r *Reporter) delta(key, name, unit string, typ dto.MetricType, m *dto.Metric) (e *entry, moved, ok bool) {
	prev, seen := r.last[key]
	switch typ {
	case dto.MetricType_COUNTER:
		v := m.GetCounter().GetValue()
		r.last[key] = seriesState{value: v}
		d := v - prev.value
		if d < 0 { // a counter that restarted
			d = v
		}
		if d <= 0 || !finite(d) {
			return nil, false, true
		}
		return &entry{name: name, unit: unit, values: []float64{d}, single: true}, true, true
	case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
		v := m.GetGauge().GetValue()
		if typ == dto.MetricType_UNTYPED {
			v = m.GetUntyped().GetValue()
		}
		r.last[key] = seriesState{value: v}
		if !finite(v) {
			return nil, false, true
		}
		return &entry{name: name, unit: unit, values: []float64{v}, single: true}, !seen || v != prev.value, true
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		now := seriesState{count: h.GetSampleCount(), sum: h.GetSampleSum()}
		var bounds []float64
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			bounds = append(bounds, b.GetUpperBound())
			now.buckets = append(now.buckets, float64(b.GetCumulativeCount()))
		}
		r.last[key] = now
		if now.count < prev.count || len(prev.buckets) != len(now.buckets) { // restarted
			prev = seriesState{buckets: make([]float64, len(now.buckets))}
		}
		n := now.count - prev.count
		if n == 0 {
			return nil, false, true
		}
		return &entry{name: name, unit: unit, values: observations(bounds, prev, now, n)}, true, true
	}
	return nil, false, false
}

// observations are a histogram's n new observations between prev and now:
// its sum's increase when n is 1, otherwise each bucket's upper bound once
// per observation in it, ascending.
func observations(bounds []float64, prev, now seriesState, n uint64) []float64 {
	if n == 1 {
		if v := now.sum - prev.sum; finite(v) {
			return []float64{v}
		}
	}
	out := make([]float64, 0, n)
	below := 0.0 // new observations at or below the previous bound
	for i, ub := range bounds {
		cum := now.buckets[i] - prev.buckets[i]
		for range int(cum - below) {
			out = append(out, ub)
		}
		below = cum
	}
	top := float64(n) - below // in the +Inf bucket
	if top > 0 {
		v := now.sum - prev.sum // no finite bound: the mean
		if len(bounds) > 0 {
			v = bounds[len(bounds)-1]
		} else {
			v /= float64(n)
		}
		for range int(top) {
			out = append(out, v)
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// split packs a label set's entries into documents: at most MaxMetrics
// metrics each, every array cut into parts of at most MaxValues values, a
// metric at most once per document.
func split(entries []entry) [][]entry {
	var parts [][]entry // per entry, its pieces
	for _, e := range entries {
		if e.single || len(e.values) <= MaxValues {
			parts = append(parts, []entry{e})
			continue
		}
		var pieces []entry
		for v := range slices.Chunk(e.values, MaxValues) {
			pieces = append(pieces, entry{name: e.name, unit: e.unit, values: v})
		}
		parts = append(parts, pieces)
	}
	var docs [][]entry
	for {
		var doc []entry
		for i := range parts {
			if len(parts[i]) == 0 {
				continue
			}
			if len(doc) == MaxMetrics {
				docs = append(docs, doc)
				doc = nil
			}
			doc = append(doc, parts[i][0])
			parts[i] = parts[i][1:]
		}
		if len(doc) == 0 {
			return docs
		}
		docs = append(docs, doc)
	}
}

type metricDefinition struct {
	Name              string `json:"Name"`
	Unit              string `json:"Unit"`
	StorageResolution int    `json:"StorageResolution"`
}

type directive struct {
	Namespace  string             `json:"Namespace"`
	Dimensions [][]string         `json:"Dimensions"`
	Metrics    []metricDefinition `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// document is one EMF document: the _aws metadata, then the dimensions'
// values, then the metrics' values, as root members.
func (r *Reporter) document(now time.Time, labels []Dimension, entries []entry) ([]byte, error) {
	dims := append(slices.Clone(r.fixed), labels...)
	d := directive{Namespace: r.ns, Dimensions: [][]string{make([]string, 0, len(dims))}}
	for _, dim := range dims {
		d.Dimensions[0] = append(d.Dimensions[0], dim.Key)
	}
	for _, e := range entries {
		unit := e.unit
		if unit == "" {
			unit = UnitNone
		}
		d.Metrics = append(d.Metrics, metricDefinition{Name: e.name, Unit: unit, StorageResolution: StorageResolution})
	}
	var b bytes.Buffer
	b.WriteString(`{"_aws":`)
	meta, err := json.Marshal(metadata{Timestamp: now.UnixMilli(), CloudWatchMetrics: []directive{d}})
	if err != nil {
		return nil, fmt.Errorf("emf: %w", err)
	}
	b.Write(meta)
	member := func(k string, v any) error {
		kj, err := json.Marshal(k)
		if err != nil {
			return err
		}
		vj, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.WriteByte(',')
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
		return nil
	}
	for _, dim := range dims {
		if err := member(dim.Key, dim.Value); err != nil {
			return nil, fmt.Errorf("emf: %w", err)
		}
	}
	for _, e := range entries {
		var v any = e.values
		if e.single {
			v = e.values[0]
		}
		if err := member(e.name, v); err != nil {
			return nil, fmt.Errorf("emf: %s: %w", e.name, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
