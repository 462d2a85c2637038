package worker

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDatabaseCapacity(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name    string
		healthy bool
		limit   int
		budget  float64
		want    float64
	}{
		{"the health gate holds: nothing, whatever the limit", false, 16, inf, 0},
		{"healthy, no budget: the adaptive limit", true, 16, inf, 16},
		{"the limit fell after throttling", true, 4, inf, 4},
		{"the budget binds below the limit", true, 16, 6.7, 6},
		{"the budget is looser than the limit", true, 16, 40, 16},
		{"a budget below one message still lets one run", true, 16, 0.3, 1},
		{"unhealthy with a budget: nothing", false, 16, 6.7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, databaseCapacity(tc.healthy, tc.limit, tc.budget))
		})
	}
}

func TestCapacityBudgetTerm(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// message runs one message from start for took, writing units along
	// the way and waiting wait of it for the budget.
	message := func(c *capacitySums, start, took, wait time.Duration, units float64) {
		c.add(at(start), 1, 0, 0)
		c.add(at(start+took/2), 0, wait, units)
		c.add(at(start+took), -1, 0, 0)
	}
	t.Run("unpaced: unbounded, and nothing is summed", func(t *testing.T) {
		c := &capacitySums{}
		message(c, 0, time.Second, 0, 10)
		require.True(t, math.IsInf(c.budget(at(time.Second)), 1))
		require.Zero(t, c.units)
	})
	t.Run("before the first write: unbounded", func(t *testing.T) {
		c := &capacitySums{maxWCU: 100}
		message(c, 0, time.Second, 0, 0)
		require.True(t, math.IsInf(c.budget(at(time.Second)), 1))
	})
	t.Run("Little's law: MaxWCU x seconds per message / units per message", func(t *testing.T) {
		// 10 messages of 50 ms and 4 write units each, one after the
		// other: one slot writes 80 units/s, so a budget of 200 units/s
		// sustains 2.5 slots.
		c := &capacitySums{maxWCU: 200}
		for i := range 10 {
			message(c, time.Duration(i)*50*time.Millisecond, 50*time.Millisecond, 0, 4)
		}
		require.InDelta(t, 2.5, c.budget(at(500*time.Millisecond)), 0.05)
	})
	t.Run("concurrent messages: the same per message", func(t *testing.T) {
		c := &capacitySums{maxWCU: 200}
		for range 10 {
			c.add(t0, 1, 0, 0)
		}
		for range 10 {
			c.add(at(25*time.Millisecond), 0, 0, 4)
		}
		for range 10 {
			c.add(at(50*time.Millisecond), -1, 0, 0)
		}
		require.InDelta(t, 2.5, c.budget(at(50*time.Millisecond)), 0.01)
	})
	t.Run("a message in flight counts its work so far", func(t *testing.T) {
		c := &capacitySums{maxWCU: 200}
		c.add(t0, 1, 0, 0)
		c.add(at(25*time.Millisecond), 0, 0, 4) // its gate write; 25 ms so far
		require.InDelta(t, 1.25, c.budget(at(25*time.Millisecond)), 0.01)
		require.InDelta(t, 2.5, c.budget(at(50*time.Millisecond)), 0.01, "still running, no more writes")
	})
	t.Run("time spent waiting for the budget is not capacity", func(t *testing.T) {
		// The same messages, each held 150 ms by the budget on top: they
		// took 200 ms, but the budget still sustains 2.5 unhindered slots.
		c := &capacitySums{maxWCU: 200}
		for i := range 10 {
			message(c, time.Duration(i)*200*time.Millisecond, 200*time.Millisecond, 150*time.Millisecond, 4)
		}
		require.InDelta(t, 2.5, c.budget(at(2*time.Second)), 0.05)
	})
	t.Run("the past decays: recent messages decide", func(t *testing.T) {
		c := &capacitySums{maxWCU: 200}
		message(c, 0, 50*time.Millisecond, 0, 4) // 2.5 slots
		later := 10 * capacityWindow
		message(c, later, 50*time.Millisecond, 0, 1) // now 1 unit per message: 10 slots
		require.InDelta(t, 10, c.budget(at(later+50*time.Millisecond)), 0.05)
	})
	t.Run("idle time decays both terms alike", func(t *testing.T) {
		c := &capacitySums{maxWCU: 200}
		message(c, 0, 50*time.Millisecond, 0, 4)
		require.InDelta(t, 2.5, c.budget(at(capacityWindow)), 0.05)
	})
}
