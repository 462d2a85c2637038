package metricstest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ddbworker/ddbworker/metrics"
)

// Provider keeps every instrument declared on it. A name declared again
// with the same kind and labels is the same instrument; otherwise it
// panics, as a registry refuses it.
type Provider struct {
	mu       sync.Mutex
	families map[string]*family
}

// New returns an empty Provider.
func New() *Provider { return &Provider{families: map[string]*family{}} }

type family struct {
	kind   string
	labels []string
	series map[string]*series // by the label values joined
	order  []string
}

type series struct {
	mu     sync.Mutex
	values []string
	v      float64 // a counter's or gauge's value, a histogram's sum
	n      uint64  // a histogram's observations
}

func (s *series) Inc() { s.Add(1) }
func (s *series) Dec() { s.Add(-1) }
func (s *series) Add(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v += v
}
func (s *series) Set(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = v
}
func (s *series) Observe(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v += v
	s.n++
}

type vec[T any] struct {
	p    *Provider
	name string
	f    *family
}

func (v vec[T]) WithLabelValues(values ...string) T {
	if len(values) != len(v.f.labels) {
		panic(fmt.Sprintf("metricstest: %s has labels %v, got values %q", v.name, v.f.labels, values))
	}
	key := strings.Join(values, "\xff")
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	s, ok := v.f.series[key]
	if !ok {
		s = &series{values: values}
		v.f.series[key] = s
		v.f.order = append(v.f.order, key)
	}
	var i any = s
	return i.(T)
}

func declare[T any](p *Provider, kind, name string, labels []string) vec[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.families[name]
	if !ok {
		f = &family{kind: kind, labels: labels, series: map[string]*series{}}
		p.families[name] = f
	} else if f.kind != kind || strings.Join(f.labels, ",") != strings.Join(labels, ",") {
		panic(fmt.Sprintf("metricstest: %s declared as a %s %v and as a %s %v", name, f.kind, f.labels, kind, labels))
	}
	return vec[T]{p: p, name: name, f: f}
}

// Counter implements metrics.Provider.
func (p *Provider) Counter(name, _ string, labels ...string) metrics.Vec[metrics.Counter] {
	return declare[metrics.Counter](p, "counter", name, labels)
}

// Gauge implements metrics.Provider.
func (p *Provider) Gauge(name, _ string, labels ...string) metrics.Vec[metrics.Gauge] {
	return declare[metrics.Gauge](p, "gauge", name, labels)
}

// Histogram implements metrics.Provider.
func (p *Provider) Histogram(name, _ string, _ []float64, labels ...string) metrics.Vec[metrics.Histogram] {
	return declare[metrics.Histogram](p, "histogram", name, labels)
}

func (p *Provider) find(name string, values []string) *series {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.families[name]
	if !ok {
		return nil
	}
	return f.series[strings.Join(values, "\xff")]
}

// Value is a counter's or gauge's value (a histogram's sum) for the label
// values; 0 for a series never used.
func (p *Provider) Value(name string, values ...string) float64 {
	s := p.find(name, values)
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// Count is how many observations a histogram's series holds; 0 for a
// series never used.
func (p *Provider) Count(name string, values ...string) uint64 {
	s := p.find(name, values)
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Series are the label sets name has series for (as a Prometheus vector
// exports them: every set WithLabelValues was called with), each as label
// name to value, in the order they were first used.
func (p *Provider) Series(name string) []map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.families[name]
	if !ok {
		return nil
	}
	out := make([]map[string]string, 0, len(f.order))
	for _, k := range f.order {
		m := make(map[string]string, len(f.labels))
		for i, l := range f.labels {
			m[l] = f.series[k].values[i]
		}
		out = append(out, m)
	}
	return out
}

// Sum adds up, over the series of name whose labels include match (nil:
// every series), a counter's or a gauge's value, or a histogram's number
// of observations.
func (p *Provider) Sum(name string, match map[string]string) float64 {
	p.mu.Lock()
	f, ok := p.families[name]
	var ss []*series
	if ok {
	next:
		for _, k := range f.order {
			s := f.series[k]
			for i, l := range f.labels {
				if v, ok := match[l]; ok && v != s.values[i] {
					continue next
				}
			}
			ss = append(ss, s)
		}
	}
	p.mu.Unlock()
	total := 0.0
	for _, s := range ss {
		s.mu.Lock()
		if f.kind == "histogram" {
			total += float64(s.n)
		} else {
			total += s.v
		}
		s.mu.Unlock()
	}
	return total
}
