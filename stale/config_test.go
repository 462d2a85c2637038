package stale_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// SweepConfig.WithDefaults fills each zero field from its DefaultX
// constant, keeps each field that is set, reads a Grace of Zero as none,
// and pages the index when the store indexes PROCESSING records.
func TestSweepConfigWithDefaults(t *testing.T) {
	zero := stale.SweepConfig{}.WithDefaults()
	set := stale.SweepConfig{Store: inbox.Store{Table: "t", IndexProcessing: true}, Policy: stale.Policy{Lease: time.Minute},
		Grace: stale.Zero, PageSize: 25}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(stale.SweepConfig) any
		dflt, kept any
	}{
		{"Grace", func(c stale.SweepConfig) any { return c.Grace }, stale.DefaultGrace, time.Duration(0)},
		{"PageSize", func(c stale.SweepConfig) any { return c.PageSize }, stale.DefaultPageSize, 25},
		{"Policy.Lease", func(c stale.SweepConfig) any { return c.Policy.Lease }, stale.DefaultLease, time.Minute},
		{"Policy.Skew", func(c stale.SweepConfig) any { return c.Policy.Skew }, stale.DefaultSkew, stale.DefaultSkew},
		{"UseIndex", func(c stale.SweepConfig) any { return c.UseIndex }, false, true},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotNil(t, zero.Now)
}
