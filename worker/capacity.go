package worker

import (
	"math"
	"sync"
	"time"
)

// The database capacity gauge, ddbworker_database_capacity: how many
// messages this worker can have in flight now without harming the
// database — the scaling signal (docs/scaling.md). It is
//
//	0                                   while the health gate holds;
//	min(limit, budget), at least 1,     otherwise,
//
// where limit is the adaptive concurrency limit (internal/adaptive: it
// falls when DynamoDB throttles, fails or slows down) and budget the
// concurrency the write budget (Config.MaxWCU) sustains, by Little's law:
//
//	budget = MaxWCU / (write units per message) × (seconds per message)
//	       = MaxWCU × (work − waits) / units
//
// over the recent past (sums decaying with capacityWindow): work is the
// time integral of the messages in the pipeline (message-seconds), waits
// the part of it their writes waited for the budget, units the write units
// the worker's DynamoDB calls cost (what DynamoDB reported, or the
// estimate when it was larger). The per-message count cancels out, so
// every write counts — heartbeats and give-backs too — and a message still
// in flight counts its work so far, as its writes so far count. Without a budget (MaxWCU 0), or before the first write,
// the limit alone decides. Waits are taken out so that the budget's own
// queueing does not pass for capacity: a worker held back by the budget
// reports what the budget allows without waiting, not what it is using.
//
// It moves where its inputs move: setLimit (every DynamoDB call's outcome
// and the restart after an outage) and the health gate's transitions.

// capacityWindow is the time constant of the decaying sums.
const capacityWindow = 30 * time.Second

// capacitySums are the decaying sums of the budget term.
type capacitySums struct {
	maxWCU float64 // 0: unpaced

	mu                 sync.Mutex
	work, waits, units float64 // message-seconds, seconds, write units
	inFlight           int     // messages in the pipeline
	last               time.Time
}

// advance integrates the messages in flight up to now and decays the sums
// (c.mu held).
func (c *capacitySums) advance(now time.Time) {
	if c.last.IsZero() {
		c.last = now
		return
	}
	dt := now.Sub(c.last).Seconds()
	if dt <= 0 {
		return
	}
	k := math.Exp(-dt / capacityWindow.Seconds())
	c.work = c.work*k + float64(c.inFlight)*dt
	c.waits, c.units = c.waits*k, c.units*k
	c.last = now
}

// add adds n messages entering (n > 0) or leaving (n < 0) the pipeline,
// waits and units at now.
func (c *capacitySums) add(now time.Time, n int, waits time.Duration, units float64) {
	if c.maxWCU <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	c.inFlight += n
	c.waits += waits.Seconds()
	c.units += units
}

// budget is the concurrency the write budget sustains at now (+Inf:
// unbounded, without a budget or before the first write).
func (c *capacitySums) budget(now time.Time) float64 {
	if c.maxWCU <= 0 {
		return math.Inf(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	if c.units <= 0 {
		return math.Inf(1)
	}
	return c.maxWCU * max(0, c.work-c.waits) / c.units
}

// databaseCapacity is the gauge's value for a worker whose gate is healthy
// or not, at limit, under budget.
func databaseCapacity(healthy bool, limit int, budget float64) float64 {
	if !healthy {
		return 0
	}
	return max(1, min(float64(limit), math.Floor(budget)))
}

// updateCapacity sets ddbworker_database_capacity from the gate, the pool's
// limit and the write budget.
func (w *Worker) updateCapacity() {
	w.metrics.DatabaseCapacity.Set(databaseCapacity(w.health.Healthy(), w.pool.Limit(), w.capacity.budget(w.cfg.Now())))
}

// working counts a delivery in the pipeline, as work of the budget term,
// until the function it returns is called.
func (w *Worker) working() (done func()) {
	w.capacity.add(w.cfg.Now(), 1, 0, 0)
	return func() {
		w.capacity.add(w.cfg.Now(), -1, 0, 0)
		w.updateCapacity()
	}
}
