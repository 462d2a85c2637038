package effects

import "github.com/ddbworker/ddbworker/metrics"

// instruments are what the Log reports through Config.Metrics. Their
// labels are the Call's Provider and Operation (constants of the
// handler's code) and fixed words; never keys.
type instruments struct {
	calls      metrics.Vec[metrics.Counter]   // provider, operation, result
	answered   metrics.Vec[metrics.Counter]   // provider, operation, status
	unknown    metrics.Vec[metrics.Counter]   // provider, operation
	mismatches metrics.Vec[metrics.Counter]   // provider, operation
	deferred   metrics.Vec[metrics.Counter]   // provider, operation
	duration   metrics.Vec[metrics.Histogram] // provider, operation
}

type labels struct{ provider, operation string }

func (l labels) values() []string { return []string{l.provider, l.operation} }

// defBuckets are the duration buckets of effect_call_seconds
// (prometheus.DefBuckets' figures).
var defBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newInstruments declares the Log's instruments on p.
func newInstruments(p metrics.Provider) *instruments {
	po := []string{"provider", "operation"}
	return &instruments{
		calls: p.Counter("ddbworker_effect_calls_total",
			"Provider calls made through the effect log, by result: completed, refused, not_done, unclear.",
			"provider", "operation", "result"),
		answered: p.Counter("ddbworker_effect_log_answers_total",
			"Do calls answered from the log without calling the provider, by the status found (COMPLETED, FAILED, UNKNOWN, IN_PROGRESS).",
			"provider", "operation", "status"),
		unknown: p.Counter("ddbworker_effect_unknown_total",
			"Effects marked UNKNOWN: an operator must resolve each (alert on any).", po...),
		mismatches: p.Counter("ddbworker_effect_request_mismatches_total",
			"Do calls whose request differs from the one recorded under the effect key (alert on any).", po...),
		deferred: p.Counter("ddbworker_effect_completions_deferred_total",
			"Completions that could not be written after the call and travelled with the work's commit instead.", po...),
		duration: p.Histogram("ddbworker_effect_call_seconds",
			"Duration of provider calls.", defBuckets, po...),
	}
}
