package effects_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/inbox"
)

// WithDefaults fills each zero field from its DefaultX constant — Table
// and TTL from the inbox store, once it has its own defaults — and keeps
// each field that is set.
func TestConfigWithDefaults(t *testing.T) {
	zero := effects.Config{Inbox: inbox.Store{Table: "app"}}.WithDefaults()
	set := effects.Config{Inbox: inbox.Store{Table: "app"}, Table: "effects", CallTimeout: time.Second, Skew: time.Millisecond,
		WriteTimeout: 3 * time.Second, TTL: 900 * time.Hour}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(effects.Config) any
		dflt, kept any
	}{
		{"Table", func(c effects.Config) any { return c.Table }, "app", "effects"},
		{"CallTimeout", func(c effects.Config) any { return c.CallTimeout }, effects.DefaultCallTimeout, time.Second},
		{"Skew", func(c effects.Config) any { return c.Skew }, effects.DefaultSkew, time.Millisecond},
		{"WriteTimeout", func(c effects.Config) any { return c.WriteTimeout }, effects.DefaultWriteTimeout, 3 * time.Second},
		{"TTL", func(c effects.Config) any { return c.TTL }, max(inbox.DefaultCompletedTTL, inbox.DefaultFailedTTL), 900 * time.Hour},
		{"Inbox.AttentionShards", func(c effects.Config) any { return c.Inbox.AttentionShards }, inbox.DefaultAttentionShards, inbox.DefaultAttentionShards},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotNil(t, zero.Now)
	require.NotNil(t, zero.Logger)
}
