package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/metrics"
)

// Discard's instruments take every call, with or without labels, and
// count nothing.
func TestDiscard(t *testing.T) {
	require.NotPanics(t, func() {
		metrics.Discard.Counter("c_total", "help", "a").WithLabelValues("x").Add(2)
		g := metrics.Discard.Gauge("g", "help").WithLabelValues()
		g.Set(1)
		g.Inc()
		g.Dec()
		metrics.Discard.Histogram("h_seconds", "help", []float64{1}, "a", "b").WithLabelValues("x", "y").Observe(0.5)
	})
}
