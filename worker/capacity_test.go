package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// ddbworker_database_capacity follows the worker: its concurrency limit
// while the database takes everything, at most what a write budget
// sustains, 0 while the health gate holds and back after the recovery.
func TestDatabaseCapacityGauge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxWCU float64
		// want is the gauge after one message, given the concurrency
		// limit (the budget term depends on the emulator's latency, so
		// only its bounds are known).
		want func(t *testing.T, capacity, limit float64)
	}{
		{"no write budget: the concurrency limit", 0, func(t *testing.T, c, limit float64) { require.Equal(t, limit, c) }},
		{"a budget far above the load: the concurrency limit", 1e6, func(t *testing.T, c, limit float64) { require.Equal(t, limit, c) }},
		// 10 units/s, a message of about 8 units taking well under 100 ms
		// of work: the budget sustains a fraction of one message in flight.
		{"a tight budget: one message", 10, func(t *testing.T, c, _ float64) { require.Equal(t, 1.0, c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			metrics := metricstest.New()
			cfg := h.testConfig()
			cfg.MaxWCU = tc.maxWCU
			w := h.lambdaWorker(cfg, worker.Deps{Handlers: h.caseHandlers(), Metrics: metrics})
			require.Equal(t, float64(cfg.Concurrency), metrics.Value("ddbworker_database_capacity"), "a new worker: its concurrency")
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k1", "c1", "intake", effective)))
			resp, err := w.HandleSQSEvent(context.Background(), h.sqsEvent(1, 30*time.Second))
			require.NoError(t, err)
			require.Empty(t, resp)
			tc.want(t, metrics.Value("ddbworker_database_capacity"), metrics.Value("ddbworker_concurrency_limit"))
		})
	}

	t.Run("0 while the health gate holds, back after the recovery", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		target, _ := testenv.Endpoints(t)
		proxy, err := ddbproxy.Start(ddbproxy.Config{Target: target})
		require.NoError(t, err)
		t.Cleanup(func() { _ = proxy.Close() })
		ddb := dynamodb.NewFromConfig(h.env.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
		h.seedCases("c1", "c2", "c3", "c4", "c5", "c6")
		metrics := metricstest.New()
		cfg := h.testConfig()
		cfg.CallTimeout = time.Second
		cfg.Health = worker.HealthConfig{ProbeInterval: 200 * time.Millisecond, ProbeMaxInterval: 400 * time.Millisecond, ParkVisibility: 10 * time.Second}
		w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: h.caseHandlers(), Metrics: metrics})
		for _, id := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
			h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
		}
		proxy.SetMode(ddbproxy.Throttle)
		_, err = w.HandleSQSEvent(context.Background(), h.sqsEvent(6, 30*time.Second))
		require.NoError(t, err)
		require.False(t, w.DatabaseHealthy())
		require.Zero(t, metrics.Value("ddbworker_database_capacity"), "the database takes nothing now")
		require.Positive(t, metrics.Value("ddbworker_concurrency_limit"), "while the limit itself stays at least 1")

		proxy.SetMode(ddbproxy.Pass)
		testenv.Eventually(t, 20*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = w.HandleSQSEvent(ctx, nil) // an empty invocation probes
			return w.DatabaseHealthy()
		}, "healthy again after two probes")
		require.Equal(t, 1.0, metrics.Value("ddbworker_database_capacity"), "the restart's limit: 1, growing back")
		require.Equal(t, metrics.Value("ddbworker_concurrency_limit"), metrics.Value("ddbworker_database_capacity"))
	})
}
