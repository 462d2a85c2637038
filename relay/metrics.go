package relay

import "github.com/ddbworker/ddbworker/metrics"

// instruments are what the relay reports through Deps.Metrics.
type instruments struct {
	// Published counts outbox records sent and marked PUBLISHED.
	Published metrics.Counter
	// Skipped counts records not sent because they were no longer PENDING
	// (another relay, a sweep, or a re-read after a crash published them).
	Skipped metrics.Counter
	// Failures counts failed attempts by step (send, mark, read,
	// checkpoint, stream).
	Failures metrics.Vec[metrics.Counter]
	// Swept counts records a sweep published.
	Swept metrics.Counter
	// Shards is the number of shards this instance holds leases on.
	Shards metrics.Gauge
	// Lag is, over the shards this instance reads, the largest age of the
	// last page's newest stream record (0 when caught up).
	Lag metrics.Gauge
}

// newInstruments declares the relay's instruments on p.
func newInstruments(p metrics.Provider) *instruments {
	return &instruments{
		Published: p.Counter("ddbworker_outbox_published_total", "Outbox records sent to SQS and marked PUBLISHED.").WithLabelValues(),
		Skipped:   p.Counter("ddbworker_outbox_skipped_total", "Outbox records not sent because they were no longer PENDING.").WithLabelValues(),
		Failures: p.Counter("ddbworker_outbox_failures_total",
			"Failed relay steps by step (send, mark, read, checkpoint, stream, decode: an outbox item that cannot be read).", "step"),
		Swept:  p.Counter("ddbworker_outbox_swept_total", "Outbox records published by a sweep.").WithLabelValues(),
		Shards: p.Gauge("ddbworker_relay_shards", "Stream shards this relay instance holds leases on.").WithLabelValues(),
		Lag: p.Gauge("ddbworker_relay_lag_seconds",
			"Largest age, over this instance's shards, of the newest stream record of the last page (0 when caught up).").WithLabelValues(),
	}
}
