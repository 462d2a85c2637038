package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// Regression tests of issue 21's "one rule for every way a message comes
// back" (found at commit b9058c9): no delivery of work that has a recorded
// outcome may apply it, whichever commit mode its route uses. Each fails
// on that commit.

// lockableStages registers CaseStageChanged on the single-write route,
// failing terminally CASE_LOCKED while locked holds.
func lockableStages(h *harness, locked *atomic.Bool) *ddbworker.Registry {
	reg := ddbworker.NewRegistry()
	require.NoError(h.t, reg.Register(caseflow.TypeStageChanged, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p caseflow.StageChanged) (ddbworker.Result, error) {
		if locked.Load() {
			return ddbworker.Result{}, failure.NewTerminal("CASE_LOCKED", "the case is locked")
		}
		v, _ := m.AggregateVersion()
		return ddbworker.Apply(stageWrite(h.env.Table, p, v)), nil
	}), ddbworker.SingleWrite()))
	return reg
}

// A single-write message parked by an outage on the last receive its
// redrive policy allows is re-sent with a fresh receive count. Its work
// was recorded FAILED_TERMINAL CASE_LOCKED by an earlier delivery (whose
// delete was lost), and the case was unlocked since. Before, the copy
// carried no mark, claimsByCommit sent it down the single-write fresh
// path, which reads no inbox record, and the work was applied anyway and
// never reached the DLQ again. Now the copy is marked (AttrResentFrom),
// claims through the gate, finds the terminal record and ends as it says.
func TestRegressResentCopyKeepsTerminalRecord(t *testing.T) {
	const maxReceives = 2
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: maxReceives, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	h.seedCases("c1")
	var locked atomic.Bool
	locked.Store(true)
	cfg := singleConfig(h)
	// The first failed call trips the gate (throttled calls fail at once;
	// a loaded machine must not time out the healthy ones); no probe is
	// due during the test.
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: time.Hour, ProbeMaxInterval: time.Hour,
		ParkVisibility: time.Second, ParkMaxVisibility: time.Second}
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: lockableStages(h, &locked)})
	h.send(stageChange(t, "k-locked", "review", 1))

	// Receive 1: the fresh path runs, the handler fails terminally; the
	// failure is recorded and a DLQ copy sent. The mapping's delete is lost.
	first := h.sqsEvent(1, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), first)
	require.NoError(t, err)
	require.Empty(t, resp, "%+v", h.allEvents())
	rec := h.record("k-locked", caseflow.TypeStageChanged)
	require.NotNil(t, rec)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, "CASE_LOCKED", rec.FailureCode)
	h.dlq(1)
	h.makeVisible(first)

	// Receive 2, the last: the database is down; the message is re-sent.
	proxy.SetMode(ddbproxy.Throttle)
	second := h.sqsEvent(1, 30*time.Second)
	require.Equal(t, "2", second[0].Attributes["ApproximateReceiveCount"])
	resp, err = w.HandleSQSEvent(context.Background(), second)
	require.NoError(t, err)
	require.Empty(t, resp, "the last receive is re-sent, not reported")
	h.deleteRecords(second)
	require.False(t, w.DatabaseHealthy())

	// The outage ends and the case is unlocked; the copy arrives, first
	// receive, at a new execution environment.
	proxy.SetMode(ddbproxy.Pass)
	locked.Store(false)
	copied := h.sqsEvent(1, 30*time.Second)
	require.Equal(t, "1", copied[0].Attributes["ApproximateReceiveCount"])
	fresh := h.lambdaWorker(singleConfig(h), worker.Deps{Handlers: lockableStages(h, &locked)})
	resp, err = fresh.HandleSQSEvent(context.Background(), copied)
	require.NoError(t, err)
	require.Empty(t, resp)

	c := h.item(caseflow.CaseKey("c1"))
	require.NotContains(t, c, attrStageChanges, "work recorded FAILED_TERMINAL must not be applied by a re-sent copy")
	require.NotContains(t, c, ddbworker.FenceKeyAttr(caseflow.AttrStageVersion))
	rec = h.record("k-locked", caseflow.TypeStageChanged)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status, "the record stays as it was")
	last := h.allEvents()
	require.Equal(t, worker.OutcomeTerminal, last[len(last)-1].Outcome, "the copy ends as its record says")
	require.Equal(t, aws.ToString(second[0].MessageId), aws.ToString(copied[0].MessageAttributes[dlq.AttrResentFrom].StringValue),
		"the copy is marked: its work may have a record")
}

// A message that went through a dead-letter queue and came back by SQS's
// own redrive carries none of ddbworker's marks and a receive count of 1,
// but SQS says where it was (DeadLetterQueueSourceArn): it claims through
// the gate. Its work (applied after a terminal failure was recorded would
// be the defect) ends as its record says.
func TestRegressDLQSourceClaimsThroughGate(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	var locked atomic.Bool
	locked.Store(true)
	w := h.lambdaWorker(singleConfig(h), worker.Deps{Handlers: lockableStages(h, &locked)})
	h.send(stageChange(t, "k-moved", "review", 1))
	first := h.sqsEvent(1, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), first)
	require.NoError(t, err)
	require.Empty(t, resp, "%+v", h.allEvents())
	h.deleteRecords(first)
	require.Equal(t, inbox.StatusFailedTerminal, h.record("k-moved", caseflow.TypeStageChanged).Status)

	// The same body back as SQS's redrive brings it: no ddbworker attribute,
	// first receive, the DLQ's source named by SQS.
	locked.Store(false)
	h.sendRaw(aws.ToString(first[0].Body))
	back := h.sqsEvent(1, 30*time.Second)
	require.Equal(t, "1", back[0].Attributes["ApproximateReceiveCount"])
	back[0].MessageAttributes = map[string]types.MessageAttributeValue{}
	back[0].Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)] = "arn:aws:sqs:us-east-1:000000000000:work"
	resp, err = w.HandleSQSEvent(context.Background(), back)
	require.NoError(t, err)
	require.Empty(t, resp)
	require.NotContains(t, h.item(caseflow.CaseKey("c1")), attrStageChanges, "not applied past its terminal record")
	last := h.allEvents()
	require.Equal(t, worker.OutcomeTerminal, last[len(last)-1].Outcome)
}

// A message that comes back with nothing to say it was here before — no
// ddbworker mark, receive count 1, no DLQ source named: moved back by SQS's
// own redrive (StartMessageMoveTask keeps no attribute SQS can show), or a
// producer's resend — for work that already has a record. Before (found by
// the explorer, seed 17, on the fixed code of the first round), the
// single-write fresh path wrote the item without reading the inbox: work
// recorded FAILED_TERMINAL was applied, and work held under a lease whose
// worker died was applied while its record stayed PROCESSING, for the
// sweeper to report LEASE_ABANDONED. Now the fresh path's one call checks
// the record (mutation.Committer.CommitSingleGuarded) and the delivery is
// decided from what it finds, under the gate.
func TestRegressUnmarkedComebackFindsItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  func(h *harness, env *envelope.Envelope, locked *atomic.Bool) // leaves the work's record
		applied bool                                                          // the comeback applies the work
		status  inbox.Status                                                  // the record it leaves
		outcome string
	}{
		{name: "recorded terminal", before: func(h *harness, env *envelope.Envelope, locked *atomic.Bool) {
			locked.Store(true)
			w := h.lambdaWorker(singleConfig(h), worker.Deps{Handlers: lockableStages(h, locked)})
			h.send(env)
			ev := h.sqsEvent(1, 30*time.Second)
			resp, err := w.HandleSQSEvent(context.Background(), ev)
			require.NoError(h.t, err)
			require.Empty(h.t, resp)
			h.deleteRecords(ev)
			require.Equal(h.t, inbox.StatusFailedTerminal, h.record(env.IdempotencyKey, env.MessageType).Status)
			locked.Store(false) // the data is fixed; nobody reopened the work
		}, status: inbox.StatusFailedTerminal, outcome: worker.OutcomeTerminal},
		{name: "held by a worker that died", before: func(h *harness, env *envelope.Envelope, _ *atomic.Bool) {
			// A worker claimed the work an hour ago and died: its lease
			// has long expired, its message went to the DLQ.
			g, err := gate.New(h.env.DynamoDB, gate.Config{Store: inbox.Store{Table: h.env.Table}, Owner: "worker-dead",
				Now: func() time.Time { return time.Now().Add(-time.Hour) }})
			require.NoError(h.t, err)
			d, err := g.Acquire(context.Background(), &gate.Request{Work: inbox.Work{Key: env.IdempotencyKey, MessageType: env.MessageType,
				RequestHash: env.RequestHash, SchemaVersion: env.SchemaVersion}})
			require.NoError(h.t, err)
			require.Equal(h.t, gate.Acquired, d.Action)
		}, applied: true, status: inbox.StatusCompleted, outcome: worker.OutcomeApplied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			var locked atomic.Bool
			env := stageChange(t, "k-back", "review", 1)
			tc.before(h, env, &locked)

			body, err := envelope.Encode(env)
			require.NoError(t, err)
			h.sendRaw(string(body))
			back := h.sqsEvent(1, 30*time.Second)
			require.Equal(t, "1", back[0].Attributes["ApproximateReceiveCount"])
			require.Empty(t, back[0].MessageAttributes, "nothing marks it")
			w := h.lambdaWorker(singleConfig(h), worker.Deps{Handlers: lockableStages(h, &locked)})
			resp, err := w.HandleSQSEvent(context.Background(), back)
			require.NoError(t, err)
			require.Empty(t, resp, "%+v", h.allEvents())

			c := h.item(caseflow.CaseKey("c1"))
			if tc.applied {
				require.Equal(t, int64(1), num(t, c, attrStageChanges), "applied once")
			} else {
				require.NotContains(t, c, attrStageChanges, "work recorded FAILED_TERMINAL is not applied by an unmarked comeback")
			}
			require.Equal(t, tc.status, h.record(env.IdempotencyKey, env.MessageType).Status, "the record and the item agree")
			last := h.allEvents()
			require.Equal(t, tc.outcome, last[len(last)-1].Outcome)
		})
	}
}
