package prommetrics

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddbworker/ddbworker/metrics"
)

// Provider registers every instrument declared on it with a registry.
// An instrument declared again under the same name, help and labels is
// the one registered first (prometheus.AlreadyRegisteredError); any other
// registration failure is kept for Err, and the instrument counts
// without being exported.
type Provider struct {
	reg prometheus.Registerer

	mu   sync.Mutex
	errs []error
}

// New returns a Provider registering with reg.
func New(reg prometheus.Registerer) *Provider { return &Provider{reg: reg} }

// Err is every registration failure so far, joined (nil: none). A host
// checks it once its components are built.
func (p *Provider) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

// register registers c and returns it, or the collector registered before
// it under the same description.
func register[C prometheus.Collector](p *Provider, name string, c C) C {
	err := p.reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Errorf("metrics: register %s: %w", name, err))
	return c
}

// Counter declares a prometheus.Counter, or with labels a CounterVec.
func (p *Provider) Counter(name, help string, labels ...string) metrics.Vec[metrics.Counter] {
	opts := prometheus.CounterOpts{Name: name, Help: help}
	if len(labels) == 0 {
		return one[metrics.Counter]{register(p, name, prometheus.NewCounter(opts))}
	}
	return counterVec{register(p, name, prometheus.NewCounterVec(opts, labels))}
}

// Gauge declares a prometheus.Gauge, or with labels a GaugeVec.
func (p *Provider) Gauge(name, help string, labels ...string) metrics.Vec[metrics.Gauge] {
	opts := prometheus.GaugeOpts{Name: name, Help: help}
	if len(labels) == 0 {
		return one[metrics.Gauge]{register(p, name, prometheus.NewGauge(opts))}
	}
	return gaugeVec{register(p, name, prometheus.NewGaugeVec(opts, labels))}
}

// Histogram declares a prometheus.Histogram, or with labels a
// HistogramVec.
func (p *Provider) Histogram(name, help string, buckets []float64, labels ...string) metrics.Vec[metrics.Histogram] {
	opts := prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}
	if len(labels) == 0 {
		return one[metrics.Histogram]{register(p, name, prometheus.NewHistogram(opts))}
	}
	return histogramVec{register(p, name, prometheus.NewHistogramVec(opts, labels))}
}

// one is the family of an instrument declared without labels: a plain
// collector, exported (at zero) from the start, as before the interface.
type one[T any] struct{ i T }

func (o one[T]) WithLabelValues(...string) T { return o.i }

type counterVec struct{ v *prometheus.CounterVec }

func (c counterVec) WithLabelValues(lvs ...string) metrics.Counter {
	return c.v.WithLabelValues(lvs...)
}

type gaugeVec struct{ v *prometheus.GaugeVec }

func (g gaugeVec) WithLabelValues(lvs ...string) metrics.Gauge { return g.v.WithLabelValues(lvs...) }

type histogramVec struct{ v *prometheus.HistogramVec }

func (h histogramVec) WithLabelValues(lvs ...string) metrics.Histogram {
	return h.v.WithLabelValues(lvs...)
}
