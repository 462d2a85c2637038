package relay

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the relay's Prometheus collectors.
type Metrics struct {
	// Published counts outbox records sent and marked PUBLISHED.
	Published prometheus.Counter
	// Skipped counts records not sent because they were no longer PENDING
	// (another relay, a sweep, or a re-read after a crash published them).
	Skipped prometheus.Counter
	// Failures counts failed attempts by step (send, mark, read,
	// checkpoint, stream).
	Failures *prometheus.CounterVec
	// Swept counts records a sweep published.
	Swept prometheus.Counter
	// Shards is the number of shards this instance holds leases on.
	Shards prometheus.Gauge
	// Lag is, over the shards this instance reads, the largest age of the
	// last page's newest stream record (0 when caught up).
	Lag prometheus.Gauge
}

// NewMetrics creates the collectors and registers them with reg (when not
// nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ns := "ddbworker"
	m := &Metrics{
		Published: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "outbox_published_total", Help: "Outbox records sent to SQS and marked PUBLISHED."}),
		Skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "outbox_skipped_total",
			Help: "Outbox records not sent because they were no longer PENDING."}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "outbox_failures_total",
			Help: "Failed relay steps by step (send, mark, read, checkpoint, stream, decode: an outbox item that cannot be read)."}, []string{"step"}),
		Swept:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "outbox_swept_total", Help: "Outbox records published by a sweep."}),
		Shards: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "relay_shards", Help: "Stream shards this relay instance holds leases on."}),
		Lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "relay_lag_seconds",
			Help: "Largest age, over this instance's shards, of the newest stream record of the last page (0 when caught up)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Published, m.Skipped, m.Failures, m.Swept, m.Shards, m.Lag} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
