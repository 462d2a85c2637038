package effects

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Log's Prometheus collectors. Their labels are the Call's
// Provider and Operation (constants of the handler's code) and fixed
// words; never keys.
type metrics struct {
	calls      *prometheus.CounterVec   // provider, operation, result
	answered   *prometheus.CounterVec   // provider, operation, status
	unknown    *prometheus.CounterVec   // provider, operation
	mismatches *prometheus.CounterVec   // provider, operation
	deferred   *prometheus.CounterVec   // provider, operation
	duration   *prometheus.HistogramVec // provider, operation
}

type labels struct{ provider, operation string }

func (l labels) values() []string { return []string{l.provider, l.operation} }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "ddbworker"
	po := []string{"provider", "operation"}
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "effect_calls_total",
			Help: "Provider calls made through the effect log, by result: completed, refused, not_done, unclear."},
			[]string{"provider", "operation", "result"}),
		answered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "effect_log_answers_total",
			Help: "Do calls answered from the log without calling the provider, by the status found (COMPLETED, FAILED, UNKNOWN, IN_PROGRESS)."},
			[]string{"provider", "operation", "status"}),
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "effect_unknown_total",
			Help: "Effects marked UNKNOWN: an operator must resolve each (alert on any)."}, po),
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "effect_request_mismatches_total",
			Help: "Do calls whose request differs from the one recorded under the effect key (alert on any)."}, po),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "effect_completions_deferred_total",
			Help: "Completions that could not be written after the call and travelled with the work's commit instead."}, po),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "effect_call_seconds",
			Help: "Duration of provider calls.", Buckets: prometheus.DefBuckets}, po),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	register := func(c prometheus.Collector) prometheus.Collector {
		err := reg.Register(c)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("effects: register metrics: %w", err))
		}
		return c
	}
	m.calls = register(m.calls).(*prometheus.CounterVec)
	m.answered = register(m.answered).(*prometheus.CounterVec)
	m.unknown = register(m.unknown).(*prometheus.CounterVec)
	m.mismatches = register(m.mismatches).(*prometheus.CounterVec)
	m.deferred = register(m.deferred).(*prometheus.CounterVec)
	m.duration = register(m.duration).(*prometheus.HistogramVec)
	return m, errors.Join(errs...)
}
