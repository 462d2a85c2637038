package gate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// WithDefaults fills each zero field from its DefaultX constant (the
// Store's and Policy's from theirs) and keeps each field that is set.
func TestConfigWithDefaults(t *testing.T) {
	zero := gate.Config{}.WithDefaults()
	set := gate.Config{Store: inbox.Store{Table: "t", AttentionShards: 4}, Owner: "w", Policy: stale.Policy{Lease: time.Minute},
		MaxAttempts: 2, MaxTakeovers: 7, MaxRaces: 9}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(gate.Config) any
		dflt, kept any
	}{
		{"MaxAttempts", func(c gate.Config) any { return c.MaxAttempts }, failure.DefaultMaxAttempts, 2},
		{"MaxTakeovers", func(c gate.Config) any { return c.MaxTakeovers }, gate.DefaultMaxTakeovers, 7},
		{"MaxRaces", func(c gate.Config) any { return c.MaxRaces }, gate.DefaultMaxRaces, 9},
		{"Policy.Lease", func(c gate.Config) any { return c.Policy.Lease }, stale.DefaultLease, time.Minute},
		{"Store.AttentionShards", func(c gate.Config) any { return c.Store.AttentionShards }, inbox.DefaultAttentionShards, 4},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotEmpty(t, zero.Owner)
	require.Equal(t, "w", set.Owner)
	require.NotNil(t, zero.Now)
	require.NotNil(t, zero.NewToken)
}
