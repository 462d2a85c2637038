package outbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tables"
)

// WithDefaults fills each zero field from its default (the Layout's from
// tables.DefaultLayout) and keeps each field that is set.
func TestConfigWithDefaults(t *testing.T) {
	zero := outbox.Config{}.WithDefaults()
	set := outbox.Config{Shards: 3, Layout: tables.Layout{PartitionKey: "pk"}}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(outbox.Config) any
		dflt, kept any
	}{
		{"Shards", func(c outbox.Config) any { return c.Shards }, outbox.DefaultShards, 3},
		{"Layout.PartitionKey", func(c outbox.Config) any { return c.Layout.PartitionKey }, tables.DefaultLayout().PartitionKey, "pk"},
		{"Layout.TTL", func(c outbox.Config) any { return c.Layout.TTL }, tables.DefaultLayout().TTL, tables.DefaultLayout().TTL},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotNil(t, zero.Now)
}
