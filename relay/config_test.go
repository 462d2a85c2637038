package relay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
)

// WithDefaults fills each zero field from its DefaultX constant and keeps
// each field that is set.
func TestConfigWithDefaults(t *testing.T) {
	zero := relay.Config{}.WithDefaults()
	set := relay.Config{Shards: 3, Name: "n", Owner: "o", LeaseDuration: time.Minute, PollInterval: 2 * time.Second,
		DiscoveryInterval: 3 * time.Second, PublishedTTL: time.Hour, SendAttempts: 5, DrainTimeout: 4 * time.Second, SweepAge: time.Hour}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(relay.Config) any
		dflt, kept any
	}{
		{"Shards", func(c relay.Config) any { return c.Shards }, outbox.DefaultShards, 3},
		{"Name", func(c relay.Config) any { return c.Name }, relay.DefaultName, "n"},
		{"LeaseDuration", func(c relay.Config) any { return c.LeaseDuration }, relay.DefaultLeaseDuration, time.Minute},
		{"PollInterval", func(c relay.Config) any { return c.PollInterval }, relay.DefaultPollInterval, 2 * time.Second},
		{"DiscoveryInterval", func(c relay.Config) any { return c.DiscoveryInterval }, relay.DefaultDiscoveryInterval, 3 * time.Second},
		{"PublishedTTL", func(c relay.Config) any { return c.PublishedTTL }, relay.DefaultPublishedTTL, time.Hour},
		{"SendAttempts", func(c relay.Config) any { return c.SendAttempts }, relay.DefaultSendAttempts, 5},
		{"DrainTimeout", func(c relay.Config) any { return c.DrainTimeout }, relay.DefaultDrainTimeout, 4 * time.Second},
		{"SweepAge", func(c relay.Config) any { return c.SweepAge }, relay.DefaultSweepAge, time.Hour},
		{"SweepInterval", func(c relay.Config) any { return c.SweepInterval }, time.Duration(0), time.Duration(0)},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotEmpty(t, zero.Owner)
	require.Equal(t, "o", set.Owner)
	require.NotNil(t, zero.Now)
}
