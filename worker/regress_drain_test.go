package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// Old behaviour: Run's deleter ran on the work context, which the drain
// timeout cancels. When a handler outlived DrainTimeout, the cancellation
// also cancelled the final flush of the deletes still waiting for their
// batch (DeleteFlushInterval): work already committed was not deleted and
// came back as duplicates. The test holds four applied messages' deletes
// (3s flush interval), blocks a fifth handler past a 300ms drain timeout,
// stops the worker, and requires that only the blocked message is left in
// the queue.
func TestRegressDrainTimeoutFlushesDeletes(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	ids := []string{"c1", "c2", "c3", "c4"}
	h.seedCases(append(ids, "c-block")...)
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	blocked := make(chan struct{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if m.Envelope.IdempotencyKey == "k-block" {
			close(blocked)
			<-ctx.Done() // never returns on its own
			return ddbworker.Result{}, ctx.Err()
		}
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))
	cfg := h.testConfig()
	cfg.Concurrency = 8
	// Long enough that no applied message reappears by itself before the
	// stop; short, because a message released at shutdown may be taken by
	// the stopped worker's abandoned long poll and hidden this long.
	cfg.VisibilityTimeout = 4 * time.Second
	cfg.DeleteFlushInterval = 3 * time.Second
	cfg.DrainTimeout = 300 * time.Millisecond
	r := h.start(cfg, worker.Deps{Handlers: reg})
	var envs []*envelope.Envelope
	for _, id := range ids {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-"+id, id, "intake", effective)))
	}
	envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-block", "c-block", "intake", effective)))
	h.send(envs...)

	applied := h.waitEvents(len(ids), 20*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("the blocking handler never started")
	}
	require.Equal(t, len(ids)+1, testenv.InspectQueue(t, h.env.Queues.URL).Total(), "precondition: the applied messages' deletes are still pending")

	begin := time.Now()
	r.Stop()
	took := time.Since(begin)
	require.Less(t, took, cfg.DeleteFlushInterval, "Run returned promptly (it flushed instead of waiting for the flush interval): took %s", took)

	for _, ev := range applied {
		require.Equal(t, 1, ev.Attempt)
	}
	q := testenv.InspectQueue(t, h.env.Queues.URL)
	require.Equal(t, 1, q.Total(), "only the blocked message is left; the applied ones were deleted: %+v", q)
	for _, id := range ids {
		require.EqualValues(t, 1, h.applications(id, caseflow.TypeDeadline, "k-"+id))
	}

	// A second worker sees only the blocked message.
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	ev := h.waitEvents(1, 20*time.Second, func(ev worker.Event) bool { return ev.Final && ev.IdempotencyKey == "k-block" })[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	h.requireQueueEmpty()
	for _, ev := range h.allEvents() {
		require.NotEqual(t, worker.OutcomeDuplicate, ev.Outcome, "an applied message came back: %+v", ev)
	}
}
