package lambda

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/worker"
)

func envOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// required are the variables without a default.
func required() map[string]string {
	return map[string]string{envTable: "orders", envDLQURL: "https://sqs.us-east-1.amazonaws.com/1/orders-dlq"}
}

// Every variable left unset takes the library's own default constant
// (worker, inbox, s3payload): none is restated here.
func TestSettingsDefaultsAreTheLibraryConstants(t *testing.T) {
	s, err := readSettings(envOf(required()))
	require.NoError(t, err)
	c := s.worker
	for _, tc := range []struct {
		variable  string
		got, want any
	}{
		{envConcurrency, c.Concurrency, worker.DefaultConcurrency},
		{envMaxAttempts, c.MaxAttempts, worker.DefaultMaxAttempts},
		{envMaxTakeovers, c.MaxTakeovers, worker.DefaultMaxTakeovers},
		{envTerminalPolicy, c.TerminalPolicy, worker.DefaultTerminalPolicy},
		{envClockSkew, c.ClockSkew, worker.DefaultClockSkew},
		{envCallTimeout, c.CallTimeout, time.Duration(0)}, // the worker computes it from the lease
		{envMaxWCU, c.MaxWCU, 0.0},
		{envPayloadMaxBytes, c.Payload.MaxBytes, int64(s3payload.DefaultMaxBytes)},
		{envHealthFailures, c.Health.MinFailures, worker.DefaultHealthMinFailures},
		{envHealthWindow, c.Health.Window, worker.DefaultHealthWindow},
		{envProbeMaxInterval, c.Health.ProbeMaxInterval, worker.DefaultProbeMaxInterval},
		{envParkVisibility, c.Health.ParkVisibility, worker.DefaultParkVisibility},
		{envParkMaxVisibility, c.Health.ParkMaxVisibility, worker.DefaultParkMaxVisibility},
		{envAttentionShards, s.store.AttentionShards, inbox.DefaultAttentionShards},
		{envIndexProcessing, s.store.IndexProcessing, false},
		{envCompletedTTL, s.store.TTL.Completed, inbox.DefaultCompletedTTL},
		{envFailedTTL, s.store.TTL.Failed, inbox.DefaultFailedTTL},
		{envProcessingTTL, s.store.TTL.Processing, inbox.DefaultProcessingTTL},
	} {
		require.Equal(t, tc.want, tc.got, tc.variable)
	}

	// And the worker they configure is the one worker.Config's own
	// defaults make, under the Lambda lease.
	const queue = "https://sqs.us-east-1.amazonaws.com/1/orders" // from the records under Lambda
	c.QueueURL = queue
	fromEnv, err := c.WithDefaults()
	require.NoError(t, err)
	library, err := worker.Config{Store: s.store, QueueURL: queue, DLQURL: c.DLQURL, VisibilityTimeout: lambdaLease}.WithDefaults()
	require.NoError(t, err)
	for _, c := range []*worker.Config{&fromEnv, &library} {
		c.Now = nil // funcs are never equal
		// The worker resolves ClockSkew through stale.Policy.
		p, err := (stale.Policy{Lease: c.VisibilityTimeout, Skew: c.ClockSkew}).WithDefaults()
		require.NoError(t, err)
		c.ClockSkew = p.Skew
	}
	require.Equal(t, library, fromEnv)
}

// The settings the worker gained with takeovers and Lambda parking are
// read like the others, and a bad value is an error naming its variable.
func TestSettingsTakeoversAndParking(t *testing.T) {
	env := required()
	env[envMaxTakeovers], env[envParkVisibility], env[envParkMaxVisibility] = "7", "2m", "3h"
	s, err := readSettings(envOf(env))
	require.NoError(t, err)
	require.Equal(t, 7, s.worker.MaxTakeovers)
	require.Equal(t, 2*time.Minute, s.worker.Health.ParkVisibility)
	require.Equal(t, 3*time.Hour, s.worker.Health.ParkMaxVisibility)

	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{envMaxTakeovers: "0"}, []string{`DDBWORKER_MAX_TAKEOVERS="0": must be within 1..100`}},
		{map[string]string{envMaxTakeovers: "often"}, []string{`DDBWORKER_MAX_TAKEOVERS="often": not an integer`}},
		{map[string]string{envParkVisibility: "2h", envParkMaxVisibility: "13h"},
			[]string{`DDBWORKER_PARK_VISIBILITY="2h": must be within 1s..1h0m0s`, `DDBWORKER_PARK_MAX_VISIBILITY="13h": must be within 1s..12h0m0s`}},
		{map[string]string{envParkVisibility: "10m", envParkMaxVisibility: "5m"},
			[]string{`DDBWORKER_PARK_MAX_VISIBILITY="5m": must be at least DDBWORKER_PARK_VISIBILITY (10m0s)`}},
		{map[string]string{envParkMaxVisibility: "30s"},
			[]string{`DDBWORKER_PARK_MAX_VISIBILITY="30s": must be at least DDBWORKER_PARK_VISIBILITY (1m0s)`}},
	} {
		env := required()
		for k, v := range tc.env {
			env[k] = v
		}
		_, err := readSettings(envOf(env))
		require.Error(t, err, "%v", tc.env)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w)
		}
	}
}
