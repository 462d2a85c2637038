package worker_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
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
	// A role without dynamodb:BatchGetItem: every read is denied, which
	// changes nothing but the read's cost — and is said. Old behaviour: the
	// denial was skipped silently on every batch.
	t.Run("a read DynamoDB denies: warned once, counted each time", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "BatchGetItem", Rate: 1, Err: &smithy.GenericAPIError{Code: "AccessDeniedException",
			Message: "injected: User: arn:aws:sts::123456789012:assumed-role/worker/i is not authorized to perform: dynamodb:BatchGetItem"}})
		metrics := metricstest.New()
		logs := &testenv.Buffer{}
		h.inj.ResetCalls()
		h.start(cfg(h), worker.Deps{Handlers: h.caseHandlers(ddbworker.Fused()), Metrics: metrics, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		env := mustEnv(t)(caseflow.NewDeadlineRequest("k-ahead-denied", "c1", "review", effective))
		h.send(env)
		require.Equal(t, worker.OutcomeApplied, h.waitEvents(1, 20*time.Second, final)[0].Outcome)
		h.send(env)
		require.Equal(t, worker.OutcomeDuplicate, h.waitEvents(2, 20*time.Second, final)[1].Outcome, "the fused commit found the record")
		require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-ahead-denied"))

		reads := ddbCalls(h.inj.Calls())["DynamoDB.BatchGetItem"]
		require.GreaterOrEqual(t, reads, 2, "each batch read ahead")
		require.EqualValues(t, reads, metrics.Value("ddbworker_read_ahead_denied_total"), "every denied read is counted")
		var warnings []map[string]any
		for _, line := range logs.Lines() {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
			if msg, _ := rec["msg"].(string); strings.Contains(msg, "dynamodb:BatchGetItem") {
				warnings = append(warnings, rec)
			}
		}
		require.Len(t, warnings, 1, "said once:\n%s", strings.Join(logs.Lines(), "\n"))
		require.Equal(t, "WARN", warnings[0]["level"])
		require.Equal(t, h.env.Table, warnings[0]["table"])
		require.Contains(t, warnings[0]["error"], "AccessDeniedException")
		require.Contains(t, warnings[0]["msg"], "--read-ahead 0")
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
