package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The read ahead runs while duplicates arrive: a worker starts reading,
// stops after a run of fresh work (191 deliveries: 1 × (63/64)^191 < 0.05),
// and reads again once duplicates return (four in a row from nothing).
func TestDuplicateShare(t *testing.T) {
	s := newDuplicateShare()
	require.True(t, s.high(), "a new worker reads ahead")
	for range 190 {
		s.observe(false)
	}
	require.True(t, s.high(), "190 fresh deliveries: still reading")
	s.observe(false)
	require.False(t, s.high(), "191: the share fell under 1 in 20")
	for range 1000 {
		s.observe(false)
	}
	require.False(t, s.high())
	for range 3 {
		s.observe(true)
	}
	require.False(t, s.high(), "three duplicates after a quiet spell: not yet")
	s.observe(true)
	require.True(t, s.high(), "the fourth: reading again")

	// A steady share of duplicates: the weighted share follows it.
	tests := []struct {
		every int // one duplicate in every
		high  bool
	}{
		{2, true}, {10, true}, {100, false}, {1000, false},
	}
	for _, tt := range tests {
		s := newDuplicateShare()
		highs := 0
		for i := range 10000 {
			s.observe(i%tt.every == 0)
			if i >= 5000 && s.high() {
				highs++
			}
		}
		if tt.high {
			require.Equal(t, 5000, highs, "1 in %d: always reading", tt.every)
		} else {
			require.Less(t, highs, 2500, "1 in %d: mostly not reading", tt.every)
		}
	}
}
