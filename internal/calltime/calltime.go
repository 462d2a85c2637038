// Package calltime owns the time a handler spent waiting on the calls
// ddbworker's own code made for it — the effect log's reads and writes
// (package effects) — so that the worker can tell, when the work's
// deadline ends a run, whether the handler ran long or the database was
// slow under it. The worker puts a Clock in the handler's context; code
// that calls AWS on the handler's behalf times each call with Start.
//
// It is internal: a handler's own calls to its own tables are the
// handler's time, and nothing outside this module can add to the clock.
package calltime

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock adds up the durations of the calls timed under it. It is safe
// for concurrent use (a handler may run effects concurrently).
type Clock struct{ total atomic.Int64 }

// Total is the sum of the durations of the calls that ended.
func (c *Clock) Total() time.Duration { return time.Duration(c.total.Load()) }

type key struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c *Clock) context.Context { return context.WithValue(ctx, key{}, c) }

// Start times one call made with ctx: the returned function, called when
// the call returns, adds its duration to ctx's Clock. Without a Clock in
// ctx (a handler run outside a worker), it does nothing.
func Start(ctx context.Context) (done func()) {
	c, _ := ctx.Value(key{}).(*Clock)
	if c == nil {
		return func() {}
	}
	start := time.Now()
	return func() { c.total.Add(int64(time.Since(start))) }
}
