package producer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/producer"
)

// WithDefaults fills each zero field from its DefaultX constant, keeps
// each field that is set, and reads a DLQHeadroom of -1 as none.
func TestConfigWithDefaults(t *testing.T) {
	zero := producer.Config{}.WithDefaults()
	set := producer.Config{OffloadAbove: 1000, MaxMessageBytes: 1 << 20, DLQHeadroom: -1, MaxAttempts: 7, RetryDelay: time.Second}.WithDefaults()
	for _, tc := range []struct {
		field      string
		get        func(producer.Config) any
		dflt, kept any
	}{
		{"OffloadAbove", func(c producer.Config) any { return c.OffloadAbove }, producer.DefaultOffloadAbove, 1000},
		{"MaxMessageBytes", func(c producer.Config) any { return c.MaxMessageBytes }, producer.DefaultMaxMessageBytes, 1 << 20},
		// At least a message: a queue of 1 MiB messages batches 1 MiB.
		{"MaxBatchBytes", func(c producer.Config) any { return c.MaxBatchBytes }, producer.DefaultMaxBatchBytes, 1 << 20},
		{"DLQHeadroom", func(c producer.Config) any { return c.DLQHeadroom }, producer.DefaultDLQHeadroom, 0},
		{"MaxAttempts", func(c producer.Config) any { return c.MaxAttempts }, producer.DefaultMaxAttempts, 7},
		{"RetryDelay", func(c producer.Config) any { return c.RetryDelay }, producer.DefaultRetryDelay, time.Second},
	} {
		require.Equal(t, tc.dflt, tc.get(zero), "%s: the default", tc.field)
		require.Equal(t, tc.kept, tc.get(set), "%s: kept", tc.field)
	}
	require.NotNil(t, zero.GroupID)
	require.NotNil(t, zero.DeduplicationID)
	require.NotNil(t, zero.Now)
	require.NotNil(t, zero.NewMessageID)
}
