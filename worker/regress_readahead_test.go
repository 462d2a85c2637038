package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// staleReads answers every BatchGetItem with the items it was told to
// serve stale, where the table holds newer ones: what an eventually
// consistent read on DynamoDB may return right after a write (DynamoDB
// Local is always consistent).
type staleReads struct {
	mu    sync.Mutex
	items []map[string]ddbtypes.AttributeValue
}

func (s *staleReads) install(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("staleReads", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if r, ok := out.Result.(*dynamodb.BatchGetItemOutput); ok && err == nil {
				s.mu.Lock()
				for table := range r.Responses {
					r.Responses[table] = append([]map[string]ddbtypes.AttributeValue(nil), s.items...)
				}
				s.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
	})
}

// With the read ahead on, a record read eventually consistent right after
// `inbox reopen` may still show FAILED_TERMINAL. Before, the delivery that
// `dlq redrive` sent after the reopen was decided from that stale read —
// terminal again, back to the DLQ — undoing the operator's fix. Now only a
// COMPLETED record read ahead decides; the claim reads the record as it is.
func TestRegressReadAheadStaleTerminal(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	stale := &staleReads{}
	cfg := h.testConfig()
	cfg.ReadAhead = 1
	cfg.VisibilityTimeout = 10 * time.Second
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers(ddbworker.Fused()), DynamoDB: dynamodb.NewFromConfig(h.env.AWS, h.inj.DynamoDB, stale.install)})

	// The case does not exist: terminal CASE_NOT_FOUND, to the DLQ.
	env := mustEnv(t)(caseflow.NewDeadlineRequest("k-reopened", "c1", "review", effective))
	h.send(env)
	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	h.dlq(1)
	failed := h.record("k-reopened", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusFailedTerminal, failed.Status)
	item := (inbox.Store{Table: h.env.Table}).Encode(failed)

	// The data is fixed and the operator reopens the record; the redriven
	// message's read ahead still sees FAILED_TERMINAL.
	h.seedCases("c1")
	store := inbox.Store{Table: h.env.Table}
	in, err := store.Reopen(failed, time.Now(), "operator", "case created").UpdateItem(store.Table, store.Key(failed.Key, failed.MessageType))
	require.NoError(t, err)
	_, err = h.env.DynamoDB.UpdateItem(context.Background(), in)
	require.NoError(t, err)
	stale.mu.Lock()
	stale.items = []map[string]ddbtypes.AttributeValue{item}
	stale.mu.Unlock()
	h.send(env)
	ev = h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "the reopened work runs: a stale read ahead must not end it terminal again")
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-reopened"))
	require.Equal(t, inbox.StatusCompleted, h.record("k-reopened", caseflow.TypeDeadline).Status)
}
