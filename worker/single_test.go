package worker_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	semspans "github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// attrStageChanges counts the stage changes applied to a case item: with
// one write per work item, a double apply shows here.
const attrStageChanges = "stageChanges"

// stageWrite is the single-write handler's write: one update of the case
// item, guarded by the case's existence and the stage version.
func stageWrite(table string, p caseflow.StageChanged, v int64) ddbworker.Write {
	k := caseflow.CaseKey(p.CaseID)
	key := ddbworker.Key{caseflow.AttrPK: k[caseflow.AttrPK].(*ddbtypes.AttributeValueMemberS).Value,
		caseflow.AttrSK: k[caseflow.AttrSK].(*ddbtypes.AttributeValueMemberS).Value}
	return ddbworker.Update(table, key).Set(caseflow.AttrStage, p.Stage).Add(attrStageChanges, 1).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail(caseflow.CodeCaseNotFound, "the case does not exist")),
			ddbworker.NewerVersion(caseflow.AttrStageVersion, v))
}

// singleRoute registers CaseStageChanged on a single-write route whose
// handler returns result (nil: stageWrite), failing retryably the first
// fails runs, with the route options opts besides SingleWrite.
func singleRoute(h *harness, fails int, result func(p caseflow.StageChanged, v int64) ddbworker.Result, opts ...ddbworker.RouteOption) *ddbworker.Registry {
	if result == nil {
		result = func(p caseflow.StageChanged, v int64) ddbworker.Result {
			return ddbworker.Apply(stageWrite(h.env.Table, p, v))
		}
	}
	var mu sync.Mutex
	runs := 0
	reg := ddbworker.NewRegistry()
	require.NoError(h.t, reg.Register(caseflow.TypeStageChanged, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p caseflow.StageChanged) (ddbworker.Result, error) {
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		if n <= fails {
			return ddbworker.Result{}, failure.NewRetryable("DOWNSTREAM_DOWN", "the stage service is unavailable")
		}
		v, _ := m.AggregateVersion()
		return result(p, v), nil
	}), append([]ddbworker.RouteOption{ddbworker.SingleWrite()}, opts...)...))
	return reg
}

// singleModes are the single-write route's two fresh paths: the default,
// whose one call checks the inbox (TransactWriteItems), and
// SkipInboxCheck's plain conditional write.
var singleModes = []struct {
	name string
	opts []ddbworker.RouteOption
	op   string // the fresh path's call for an Update
}{
	{"checked", nil, "TransactWriteItems"},
	{"SkipInboxCheck", []ddbworker.RouteOption{ddbworker.SkipInboxCheck()}, "UpdateItem"},
}

// singleConfig hides a received message for 10 s: a single-write fresh
// path has no heartbeat, and on a loaded machine a 2 s visibility would
// hand the message to a second delivery mid-run (still applied once, but
// not the outcome a test expects first).
func singleConfig(h *harness) worker.Config {
	cfg := h.testConfig()
	cfg.VisibilityTimeout = 10 * time.Second
	return cfg
}

func stageChange(t *testing.T, key, stage string, v int64) *envelope.Envelope {
	return mustEnv(t)(caseflow.NewStageChange(key, "c1", stage, v))
}

// The single-write route: one conditional UpdateItem per fresh message and
// no inbox record; the fence in the item decides duplicates, mismatches
// and late versions; failures are recorded in the inbox and a redelivery
// commits through the gate.
func TestSingleWrite(t *testing.T) {
	for _, mode := range singleModes {
		t.Run("fresh: one call, no inbox record, the fence in the item/"+mode.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.inj.ResetCalls()
			h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil, mode.opts...)})
			env := stageChange(t, "k-single", "review", 1)
			h.send(env)
			ev := h.waitEvents(1, 20*time.Second, final)[0]
			require.Equal(t, worker.OutcomeApplied, ev.Outcome)
			require.Equal(t, 1, ev.Attempt)
			require.Equal(t, map[string]int{"DynamoDB." + mode.op: 1}, ddbCalls(h.inj.Calls()))
			require.Nil(t, h.record("k-single", caseflow.TypeStageChanged), "no inbox record on the success path")
			c := h.item(caseflow.CaseKey("c1"))
			require.Equal(t, "k-single", str(c, ddbworker.FenceKeyAttr(caseflow.AttrStageVersion)))
			require.Equal(t, env.RequestHash, str(c, ddbworker.FenceHashAttr(caseflow.AttrStageVersion)))
			require.EqualValues(t, 1, num(t, c, caseflow.AttrStageVersion), "the worker sets the version the guard fences")
			require.Equal(t, "review", str(c, caseflow.AttrStage))
			require.EqualValues(t, 1, num(t, c, attrStageChanges))
			h.requireQueueEmpty()
		})

		t.Run("duplicate: one call, no write/"+mode.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil, mode.opts...)})
			env := stageChange(t, "k-dup", "review", 1)
			h.send(env)
			h.waitEvents(1, 20*time.Second, final)
			before := h.item(caseflow.CaseKey("c1"))
			h.inj.ResetCalls()
			h.send(env) // a new SQS message for the same work
			ev := h.waitEvents(2, 20*time.Second, final)[1]
			require.Equal(t, worker.OutcomeDuplicate, ev.Outcome)
			require.Equal(t, map[string]int{"DynamoDB." + mode.op: 1}, ddbCalls(h.inj.Calls()), "a duplicate costs its one conditional write and no read")
			require.Equal(t, before, h.item(caseflow.CaseKey("c1")), "nothing written")
			require.Nil(t, h.record("k-dup", caseflow.TypeStageChanged))
			h.requireQueueEmpty()
		})
	}

	t.Run("the same version set by other work: IDEMPOTENCY_HASH_MISMATCH", func(t *testing.T) {
		for _, tc := range []struct{ name, key, stage string }{
			{"same key, other payload", "k-a", "appeal"},
			{"other key", "k-b", "review"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, testenv.Options{})
				h.seedCases("c1")
				h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil)})
				h.send(stageChange(t, "k-a", "review", 1))
				h.waitEvents(1, 20*time.Second, final)
				before := h.item(caseflow.CaseKey("c1"))
				other := stageChange(t, tc.key, tc.stage, 1)
				h.send(other)
				ev := h.waitEvents(2, 20*time.Second, final)[1]
				require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
				require.Equal(t, failure.CodeHashMismatch, ev.Code)
				require.Equal(t, before, h.item(caseflow.CaseKey("c1")), "no domain write")
				rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
				require.NoError(t, err)
				require.True(t, rej.Rejection)
				require.Equal(t, failure.CodeHashMismatch, rej.FailureCode)
				require.Contains(t, rej.FailureMessage, "set by")
				require.Equal(t, other.RequestHash, rej.RequestHash)
				require.Equal(t, failure.CodeHashMismatch, aws.ToString(h.dlq(1)[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
				h.requireQueueEmpty()
			})
		}
	})

	t.Run("a key reused at another version: IDEMPOTENCY_HASH_MISMATCH", func(t *testing.T) {
		// The version guard holds (or fails as for a late version), but the
		// fence names this key with other work: a key applies at most once.
		for _, tc := range []struct {
			name         string
			first, reuse int64
		}{
			{"a newer version", 1, 2},
			{"an older version", 2, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, testenv.Options{})
				h.seedCases("c1")
				metrics := metricstest.New()
				h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil), Metrics: metrics})
				h.send(stageChange(t, "k-reused", "review", tc.first))
				require.Equal(t, worker.OutcomeApplied, h.waitEvents(1, 20*time.Second, final)[0].Outcome)
				before := h.item(caseflow.CaseKey("c1"))
				reuse := stageChange(t, "k-reused", "appeal", tc.reuse)
				h.send(reuse)
				ev := h.waitEvents(2, 20*time.Second, final)[1]
				require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
				require.Equal(t, failure.CodeHashMismatch, ev.Code)
				require.Equal(t, before, h.item(caseflow.CaseKey("c1")), "the item is untouched")
				require.Equal(t, 1.0, metrics.Value("ddbworker_hash_mismatches_total"), "the alert")
				rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
				require.NoError(t, err)
				require.True(t, rej.Rejection)
				require.Equal(t, failure.CodeHashMismatch, rej.FailureCode)
				require.Contains(t, rej.FailureMessage, "the key was reused for other work")
				require.Equal(t, reuse.RequestHash, rej.RequestHash)
				require.Nil(t, h.record("k-reused", caseflow.TypeStageChanged), "the key's own record is not written")
				require.Equal(t, failure.CodeHashMismatch, aws.ToString(h.dlq(1)[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
				h.requireQueueEmpty()
			})
		}
	})

	t.Run("two routes on one item, by different version attributes: a fence each", func(t *testing.T) {
		// Stage changes guard the case item by stageVersion, notes by
		// noteVersion: each route's fence is its version attribute's, so
		// neither overwrites the other's and a duplicate of either, after
		// the other applied, is still a duplicate.
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		metrics := metricstest.New()
		reg := singleRoute(h, 0, nil)
		require.NoError(t, reg.Register(caseflow.TypeNote, ddbworker.JSON((&caseflow.Handlers{Table: h.env.Table}).NoteInOrder), ddbworker.SingleWrite()))
		h.start(singleConfig(h), worker.Deps{Handlers: reg, Metrics: metrics})
		stage1, stage2 := stageChange(t, "k-stage-1", "review", 1), stageChange(t, "k-stage-2", "decision", 2)
		note1 := mustEnv(t)(caseflow.NewNote("k-note-1", "c1", "first note", 1))
		n := 0
		for _, step := range []struct {
			env  *envelope.Envelope
			want string
		}{
			{stage1, worker.OutcomeApplied},
			{note1, worker.OutcomeApplied},
			{stage1, worker.OutcomeDuplicate}, // its stageVersion is 1 still; the note's fence is not its
			{note1, worker.OutcomeDuplicate},
			{stage2, worker.OutcomeApplied},
			{note1, worker.OutcomeDuplicate}, // noteVersion 1, fenced by the note, whatever the stage did
			{stage2, worker.OutcomeDuplicate},
		} {
			h.send(step.env)
			n++
			ev := h.waitEvents(n, 20*time.Second, final)[n-1]
			require.Equal(t, step.want, ev.Outcome, "delivery %d, %s: %+v", n, step.env.IdempotencyKey, ev)
			require.Equal(t, step.env.IdempotencyKey, ev.IdempotencyKey)
		}
		c := h.item(caseflow.CaseKey("c1"))
		require.EqualValues(t, 2, num(t, c, attrStageChanges), "each stage change applied once")
		require.EqualValues(t, 1, num(t, c, caseflow.AttrNoteCount), "the note applied once")
		require.EqualValues(t, 2, num(t, c, caseflow.AttrStageVersion))
		require.EqualValues(t, 1, num(t, c, caseflow.AttrNoteVersion))
		require.Equal(t, "decision", str(c, caseflow.AttrStage))
		require.Equal(t, "k-stage-2", str(c, ddbworker.FenceKeyAttr(caseflow.AttrStageVersion)))
		require.Equal(t, stage2.RequestHash, str(c, ddbworker.FenceHashAttr(caseflow.AttrStageVersion)))
		require.Equal(t, "k-note-1", str(c, ddbworker.FenceKeyAttr(caseflow.AttrNoteVersion)))
		require.Equal(t, note1.RequestHash, str(c, ddbworker.FenceHashAttr(caseflow.AttrNoteVersion)))
		require.Zero(t, metrics.Value("ddbworker_hash_mismatches_total"), "no mismatch")
		h.requireQueueEmpty()
	})

	t.Run("an older version: superseded, nothing written", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil)})
		h.send(stageChange(t, "k-v2", "appeal", 2))
		h.waitEvents(1, 20*time.Second, final)
		before := h.item(caseflow.CaseKey("c1"))
		h.send(stageChange(t, "k-v1", "review", 1))
		ev := h.waitEvents(2, 20*time.Second, final)[1]
		require.Equal(t, worker.OutcomeSuperseded, ev.Outcome)
		require.Equal(t, before, h.item(caseflow.CaseKey("c1")))
		require.Nil(t, h.record("k-v1", caseflow.TypeStageChanged))
		h.requireQueueEmpty()
	})

	for _, mode := range singleModes {
		t.Run("a lost response: applied once/"+mode.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: mode.op, Kind: faults.KindLostResponse, Times: 1})
			h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil, mode.opts...)})
			h.send(stageChange(t, "k-lost", "review", 1))
			ev := h.waitEvents(1, 30*time.Second, final)[0]
			require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse], "the fault fired")
			if mode.opts == nil {
				// The SDK's retry carries the call's ClientRequestToken:
				// DynamoDB answers it as the call that applied.
				require.Equal(t, worker.OutcomeApplied, ev.Outcome, "the retry is the same transaction")
			} else {
				require.Equal(t, worker.OutcomeDuplicate, ev.Outcome, "the retry finds its own fence")
			}
			require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), attrStageChanges))
			h.requireQueueEmpty()
		})
	}

	t.Run("concurrent duplicates: applied once", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, nil)})
		env := stageChange(t, "k-conc", "review", 1)
		h.send(env, env, env, env, env)
		evs := h.waitEvents(5, 30*time.Second, final)
		outcomes := map[string]int{}
		for _, ev := range evs {
			outcomes[ev.Outcome]++
		}
		require.Equal(t, map[string]int{worker.OutcomeApplied: 1, worker.OutcomeDuplicate: 4}, outcomes)
		require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), attrStageChanges))
		h.requireQueueEmpty()
	})

	t.Run("a failure is recorded; the redelivery commits through the gate", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 1, nil)})
		env := stageChange(t, "k-retry", "review", 1)
		h.send(env)
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 2, ev.Attempt)
		rec := h.record("k-retry", caseflow.TypeStageChanged)
		require.NotNil(t, rec)
		require.Equal(t, inbox.StatusCompleted, rec.Status, "the recorded failure is completed with the fenced write")
		require.Equal(t, 1, rec.Attempts)
		c := h.item(caseflow.CaseKey("c1"))
		require.Equal(t, "k-retry", str(c, ddbworker.FenceKeyAttr(caseflow.AttrStageVersion)))
		require.EqualValues(t, 1, num(t, c, attrStageChanges))
		h.requireQueueEmpty()
	})

	t.Run("a crash after the write: the redelivery is a duplicate, recorded", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		fp, hit := crashAt(hooks.AfterCommit, nil)
		h.start(h.testConfig(), worker.Deps{Handlers: singleRoute(h, 0, nil)}, hooks.Hooks{Failpoint: fp})
		h.send(stageChange(t, "k-crash", "review", 1))
		<-hit
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeDuplicate, ev.Outcome)
		require.Len(t, h.allEvents(), 1, "the crashed delivery reported nothing")
		rec := h.record("k-crash", caseflow.TypeStageChanged)
		require.NotNil(t, rec, "the redelivery took the gated path")
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, inbox.OutcomeApplied, rec.Outcome, "the work applied, by the crashed delivery")
		require.EqualValues(t, 1, num(t, h.item(caseflow.CaseKey("c1")), attrStageChanges))
		h.requireQueueEmpty()
	})

	t.Run("a crash after the write, then the redelivery's completion loses its response: still a duplicate", func(t *testing.T) {
		// The redelivery finds the crashed delivery's fence and completes its
		// record APPLIED under its own lease; that write's response is lost,
		// so its retry finds the record COMPLETED under its own token. That
		// is its own completion of a duplicate, not an application: it must
		// report what it would have reported (the chaos run's verification
		// saw a stage change reported applied twice, applied once).
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		caseKey := caseflow.CaseKey("c1")
		h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1,
			Match: func(in any) bool {
				u, ok := in.(*dynamodb.UpdateItemInput)
				return ok && !reflect.DeepEqual(u.Key, caseKey) // the inbox record's completion, not the fenced write
			}})
		fp, hit := crashAt(hooks.AfterCommit, nil)
		h.start(h.testConfig(), worker.Deps{Handlers: singleRoute(h, 0, nil)}, hooks.Hooks{Failpoint: fp})
		h.send(stageChange(t, "k-crash-lost", "review", 1))
		<-hit
		ev := h.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse], "the fault fired")
		require.Equal(t, worker.OutcomeDuplicate, ev.Outcome)
		rec := h.record("k-crash-lost", caseflow.TypeStageChanged)
		require.NotNil(t, rec)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, inbox.OutcomeApplied, rec.Outcome)
		require.EqualValues(t, 1, num(t, h.item(caseKey), attrStageChanges))
		h.requireQueueEmpty()
	})

	t.Run("results it refuses: INVALID_HANDLER_RESULT", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			result func(h *harness, p caseflow.StageChanged, v int64) ddbworker.Result
		}{
			{"two writes", func(h *harness, p caseflow.StageChanged, v int64) ddbworker.Result {
				w := stageWrite(h.env.Table, p, v)
				return ddbworker.Apply(w, ddbworker.Put(h.env.Table, ddbworker.Key{caseflow.AttrPK: "x", caseflow.AttrSK: "y"}, nil))
			}},
			{"no version guard", func(h *harness, p caseflow.StageChanged, v int64) ddbworker.Result {
				return ddbworker.Apply(ddbworker.Update(h.env.Table, ddbworker.Key{caseflow.AttrPK: "x", caseflow.AttrSK: "y"}).Set("a", 1))
			}},
			{"the version set to another value", func(h *harness, p caseflow.StageChanged, v int64) ddbworker.Result {
				return ddbworker.Apply(stageWrite(h.env.Table, p, v).Set(caseflow.AttrStageVersion, v+1))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, testenv.Options{})
				h.seedCases("c1")
				before := h.item(caseflow.CaseKey("c1"))
				h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, func(p caseflow.StageChanged, v int64) ddbworker.Result { return tc.result(h, p, v) })})
				h.send(stageChange(t, "k-refused", "review", 1))
				ev := h.waitEvents(1, 20*time.Second, final)[0]
				require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
				require.Equal(t, failure.CodeInvalidResult, ev.Code)
				require.Equal(t, before, h.item(caseflow.CaseKey("c1")))
				rec := h.record("k-refused", caseflow.TypeStageChanged)
				require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
				require.Equal(t, failure.CodeInvalidResult, rec.FailureCode)
				require.Contains(t, rec.FailureMessage, "single-write")
			})
		}
	})

	t.Run("a result with no write: completed without a call, no commit time, no record", func(t *testing.T) {
		for _, tc := range []struct{ name, outcome, want string }{
			{"default outcome", "", worker.OutcomeApplied},
			{"the handler's own outcome", "NOTHING_TO_DO", "nothing_to_do"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, testenv.Options{})
				h.seedCases("c1")
				h.inj.ResetCalls()
				metrics := metricstest.New()
				h.start(singleConfig(h), worker.Deps{Metrics: metrics, Handlers: singleRoute(h, 0, func(caseflow.StageChanged, int64) ddbworker.Result {
					return ddbworker.Result{Outcome: tc.outcome}
				})})
				h.send(stageChange(t, "k-nothing", "review", 1))
				ev := h.waitEvents(1, 20*time.Second, final)[0]
				require.Equal(t, tc.want, ev.Outcome)
				require.Empty(t, ddbCalls(h.inj.Calls()), "no DynamoDB call")
				require.Nil(t, h.record("k-nothing", caseflow.TypeStageChanged), "nothing recorded")
				require.Zero(t, metrics.Count("ddbworker_transaction_seconds"), "no commit latency: no commit call was made")
				require.Empty(t, metrics.Series("ddbworker_inbox_record_bytes"), "no record, no record size")
				require.Equal(t, 1.0, metrics.Value("ddbworker_messages_total", caseflow.TypeStageChanged, worker.OutcomeApplied))
				h.requireQueueEmpty()
			})
		}
	})

	t.Run("the inbox record size: observed only for work that has a record", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		metrics := metricstest.New()
		h.start(singleConfig(h), worker.Deps{Metrics: metrics, Handlers: singleRoute(h, 0, nil)})
		v2 := stageChange(t, "k-size-2", "appeal", 2)
		h.send(v2)
		h.waitEvents(1, 20*time.Second, final)
		h.send(v2, stageChange(t, "k-size-1", "review", 1)) // a duplicate, a late version
		evs := h.waitEvents(3, 20*time.Second, final)
		require.ElementsMatch(t, []string{worker.OutcomeApplied, worker.OutcomeDuplicate, worker.OutcomeSuperseded},
			[]string{evs[0].Outcome, evs[1].Outcome, evs[2].Outcome})
		require.Empty(t, metrics.Series("ddbworker_inbox_record_bytes"), "the fresh path wrote no record")
		// A redriven message takes the gated path: the gate writes its record.
		h.sendWithAttributes(stageChange(t, "k-size-3", "decision", 3), map[string]types.MessageAttributeValue{dlq.AttrRedrivenFrom: stringAttr("dlq")})
		require.Equal(t, worker.OutcomeApplied, h.waitEvents(4, 20*time.Second, final)[3].Outcome)
		require.NotNil(t, h.record("k-size-3", caseflow.TypeStageChanged))
		require.Len(t, metrics.Series("ddbworker_inbox_record_bytes"), 1, "observed for the recorded work")
	})

	t.Run("the inbox record size: observed for work decided again from the record it found", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		metrics := metricstest.New()
		cfg := singleConfig(h)
		cfg.Backoff = worker.Backoff{Base: 20 * time.Second, Max: 20 * time.Second, Jitter: worker.Zero} // the first message stays away
		h.start(cfg, worker.Deps{Metrics: metrics, Handlers: singleRoute(h, 2, nil)})
		env := stageChange(t, "k-found", "review", 1)
		h.send(env) // run 1 fails: its failure creates the record
		h.waitEvents(1, 20*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
		require.EqualValues(t, 1, metrics.Count("ddbworker_inbox_record_bytes", caseflow.TypeStageChanged), "its failure wrote the work's record")
		// The same work in a new message: its fresh run (2) fails too, and
		// the write of that failure finds the record — the delivery is
		// decided again from it, claims, and applies under the lease (run
		// 3): its record is COMPLETED, and counted.
		h.send(env)
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 2, ev.Attempt)
		require.Equal(t, inbox.StatusCompleted, h.record("k-found", caseflow.TypeStageChanged).Status)
		require.EqualValues(t, 2, metrics.Count("ddbworker_inbox_record_bytes", caseflow.TypeStageChanged), "observed for the recorded work")
	})

	for _, mode := range singleModes {
		t.Run("the commit span names the call made: TransactWriteItems, UpdateItem, PutItem, or none/"+mode.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{})
			h.seedCases("c1")
			sp := newSpans(t)
			h.start(singleConfig(h), worker.Deps{TracerProvider: sp.tp, Handlers: singleRoute(h, 0, func(p caseflow.StageChanged, v int64) ddbworker.Result {
				switch p.Stage {
				case "review":
					return ddbworker.Apply(stageWrite(h.env.Table, p, v))
				case "appeal":
					k := caseflow.CaseKey(p.CaseID)
					key := ddbworker.Key{caseflow.AttrPK: k[caseflow.AttrPK].(*ddbtypes.AttributeValueMemberS).Value,
						caseflow.AttrSK: k[caseflow.AttrSK].(*ddbtypes.AttributeValueMemberS).Value}
					return ddbworker.Apply(ddbworker.Put(h.env.Table, key, ddbworker.Item{caseflow.AttrStage: p.Stage}).
						Guard(ddbworker.NewerVersion(caseflow.AttrStageVersion, v)))
				}
				return ddbworker.Result{} // nothing to do
			}, mode.opts...)})
			for i, tc := range []struct {
				stage string
				op    string // "": no db attributes
			}{
				{"review", map[bool]string{true: "TransactWriteItems", false: "UpdateItem"}[mode.opts == nil]},
				{"appeal", map[bool]string{true: "TransactWriteItems", false: "PutItem"}[mode.opts == nil]},
				{"intake", ""},
			} {
				h.send(stageChange(t, "k-span-"+tc.stage, tc.stage, int64(i+1)))
				require.Equal(t, worker.OutcomeApplied, h.waitEvents(i+1, 20*time.Second, final)[i].Outcome)
				consumer := sp.wait(i+1, consumerOf(h.env.Queues.URL))[i]
				commit := sp.children(consumer)[semspans.SpanCommit]
				require.NotNil(t, commit, "a commit span for %s", tc.stage)
				a := attrs(commit)
				if tc.op == "" {
					require.NotContains(t, a, attribute.Key("db.operation.name"), "nothing written: no db attributes")
					require.NotContains(t, a, attribute.Key("db.system.name"))
					require.Equal(t, trace.SpanKindInternal, commit.SpanKind())
					continue
				}
				require.Equal(t, tc.op, a["db.operation.name"].AsString(), tc.stage)
				require.Equal(t, "aws.dynamodb", a["db.system.name"].AsString())
				require.Equal(t, trace.SpanKindClient, commit.SpanKind())
			}
		})
	}

	t.Run("the handler may set the version itself", func(t *testing.T) {
		h := newHarness(t, testenv.Options{})
		h.seedCases("c1")
		h.start(singleConfig(h), worker.Deps{Handlers: singleRoute(h, 0, func(p caseflow.StageChanged, v int64) ddbworker.Result {
			return ddbworker.Apply(stageWrite(h.env.Table, p, v).Set(caseflow.AttrStageVersion, v))
		})})
		h.send(stageChange(t, "k-own-version", "review", 3))
		ev := h.waitEvents(1, 20*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.EqualValues(t, 3, num(t, h.item(caseflow.CaseKey("c1")), caseflow.AttrStageVersion))
	})
}

// ddbCalls keeps the DynamoDB calls of an injector's tally.
func ddbCalls(calls map[string]int) map[string]int {
	out := map[string]int{}
	for op, n := range calls {
		if len(op) > 9 && op[:9] == "DynamoDB." {
			out[op] = n
		}
	}
	return out
}

// typeStageCorrected is a second message type whose handler writes what a
// stage change writes (the case's stage, guarded by its stageVersion): one
// key's work of two types on one version attribute of one item.
const typeStageCorrected = "CaseStageCorrected"

// stageRoutes registers CaseStageChanged and typeStageCorrected with one
// handler (stageWrite, setting the version; its version guard failing with
// onStale when given), on the single-write route or the default (gated)
// one.
func stageRoutes(h *harness, single bool, onStale *ddbworker.Policy) *ddbworker.Registry {
	var opts []ddbworker.RouteOption
	if single {
		opts = append(opts, ddbworker.SingleWrite())
	}
	reg := ddbworker.NewRegistry()
	for _, typ := range []string{caseflow.TypeStageChanged, typeStageCorrected} {
		require.NoError(h.t, reg.Register(typ, ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p caseflow.StageChanged) (ddbworker.Result, error) {
			v, _ := m.AggregateVersion()
			// It sets the version itself: the gated route writes only what
			// the handler returns.
			w := stageWrite(h.env.Table, p, v).Set(caseflow.AttrStageVersion, v)
			if onStale != nil {
				k := caseflow.CaseKey(p.CaseID)
				w = ddbworker.Update(h.env.Table, ddbworker.Key{caseflow.AttrPK: k[caseflow.AttrPK].(*ddbtypes.AttributeValueMemberS).Value,
					caseflow.AttrSK: k[caseflow.AttrSK].(*ddbtypes.AttributeValueMemberS).Value}).
					Set(caseflow.AttrStage, p.Stage).Add(attrStageChanges, 1).Set(caseflow.AttrStageVersion, v).
					Guard(ddbworker.NewerVersion(caseflow.AttrStageVersion, v).Else(*onStale))
			}
			return ddbworker.Apply(w), nil
		}), opts...))
	}
	return reg
}

// stageCorrection is a stage change of typeStageCorrected.
func stageCorrection(t *testing.T, key, stage string, v int64) *envelope.Envelope {
	env := stageChange(t, key, stage, v)
	env.MessageType = typeStageCorrected
	var err error
	env.RequestHash, err = envelope.RequestHash(env)
	require.NoError(t, err)
	return env
}

// The inbox names work by key and message type (IDEMP#key, WORKER#type):
// two types' work under one key is two works. The single-write fence
// names work the same way, so the same messages end the same on both
// routes: another type's work under the key applies, or meets the version
// guard, as on the gated route — it is not refused as the key reused
// (IDEMPOTENCY_HASH_MISMATCH, dead-lettered, as the fence that named only
// the key had it).
func TestSingleWriteTwoTypesOneKey(t *testing.T) {
	type step struct {
		env  func(t *testing.T) *envelope.Envelope
		want string
		code string // a terminal outcome's failure code
	}
	stale := ddbworker.Fail("STAGE_STALE", "the case holds this stage version already")
	changed := func(stage string, v int64) func(t *testing.T) *envelope.Envelope {
		return func(t *testing.T) *envelope.Envelope { return stageChange(t, "k-both", stage, v) }
	}
	corrected := func(stage string, v int64) func(t *testing.T) *envelope.Envelope {
		return func(t *testing.T) *envelope.Envelope { return stageCorrection(t, "k-both", stage, v) }
	}
	for _, tc := range []struct {
		name    string
		onStale *ddbworker.Policy // the version guard's policy (nil: its default, Supersede)
		steps   []step            // sent in order, then the last applied work again
		stage   string            // the case's stage, stageVersion and stage changes at the end
		version int64
		changes int64
	}{
		{name: "another type at a newer version: both apply", steps: []step{
			{changed("review", 1), worker.OutcomeApplied, ""},
			{corrected("appeal", 2), worker.OutcomeApplied, ""},
		}, stage: "appeal", version: 2, changes: 2},
		{name: "another type at an older version: superseded", steps: []step{
			{changed("appeal", 2), worker.OutcomeApplied, ""},
			{corrected("review", 1), worker.OutcomeSuperseded, ""},
		}, stage: "appeal", version: 2, changes: 1},
		{name: "another type at the same version: the version guard's policy", steps: []step{
			{changed("review", 1), worker.OutcomeApplied, ""},
			{corrected("appeal", 1), worker.OutcomeSuperseded, ""},
		}, stage: "review", version: 1, changes: 1},
		{name: "another type at the same version: the version guard's own policy", onStale: &stale, steps: []step{
			{changed("review", 1), worker.OutcomeApplied, ""},
			{corrected("appeal", 1), worker.OutcomeTerminal, "STAGE_STALE"},
		}, stage: "review", version: 1, changes: 1},
	} {
		for _, route := range []struct {
			name   string
			single bool
		}{{"gated", false}, {"single-write", true}} {
			t.Run(tc.name+"/"+route.name, func(t *testing.T) {
				h := newHarness(t, testenv.Options{})
				h.seedCases("c1")
				metrics := metricstest.New()
				h.start(singleConfig(h), worker.Deps{Handlers: stageRoutes(h, route.single, tc.onStale), Metrics: metrics})
				var applied *envelope.Envelope // the last work applied: sent again, a duplicate on both routes
				for i, s := range tc.steps {
					env := s.env(t)
					h.send(env)
					ev := h.waitEvents(i+1, 20*time.Second, final)[i]
					require.Equal(t, s.want, ev.Outcome, "step %d, %s v%d: %+v", i+1, env.MessageType, *env.AggregateVersion, ev)
					require.Equal(t, s.code, ev.Code, "step %d", i+1)
					if s.want == worker.OutcomeApplied {
						applied = env
					}
				}
				h.send(caseflow.Resend(applied))
				n := len(tc.steps) + 1
				require.Equal(t, worker.OutcomeDuplicate, h.waitEvents(n, 20*time.Second, final)[n-1].Outcome, "the last applied work again")
				c := h.item(caseflow.CaseKey("c1"))
				require.Equal(t, tc.stage, str(c, caseflow.AttrStage))
				require.EqualValues(t, tc.version, num(t, c, caseflow.AttrStageVersion))
				require.EqualValues(t, tc.changes, num(t, c, attrStageChanges), "each work applied at most once")
				require.Zero(t, metrics.Value("ddbworker_hash_mismatches_total"), "no key reuse")
				h.requireQueueEmpty()
			})
		}
	}
}

// A fence written before fences named the message type (a key and a hash,
// no type) still stands for the work it names: a redelivery of that work
// is a duplicate; another type's work under its key is refused
// (IDEMPOTENCY_HASH_MISMATCH), because that fence cannot tell it from the
// key reused — nothing applies twice.
func TestSingleWriteOlderFence(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	metrics := metricstest.New()
	applied := stageChange(t, "k-old", "review", 1)
	// The item as the older worker left it after applying that work.
	update := expression.Set(expression.Name(caseflow.AttrStage), expression.Value("review")).
		Set(expression.Name(attrStageChanges), expression.Value(1)).
		Set(expression.Name(caseflow.AttrStageVersion), expression.Value(1)).
		Set(expression.Name(ddbworker.FenceKeyAttr(caseflow.AttrStageVersion)), expression.Value(applied.IdempotencyKey)).
		Set(expression.Name(ddbworker.FenceHashAttr(caseflow.AttrStageVersion)), expression.Value(applied.RequestHash))
	ex, err := expression.NewBuilder().WithUpdate(update).Build()
	require.NoError(t, err)
	_, err = h.env.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(h.env.Table), Key: caseflow.CaseKey("c1"),
		UpdateExpression: ex.Update(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()})
	require.NoError(t, err)
	before := h.item(caseflow.CaseKey("c1"))
	h.start(singleConfig(h), worker.Deps{Handlers: stageRoutes(h, true, nil), Metrics: metrics})

	h.send(caseflow.Resend(applied))
	require.Equal(t, worker.OutcomeDuplicate, h.waitEvents(1, 20*time.Second, final)[0].Outcome, "the work the older fence names")
	h.send(stageCorrection(t, "k-old", "appeal", 2))
	ev := h.waitEvents(2, 20*time.Second, final)[1]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, failure.CodeHashMismatch, ev.Code)
	rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
	require.NoError(t, err)
	require.Contains(t, rej.FailureMessage, "a fence that does not name its message type")
	require.Equal(t, before, h.item(caseflow.CaseKey("c1")), "nothing written")
	require.Equal(t, 1.0, metrics.Value("ddbworker_hash_mismatches_total"))
	h.requireQueueEmpty()
}
