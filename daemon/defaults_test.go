package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Every flag that sets a library setting defaults to the library's own
// constant: a default changed in worker, inbox, s3payload, … changes the
// flag with it. A flag whose 0 means "computed" (--batch-size,
// --call-timeout) or the library's zero default (--max-wcu,
// --sweep-interval) defaults to 0. The flags with no library setting
// behind them (--startup-timeout, --depth-interval, --metrics-addr,
// dlq peek's --max and --body-chars, --log-level) are the daemon's own.
func TestFlagDefaultsAreTheLibraryConstants(t *testing.T) {
	layout := tables.DefaultLayout()
	for _, tc := range []struct {
		command []string
		want    map[string]any
	}{
		{[]string{"run"}, map[string]any{
			"concurrency":           worker.DefaultConcurrency,
			"batch-size":            0,
			"wait-time":             worker.DefaultWaitTime,
			"visibility-timeout":    worker.DefaultVisibilityTimeout,
			"clock-skew":            worker.DefaultClockSkew,
			"message-timeout":       worker.DefaultMessageTimeout,
			"drain-timeout":         worker.DefaultDrainTimeout,
			"max-attempts":          worker.DefaultMaxAttempts,
			"max-takeovers":         gate.DefaultMaxTakeovers,
			"max-wcu":               0,
			"terminal-policy":       worker.DefaultTerminalPolicy,
			"call-timeout":          time.Duration(0),
			"health-min-failures":   worker.DefaultHealthMinFailures,
			"health-window":         worker.DefaultHealthWindow,
			"probe-max-interval":    worker.DefaultProbeMaxInterval,
			"park-visibility":       worker.DefaultParkVisibility,
			"park-max-visibility":   worker.DefaultParkMaxVisibility,
			"payload-max-bytes":     s3payload.DefaultMaxBytes,
			"hot-key-max-throttled": worker.DefaultHotKeyMaxThrottled,
			// The inbox store's, shared by every command.
			"attention-shards":       inbox.DefaultAttentionShards,
			"completed-ttl":          inbox.DefaultCompletedTTL,
			"failed-ttl":             inbox.DefaultFailedTTL,
			"processing-ttl":         inbox.DefaultProcessingTTL,
			"pk-attribute":           layout.PartitionKey,
			"sk-attribute":           layout.SortKey,
			"aggregate-index":        layout.AggregateIndex,
			"aggregate-pk-attribute": layout.AggregatePK,
			"aggregate-sk-attribute": layout.AggregateSK,
			"attention-index":        layout.AttentionIndex,
			"attention-pk-attribute": layout.AttentionPK,
			"attention-sk-attribute": layout.AttentionSK,
			"ttl-attribute":          layout.TTL,
		}},
		{[]string{"sweep"}, map[string]any{
			"lease":      worker.DefaultVisibilityTimeout,
			"clock-skew": worker.DefaultClockSkew,
			"grace":      stale.DefaultGrace,
		}},
		{[]string{"queues", "create"}, map[string]any{
			"visibility-timeout": worker.DefaultVisibilityTimeout,
			"max-receive-count":  worker.DefaultMaxReceiveCount,
		}},
		{[]string{"tables", "create"}, map[string]any{"wait": tables.DefaultWaitTimeout}},
		{[]string{"tables", "adopt"}, map[string]any{
			"wait":        tables.DefaultAdoptWait,
			"max-indexes": tables.DefaultMaxIndexes,
		}},
		{[]string{"relay"}, map[string]any{
			"relay-name":         relay.DefaultName,
			"outbox-shards":      outbox.DefaultShards,
			"lease-duration":     relay.DefaultLeaseDuration,
			"poll-interval":      relay.DefaultPollInterval,
			"discovery-interval": relay.DefaultDiscoveryInterval,
			"published-ttl":      relay.DefaultPublishedTTL,
			"drain-timeout":      relay.DefaultDrainTimeout,
			"sweep-age":          relay.DefaultSweepAge,
			"sweep-interval":     time.Duration(0), // relay.Config.SweepInterval's: never
		}},
		{[]string{"dlq", "stats"}, map[string]any{"hide": dlq.DefaultHide}},
		{[]string{"dlq", "redrive"}, map[string]any{
			"hide":    dlq.DefaultHide,
			"max":     dlq.DefaultMax,
			"rate":    dlq.DefaultRate,
			"max-age": dlq.DefaultMaxAge,
		}},
		{[]string{"inbox", "list"}, map[string]any{"limit": inbox.DefaultPageLimit}},
		{[]string{"effects", "list"}, map[string]any{"limit": effects.DefaultPageLimit}},
	} {
		cmd, _, err := newRootCmd(App{}).Find(tc.command)
		require.NoError(t, err, "%v", tc.command)
		for name, want := range tc.want {
			f := cmd.Flag(name)
			require.NotNil(t, f, "%v --%s", tc.command, name)
			require.Equal(t, fmt.Sprint(want), f.DefValue, "%v --%s", tc.command, name)
		}
	}
}

// run with every flag at its default configures the worker exactly as
// worker.Config's own defaults do: no flag's 0 or literal drifts from the
// library.
func TestRunDefaultsAreTheWorkersDefaults(t *testing.T) {
	f := &runFlags{}
	f.register(&cobra.Command{}, daemonext.Extension{})
	store := inbox.Store{Table: "t"}
	f.queueURL, f.dlqURL = "http://q/1/work", "http://q/1/dlq" // required
	fromFlags, err := f.workerConfig(store).WithDefaults()
	require.NoError(t, err)
	library, err := worker.Config{Store: store, QueueURL: f.queueURL, DLQURL: f.dlqURL}.WithDefaults()
	require.NoError(t, err)
	for _, c := range []*worker.Config{&fromFlags, &library} {
		c.Now = nil // funcs are never equal
		// The worker resolves ClockSkew through stale.Policy (0: the
		// default, worker.Zero: none), not in WithDefaults.
		p, err := (stale.Policy{Lease: c.VisibilityTimeout, Skew: c.ClockSkew}).WithDefaults()
		require.NoError(t, err)
		c.ClockSkew = p.Skew
	}
	require.Equal(t, library, fromFlags)
}
