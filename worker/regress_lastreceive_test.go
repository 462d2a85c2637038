package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// A retryable business failure on the last receive the redrive policy
// allows, with business attempts left. Before (found by the explorer,
// seed 19 of a 30-minute run: flaky single-write work on Lambda whose
// earlier receives went to two outages), the message was hidden for its
// backoff and its next receive moved it to the DLQ: healthy work
// dead-lettered, FAILED_RETRYABLE for good. Now it is kept as a marked
// copy of itself, delayed by that backoff, which claims through the gate
// and runs the next attempt.
func TestRegressRetryOnLastReceiveIsKept(t *testing.T) {
	const maxReceives = 2
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: maxReceives, VisibilityTimeout: 10 * time.Second}})
	h.seedCases("c1")
	cfg := singleConfig(h)
	cfg.MaxAttempts = 3
	w := h.lambdaWorker(cfg, worker.Deps{Handlers: singleRoute(h, 2, nil)}) // the first two runs fail retryably
	env := stageChange(t, "k-last", "review", 1)
	h.send(env)

	invoke := func(wantReported bool) {
		t.Helper()
		ev := h.sqsEvent(1, 30*time.Second)
		resp, err := w.HandleSQSEvent(context.Background(), ev)
		require.NoError(t, err)
		if wantReported {
			require.Len(t, resp, 1, "%+v", h.allEvents())
			h.makeVisible(ev)
			return
		}
		require.Empty(t, resp, "%+v", h.allEvents())
		h.deleteRecords(ev)
	}
	invoke(true)  // receive 1: attempt 1 fails, hidden for its backoff
	invoke(false) // receive 2, the last: attempt 2 fails, kept as a copy
	rec := h.record("k-last", caseflow.TypeStageChanged)
	require.Equal(t, inbox.StatusFailedRetryable, rec.Status)
	require.Equal(t, 2, rec.Attempts)

	// The copy: delayed by the backoff, first receive, marked.
	copied := h.sqsEvent(1, 30*time.Second)
	require.Equal(t, "1", copied[0].Attributes["ApproximateReceiveCount"])
	require.NotEmpty(t, aws.ToString(copied[0].MessageAttributes[dlq.AttrResentFrom].StringValue), "its work has a record: the copy is marked")
	resp, err := w.HandleSQSEvent(context.Background(), copied)
	require.NoError(t, err)
	require.Empty(t, resp)
	h.deleteRecords(copied)

	require.Equal(t, int64(1), num(t, h.item(caseflow.CaseKey("c1")), attrStageChanges), "applied once, by its third attempt")
	rec = h.record("k-last", caseflow.TypeStageChanged)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, 2, rec.Attempts, "the two business failures, and no attempt charged for the copy")
	h.dlq(0)
}
