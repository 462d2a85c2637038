package prommetrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/prommetrics"
)

// Instruments declared on the Provider are the registry's collectors: an
// instrument without labels is exported at zero from its declaration (as
// the collectors were before the interface), a family once a label set is
// used, a histogram with its buckets.
func TestProviderRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := prommetrics.New(reg)
	received := p.Counter("ddbworker_messages_received_total", "SQS messages received.").WithLabelValues()
	outcomes := p.Counter("ddbworker_messages_total", "Processed deliveries.", "message_type", "outcome")
	p.Gauge("ddbworker_in_flight", "Messages being processed.").WithLabelValues().Set(3)
	sizes := p.Histogram("ddbworker_inbox_record_bytes", "Size of records.", []float64{256, 1024}, "message_type")
	require.NoError(t, p.Err())
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ddbworker_in_flight Messages being processed.
# TYPE ddbworker_in_flight gauge
ddbworker_in_flight 3
# HELP ddbworker_messages_received_total SQS messages received.
# TYPE ddbworker_messages_received_total counter
ddbworker_messages_received_total 0
`)))

	received.Add(2)
	outcomes.WithLabelValues("OrderPlaced", "applied").Inc()
	sizes.WithLabelValues("OrderPlaced").Observe(300)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ddbworker_inbox_record_bytes Size of records.
# TYPE ddbworker_inbox_record_bytes histogram
ddbworker_inbox_record_bytes_bucket{message_type="OrderPlaced",le="256"} 0
ddbworker_inbox_record_bytes_bucket{message_type="OrderPlaced",le="1024"} 1
ddbworker_inbox_record_bytes_bucket{message_type="OrderPlaced",le="+Inf"} 1
ddbworker_inbox_record_bytes_sum{message_type="OrderPlaced"} 300
ddbworker_inbox_record_bytes_count{message_type="OrderPlaced"} 1
# HELP ddbworker_messages_received_total SQS messages received.
# TYPE ddbworker_messages_received_total counter
ddbworker_messages_received_total 2
# HELP ddbworker_messages_total Processed deliveries.
# TYPE ddbworker_messages_total counter
ddbworker_messages_total{message_type="OrderPlaced",outcome="applied"} 1
`), "ddbworker_inbox_record_bytes", "ddbworker_messages_received_total", "ddbworker_messages_total"))
}

// An instrument declared again alike is the one registered first (two
// effects.Logs on one registry count together); one declared again
// differently is a registration failure Err reports, and counts unexported.
func TestProviderRedeclared(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := prommetrics.New(reg)
	for _, n := range []float64{1, 2} {
		p.Counter("ddbworker_effect_calls_total", "Provider calls.", "provider").WithLabelValues("payments").Add(n)
		p.Counter("ddbworker_sweep_marked_total", "Records marked.").WithLabelValues().Add(n)
	}
	require.NoError(t, p.Err())
	require.Equal(t, 2, testutil.CollectAndCount(reg))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ddbworker_effect_calls_total Provider calls.
# TYPE ddbworker_effect_calls_total counter
ddbworker_effect_calls_total{provider="payments"} 3
# HELP ddbworker_sweep_marked_total Records marked.
# TYPE ddbworker_sweep_marked_total counter
ddbworker_sweep_marked_total 3
`)))

	p.Gauge("ddbworker_sweep_marked_total", "Records marked.").WithLabelValues().Set(7) // a gauge now
	p.Counter("ddbworker_effect_calls_total", "Other help.", "provider").WithLabelValues("payments").Inc()
	err := p.Err()
	require.ErrorContains(t, err, "metrics: register ddbworker_sweep_marked_total")
	require.ErrorContains(t, err, "metrics: register ddbworker_effect_calls_total")
	require.Equal(t, 2, testutil.CollectAndCount(reg), "nothing else exported")
}
