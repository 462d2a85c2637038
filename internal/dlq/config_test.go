package dlq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dlq"
)

// WithDefaults fills each zero field from its DefaultX constant and keeps
// each field that is set.
func TestConfigWithDefaults(t *testing.T) {
	zero := dlq.Config{}.WithDefaults()
	set := dlq.Config{Hide: time.Minute, WaitTime: 5 * time.Second, EmptyReceives: 4, MaxScan: 9, ReleaseTimeout: time.Second}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(dlq.Config) any
		dflt, kept any
	}{
		{"Hide", func(c dlq.Config) any { return c.Hide }, dlq.DefaultHide, time.Minute},
		{"WaitTime", func(c dlq.Config) any { return c.WaitTime }, dlq.DefaultWaitTime, 5 * time.Second},
		{"EmptyReceives", func(c dlq.Config) any { return c.EmptyReceives }, dlq.DefaultEmptyReceives, 4},
		{"MaxScan", func(c dlq.Config) any { return c.MaxScan }, dlq.DefaultMaxScan, 9},
		{"ReleaseTimeout", func(c dlq.Config) any { return c.ReleaseTimeout }, dlq.DefaultReleaseTimeout, time.Second},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotNil(t, zero.Now)
}
