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
