package fair_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/fair"
)

// popAll pops until nothing is eligible and returns the tenants in order.
func popAll(d *fair.DRR[int], eligible func(string) bool) []string {
	var out []string
	for {
		t, _, ok := d.Pop(eligible)
		if !ok {
			return out
		}
		out = append(out, t)
	}
}

func TestDRR(t *testing.T) {
	t.Run("one tenant is served in order, whole", func(t *testing.T) {
		d := fair.New[int](1)
		for i := range 5 {
			d.Push("A", i, 1)
		}
		for i := range 5 {
			tenant, item, ok := d.Pop(nil)
			require.True(t, ok)
			require.Equal(t, "A", tenant)
			require.Equal(t, i, item)
		}
		_, _, ok := d.Pop(nil)
		require.False(t, ok)
		require.Zero(t, d.Len())
	})
	t.Run("a backlog does not hold back a tenant that arrives", func(t *testing.T) {
		d := fair.New[int](1)
		for i := range 1000 {
			d.Push("A", i, 1)
		}
		_, _, _ = d.Pop(nil) // A's turn has begun
		d.Push("B", 0, 1)
		d.Push("C", 0, 1)
		// B and C each wait at most one turn of every tenant ahead of them.
		got := []string{}
		for range 4 {
			tenant, _, _ := d.Pop(nil)
			got = append(got, tenant)
		}
		require.Equal(t, []string{"B", "C", "A", "A"}, got)
	})
	t.Run("equal shares of cost while everyone has a backlog", func(t *testing.T) {
		d := fair.New[int](4)
		for i := range 400 {
			d.Push("small", i, 1) // cost 1 each
			if i < 100 {
				d.Push("large", i, 4) // cost 4 each
			}
		}
		cost := map[string]int{}
		for range 200 {
			tenant, _, ok := d.Pop(nil)
			require.True(t, ok)
			cost[tenant] += map[string]int{"small": 1, "large": 4}[tenant]
		}
		require.InDelta(t, cost["small"], cost["large"], 8, "cost served: %v", cost)
	})
	t.Run("an ineligible tenant is passed over and keeps its place", func(t *testing.T) {
		d := fair.New[int](1)
		for i := range 3 {
			d.Push("A", i, 1)
			d.Push("B", i, 1)
		}
		require.Equal(t, []string{"B", "B", "B"}, popAll(d, func(t string) bool { return t != "A" }))
		require.Equal(t, 3, d.Waiting("A"))
		require.Empty(t, popAll(d, func(string) bool { return false }))
		require.Equal(t, []string{"A", "A", "A"}, popAll(d, nil))
	})
	t.Run("an item costlier than the quantum waits for its deficit, others pass", func(t *testing.T) {
		d := fair.New[int](1)
		d.Push("big", 0, 3)
		for i := range 3 {
			d.Push("small", i, 1)
		}
		require.Equal(t, []string{"small", "small", "big", "small"}, popAll(d, nil))
	})
	t.Run("drain takes everything", func(t *testing.T) {
		d := fair.New[int](1)
		d.Push("A", 1, 1)
		d.Push("B", 2, 1)
		d.Push("A", 3, 1)
		require.ElementsMatch(t, []int{1, 2, 3}, d.Drain())
		require.Zero(t, d.Len())
		require.Zero(t, d.Tenants())
	})
}
