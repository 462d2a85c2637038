package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dev/faults"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// With ReadAhead, a fused route's receive batch reads its inbox records
// first: a duplicate costs the read and no write; a fresh message the read
// and its one transaction; a read that fails changes nothing but its cost.
func TestReadAhead(t *testing.T) {
	cfg := func(h *harness) worker.Config {
		c := h.testConfig()
		c.ReadAhead = 1                        // every batch, even of one message
		c.VisibilityTimeout = 10 * time.Second // no second delivery mid-run on a loaded machine
		return c
	}
	t.Run("fresh, then a duplicate", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.inj.ResetCalls()
		h.start(cfg(h), worker.Deps{Handlers: h.caseHandlers(ddbworker.Fused())})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-ahead", "c1", "review", effective))
		h.send(env)
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.TransactWriteItems": 1}, ddbCalls(h.inj.Calls()))

		h.inj.ResetCalls()
		h.send(env)
		dup := h.waitEvents(2, 20*time.Second, final)[1]
		require.Equal(t, worker.OutcomeDuplicate, dup.Outcome)
		require.Equal(t, map[string]int{"DynamoDB.BatchGetItem": 1}, ddbCalls(h.inj.Calls()), "a duplicate costs the read and no write")
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-ahead"))
		require.Equal(t, inbox.StatusCompleted, h.record("k-ahead", caseflow.TypeDeadline).Status)
		h.requireQueueEmpty()
	})
	t.Run("a read that fails: the fused commit still decides", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(cfg(h), worker.Deps{Handlers: h.caseHandlers(ddbworker.Fused())})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-ahead-fail", "c1", "review", effective))
		h.send(env)
		h.waitEvents(1, 20*time.Second, final)
		h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "BatchGetItem", Kind: faults.KindServerError, Times: 10})
		h.inj.ResetCalls()
		h.send(env)
		dup := h.waitEvents(2, 20*time.Second, final)[1]
		require.Equal(t, worker.OutcomeDuplicate, dup.Outcome)
		require.GreaterOrEqual(t, h.inj.Fired()[faults.KindServerError], 1, "the read failed")
		h.inj.Clear()
		require.Equal(t, 1, ddbCalls(h.inj.Calls())["DynamoDB.TransactWriteItems"], "the cancelled fused commit found the record")
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-ahead-fail"))
		h.requireQueueEmpty()
	})
	t.Run("other work under the key: IDEMPOTENCY_HASH_MISMATCH from the read", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(cfg(h), worker.Deps{Handlers: h.caseHandlers(ddbworker.Fused())})
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-ahead-hash", "c1", "review", effective)))
		h.waitEvents(1, 20*time.Second, final)
		before := h.record("k-ahead-hash", caseflow.TypeDeadline)
		h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-ahead-hash", "c1", "appeal", effective)))
		ev := h.waitEvents(2, 20*time.Second, final)[1]
		require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
		require.Equal(t, "IDEMPOTENCY_HASH_MISMATCH", ev.Code)
		require.Equal(t, before, h.record("k-ahead-hash", caseflow.TypeDeadline))
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-ahead-hash"))
	})
}
