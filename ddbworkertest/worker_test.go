package ddbworkertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/invoices"
	ddbwrites "github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// writes is a handler that returns ws (and records the message it saw).
type writes struct {
	mu   sync.Mutex
	seen *ddbworker.Message
	res  ddbworker.Result
	err  error
}

func (h *writes) Handle(_ context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = m
	return h.res, h.err
}

func returning(ws ...ddbworker.Write) *writes { return &writes{res: ddbworker.Apply(ws...)} }

func failing(err error) *writes { return &writes{err: err} }

var caseKey = ddbworker.Key{"PK": "CASE#c-1", "SK": "CASE"}

func msg(opts ...ddbworkertest.Option) ddbworkertest.Message {
	return ddbworkertest.NewMessage("Tested", map[string]string{"id": "1"}, opts...)
}

func TestNewMessageDefaultsAndOptions(t *testing.T) {
	h := returning()
	ddbworkertest.New(h).RequireWork(t, msg()).RequireApplied(t)
	e := h.seen.Envelope
	require.Equal(t, ddbworkertest.DefaultKey, e.IdempotencyKey)
	require.Equal(t, ddbworkertest.DefaultMessageID, e.MessageID)
	require.Equal(t, ddbworkertest.DefaultProducer, e.Producer)
	require.Equal(t, "Tested", e.MessageType)
	require.Equal(t, envelope.SchemaV1, e.SchemaVersion)
	at, id := h.seen.Aggregate()
	require.Equal(t, []string{ddbworkertest.DefaultAggregateType, ddbworkertest.DefaultAggregateID}, []string{at, id})
	require.True(t, ddbworkertest.DefaultOccurredAt.Equal(e.OccurredAt))
	require.Nil(t, e.AggregateVersion)
	require.Nil(t, e.AttemptPolicy)
	require.JSONEq(t, `{"id":"1"}`, string(e.Payload))
	require.NotEmpty(t, e.RequestHash, "decoded by the real decoder")
	require.Equal(t, 1, h.seen.Attempt)
	require.Equal(t, 1, h.seen.ReceiveCount)
	require.Zero(t, h.seen.Run)
	require.Equal(t, ddbworkertest.DefaultSQSMessageID, h.seen.SQSMessageID)

	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at2 := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	ddbworkertest.New(h).RequireWork(t, msg(
		ddbworkertest.Key("k-7"), ddbworkertest.Aggregate("Order", "o-7"), ddbworkertest.AggregateVersion(7),
		ddbworkertest.AttemptPolicy(envelope.AttemptPolicy{MaxBusinessAttempts: 9, RetryableUntil: &until, TerminalAfterCodes: []string{"X"}}),
		ddbworkertest.OccurredAt(at2), ddbworkertest.Edit(func(e *envelope.Envelope) { e.CorrelationID = "corr-1" }),
		ddbworkertest.Attempt(3), ddbworkertest.ReceiveCount(4),
	)).RequireApplied(t)
	e = h.seen.Envelope
	require.Equal(t, "k-7", h.seen.Key())
	at, id = h.seen.Aggregate()
	require.Equal(t, []string{"Order", "o-7"}, []string{at, id})
	v, ok := h.seen.AggregateVersion()
	require.True(t, ok)
	require.EqualValues(t, 7, v)
	require.Equal(t, 9, e.AttemptPolicy.MaxBusinessAttempts)
	require.True(t, until.Equal(*e.AttemptPolicy.RetryableUntil))
	require.Equal(t, []string{"X"}, e.AttemptPolicy.TerminalAfterCodes)
	require.True(t, at2.Equal(h.seen.OccurredAt()))
	require.Equal(t, "corr-1", e.CorrelationID)
	require.Equal(t, 3, h.seen.Attempt)
	require.Equal(t, 4, h.seen.ReceiveCount)
}

// Every envelope goes through the worker's decoder: what it rejects ends
// terminal with the decoder's code, and the handler never runs.
func TestRejectedEnvelopes(t *testing.T) {
	valid, err := caseflow.NewStageChange("k-1", "c-1", "review", 2)
	require.NoError(t, err)
	edit := func(f func(*envelope.Envelope)) ddbworkertest.Message {
		return ddbworkertest.FromEnvelope(valid, ddbworkertest.Edit(f))
	}
	for _, tc := range []struct {
		name string
		msg  ddbworkertest.Message
		code string
	}{
		{"not JSON", ddbworkertest.FromBody([]byte("nope")), string(envelope.CodeInvalidJSON)},
		{"not an object", ddbworkertest.FromBody([]byte(`[1]`)), string(envelope.CodeInvalidJSON)},
		{"empty body", ddbworkertest.FromBody(nil), string(envelope.CodeInvalidJSON)},
		{"no producer", edit(func(e *envelope.Envelope) { e.Producer = "" }), string(envelope.CodeMissingField)},
		{"zero occurredAt", edit(func(e *envelope.Envelope) { e.OccurredAt = time.Time{} }), string(envelope.CodeInvalidField)},
		{"future schema", edit(func(e *envelope.Envelope) { e.SchemaVersion = 2 }), string(envelope.CodeUnknownSchemaVersion)},
		{"key too long", edit(func(e *envelope.Envelope) { e.IdempotencyKey = strings.Repeat("k", 513) }), string(envelope.CodeKeyTooLong)},
		{"negative version", edit(func(e *envelope.Envelope) { v := int64(-1); e.AggregateVersion = &v }), string(envelope.CodeInvalidField)},
		{"bad message type", ddbworkertest.NewMessage("has space", 1), string(envelope.CodeInvalidField)},
		{"null payload", ddbworkertest.NewMessage("T", nil), string(envelope.CodeInvalidField)},
		{"unknown type", ddbworkertest.FromEnvelope(valid, ddbworkertest.Edit(func(e *envelope.Envelope) { e.MessageType = "CaseClosed" })), failure.CodeUnknownMessageType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := returning()
			reg := ddbworker.NewRegistry()
			require.NoError(t, reg.Register(caseflow.TypeStageChanged, h))
			res := ddbworkertest.NewRegistry(reg).RequireWork(t, tc.msg)
			f := res.RequireTerminal(t, tc.code)
			require.False(t, f.Infrastructure)
			require.Nil(t, res.Message, "the handler did not run")
			require.Nil(t, h.seen)
			require.Empty(t, res.Writes)
			if tc.code != failure.CodeUnknownMessageType {
				require.Nil(t, res.Envelope)
				var ee *envelope.Error
				require.ErrorAs(t, f.Err, &ee, "the decoder's error is reachable")
				require.Equal(t, tc.code, string(ee.Code))
			} else {
				require.Equal(t, `no handler for message type "CaseClosed"`, f.Message)
			}
		})
	}
	t.Run("a valid envelope of the test's own", func(t *testing.T) {
		h := returning()
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register(caseflow.TypeStageChanged, h, ddbworker.Fused()))
		ddbworkertest.NewRegistry(reg).RequireWork(t, ddbworkertest.FromEnvelope(valid)).RequireApplied(t)
		require.Equal(t, valid.RequestHash, h.seen.Envelope.RequestHash)
		require.Equal(t, caseflow.TypeStageChanged, valid.MessageType, "FromEnvelope edits a copy")
		require.Equal(t, "caseflow-example", valid.Producer)
	})
}

// Failures are settled as the worker settles them: classified, then put
// through the attempts policy unless they are infrastructure trouble.
func TestFailures(t *testing.T) {
	past := time.Now().Add(-time.Hour)
	policy := func(p envelope.AttemptPolicy) ddbworkertest.Option { return ddbworkertest.AttemptPolicy(p) }
	for _, tc := range []struct {
		name    string
		err     error
		opts    []ddbworkertest.Option
		kind    ddbworkertest.Kind
		code    string
		infra   bool
		message string
	}{
		{"plain error", errors.New("pricing said no"), nil, ddbworkertest.Retryable, failure.CodeHandlerError, false, "pricing said no"},
		{"retryable", ddbworker.Retryable("PRICING_DOWN", "down"), nil, ddbworkertest.Retryable, "PRICING_DOWN", false, "down"},
		{"terminal", ddbworker.Terminal("CASE_CLOSED", "closed"), nil, ddbworkertest.Terminal, "CASE_CLOSED", false, "closed"},
		{"wrapped terminal", fmt.Errorf("deadline: %w", ddbworker.Terminal("CASE_CLOSED", "closed")), nil, ddbworkertest.Terminal, "CASE_CLOSED", false, "closed"},
		{"last attempt", ddbworker.Retryable("PRICING_DOWN", "down"), []ddbworkertest.Option{ddbworkertest.Attempt(ddbworkertest.DefaultMaxAttempts)},
			ddbworkertest.Terminal, failure.CodeMaxAttempts, false, "5 of 5 business attempts used; last failure PRICING_DOWN: down"},
		{"the message's own limit", ddbworker.Retryable("PRICING_DOWN", "down"), []ddbworkertest.Option{policy(envelope.AttemptPolicy{MaxBusinessAttempts: 2}), ddbworkertest.Attempt(2)},
			ddbworkertest.Terminal, failure.CodeMaxAttempts, false, "2 of 2 business attempts used; last failure PRICING_DOWN: down"},
		{"terminal after code", ddbworker.Retryable("PRICING_DOWN", "down"), []ddbworkertest.Option{policy(envelope.AttemptPolicy{TerminalAfterCodes: []string{"PRICING_DOWN"}})},
			ddbworkertest.Terminal, "PRICING_DOWN", false, "down (code listed in terminalAfterCodes)"},
		{"retry window passed", ddbworker.Retryable("PRICING_DOWN", "down"), []ddbworkertest.Option{policy(envelope.AttemptPolicy{RetryableUntil: &past})},
			ddbworkertest.Terminal, failure.CodeRetryWindowExpired, false, ""},
		{"infrastructure: never counted", failure.NewRetryable(failure.CodeThrottled, "slow down"), []ddbworkertest.Option{ddbworkertest.Attempt(ddbworkertest.DefaultMaxAttempts)},
			ddbworkertest.Retryable, failure.CodeThrottled, true, "slow down"},
		{"a context deadline is a timeout", context.DeadlineExceeded, nil, ddbworkertest.Retryable, failure.CodeTimeout, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ddbworkertest.New(failing(tc.err)).RequireWork(t, msg(tc.opts...))
			require.Equal(t, tc.kind, res.Kind, "%s", res)
			require.Equal(t, tc.kind, res.Failure.Kind)
			require.Equal(t, tc.code, res.Failure.Code)
			require.Equal(t, tc.infra, res.Failure.Infrastructure)
			if tc.message != "" {
				require.Equal(t, tc.message, res.Failure.Message)
			}
			require.Equal(t, tc.err, res.Err)
			if f, ok := failure.As(tc.err); !ok || !f.IsTerminal() && res.Failure.Code != f.Code {
				require.ErrorIs(t, res.Failure.Err, tc.err, "the handler's error is reachable")
			}
			require.NotNil(t, res.Message)
			require.Equal(t, -1, res.FailedWrite)
		})
	}
	t.Run("invalid payload", func(t *testing.T) {
		res := invoiceKit().RequireWork(t, ddbworkertest.NewMessage(invoices.TypeInvoiceRequested, map[string]any{"orderId": 7}))
		f := res.RequireTerminal(t, ddbworker.CodeInvalidPayload)
		require.ErrorIs(t, f.Err, ddbworker.ErrPayload)
	})
	t.Run("panic", func(t *testing.T) {
		res := ddbworkertest.New(ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
			panic(errors.New("boom"))
		})).RequireWork(t, msg())
		f := res.RequireRetryable(t, failure.CodeHandlerPanic)
		require.Equal(t, "handler panicked: boom", f.Message)
		require.False(t, f.Infrastructure, "a panic counts as an attempt")
		require.EqualError(t, res.Panic.(error), "boom")
	})
	t.Run("writes of a failed run are shown, not judged", func(t *testing.T) {
		h := returning(ddbworker.Update("t", caseKey).Set("a", 1).Guard(ddbworker.MustExist()))
		h.err = errors.New("but no")
		res := ddbworkertest.New(h).RequireWork(t, msg())
		res.RequireRetryable(t, failure.CodeHandlerError)
		require.Len(t, res.Writes, 1)
		require.Equal(t, ddbworkertest.NotEvaluated, res.Writes[0].Eval)
	})
}

// The commit is judged against the items the test declares: the first
// write whose condition fails names the verdict through its guard.
func TestCommitVerdicts(t *testing.T) {
	at := func(key ddbworker.Key, item ddbworker.Item) ddbworkertest.Existing {
		return ddbworkertest.Existing{Table: "t", Key: key, Item: item}
	}
	other := ddbworker.Key{"PK": "CASE#c-2", "SK": "CASE"}
	third := ddbworker.Key{"PK": "CASE#c-3", "SK": "CASE"}
	// A fresh Write each time: Writes derived from one shared Update share
	// its expression builder's state.
	newUpdate := func() ddbworker.Write { return ddbworker.Update("t", caseKey).Set("stage", "review") }
	for _, tc := range []struct {
		name    string
		writes  []ddbworker.Write
		before  []ddbworkertest.Existing
		kind    ddbworkertest.Kind
		outcome string // Applied, Superseded
		code    string // Terminal
		failed  int
		evals   []ddbworkertest.Eval
	}{
		{"no writes", nil, nil, ddbworkertest.Applied, "APPLIED", "", -1, nil},
		{"unguarded", []ddbworker.Write{newUpdate()}, nil, ddbworkertest.Applied, "APPLIED", "", -1, []ddbworkertest.Eval{ddbworkertest.Unconditional}},
		{"must exist: missing", []ddbworker.Write{newUpdate().Guard(ddbworker.MustExist())}, nil,
			ddbworkertest.Terminal, "", "ITEM_NOT_FOUND", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"must exist: there", []ddbworker.Write{newUpdate().Guard(ddbworker.MustExist())}, []ddbworkertest.Existing{at(caseKey, nil)},
			ddbworkertest.Applied, "APPLIED", "", -1, []ddbworkertest.Eval{ddbworkertest.Holds}},
		{"another item does not count", []ddbworker.Write{newUpdate().Guard(ddbworker.MustExist())}, []ddbworkertest.Existing{at(other, nil)},
			ddbworkertest.Terminal, "", "ITEM_NOT_FOUND", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"create only: there", []ddbworker.Write{ddbworker.Put("t", caseKey, ddbworker.Item{"a": 1}).Guard(ddbworker.CreateOnly())}, []ddbworkertest.Existing{at(caseKey, nil)},
			ddbworkertest.Superseded, "ALREADY_EXISTS", "", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"newer version: same", []ddbworker.Write{newUpdate().Guard(ddbworker.NewerVersion("v", 3))}, []ddbworkertest.Existing{at(caseKey, ddbworker.Item{"v": 3})},
			ddbworkertest.Superseded, "SUPERSEDED", "", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"newer version: no version yet", []ddbworker.Write{newUpdate().Guard(ddbworker.NewerVersion("v", 3))}, []ddbworkertest.Existing{at(caseKey, nil)},
			ddbworkertest.Applied, "APPLIED", "", -1, []ddbworkertest.Eval{ddbworkertest.Holds}},
		{"expect version: moved", []ddbworker.Write{newUpdate().Guard(ddbworker.ExpectVersion("v", 3))}, []ddbworkertest.Existing{at(caseKey, ddbworker.Item{"v": 4})},
			ddbworkertest.Rerun, "", "", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"equal with a policy", []ddbworker.Write{ddbworker.Delete("t", caseKey).Guard(ddbworker.Equal("state", "open").Else(ddbworker.Fail("CLOSED", "")))},
			[]ddbworkertest.Existing{at(caseKey, ddbworker.Item{"state": "closed"})}, ddbworkertest.Terminal, "", "CLOSED", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"check", []ddbworker.Write{newUpdate(), ddbworker.Check("t", other, ddbworker.MustExist().Else(ddbworker.Supersede("GONE")))}, nil,
			ddbworkertest.Superseded, "GONE", "", 1, []ddbworkertest.Eval{ddbworkertest.Unconditional, ddbworkertest.Fails}},
		{"the first failing write names the verdict",
			[]ddbworker.Write{
				ddbworker.Update("t", other).Add("n", 1).Guard(ddbworker.MustExist()),
				ddbworker.Put("t", caseKey, nil).Guard(ddbworker.CreateOnly()),
				ddbworker.Update("t", third).Set("stage", "review").Guard(ddbworker.ExpectVersion("v", 1)),
			},
			[]ddbworkertest.Existing{at(other, nil), at(caseKey, nil), at(third, ddbworker.Item{"v": 2})},
			ddbworkertest.Superseded, "ALREADY_EXISTS", "", 1, []ddbworkertest.Eval{ddbworkertest.Holds, ddbworkertest.Fails, ddbworkertest.Fails}},
		{"the first guard on a write", []ddbworker.Write{newUpdate().Guard(ddbworker.MustExist().Else(ddbworker.Fail("A", "")), ddbworker.NewerVersion("v", 1).Else(ddbworker.Fail("B", "")))}, nil,
			ddbworkertest.Terminal, "", "A", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
		{"the second guard on a write", []ddbworker.Write{newUpdate().Guard(ddbworker.MustExist().Else(ddbworker.Fail("A", "")), ddbworker.NewerVersion("v", 1).Else(ddbworker.Fail("B", "")))},
			[]ddbworkertest.Existing{at(caseKey, ddbworker.Item{"v": 1})}, ddbworkertest.Terminal, "", "B", 0, []ddbworkertest.Eval{ddbworkertest.Fails}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ddbworkertest.New(returning(tc.writes...)).Before(tc.before...).RequireWork(t, msg())
			require.Equal(t, tc.kind, res.Kind, "%s", res)
			require.Equal(t, tc.failed, res.FailedWrite, "%s", res)
			switch tc.kind {
			case ddbworkertest.Applied:
				res.RequireApplied(t)
				require.Equal(t, tc.outcome, res.Outcome)
			case ddbworkertest.Superseded:
				require.Equal(t, tc.failed, res.RequireSuperseded(t, tc.outcome))
			case ddbworkertest.Terminal:
				res.RequireTerminal(t, tc.code)
			case ddbworkertest.Rerun:
				require.Equal(t, tc.failed, res.RequireRerun(t))
			}
			var evals []ddbworkertest.Eval
			for _, w := range res.Writes {
				evals = append(evals, w.Eval)
			}
			require.Equal(t, tc.evals, evals)
		})
	}
	t.Run("a failed guard without a message", func(t *testing.T) {
		res := ddbworkertest.New(returning(newUpdate(), ddbworker.Update("t", other).Remove("x").Guard(ddbworker.MustExist().Else(ddbworker.Fail("GONE", ""))))).RequireWork(t, msg())
		require.Equal(t, "domain write 1 failed its condition", res.RequireTerminal(t, "GONE").Message)
	})
	t.Run("the item before is shown", func(t *testing.T) {
		res := ddbworkertest.New(returning(newUpdate().Guard(ddbworker.NewerVersion("v", 9)))).
			Before(at(caseKey, ddbworker.Item{"v": 3, "stage": "intake"})).RequireWork(t, msg())
		res.RequireApplied(t)
		require.Equal(t, map[string]any{"PK": "CASE#c-1", "SK": "CASE", "v": int64(3), "stage": "intake"}, res.Writes[0].Before)
	})
	t.Run("the handler's outcome and result ref", func(t *testing.T) {
		h := returning(newUpdate())
		h.res.Outcome, h.res.ResultRef = "NOTED", "note-1"
		res := ddbworkertest.New(h).RequireWork(t, msg())
		res.RequireApplied(t)
		require.Equal(t, "NOTED", res.Outcome)
		require.Equal(t, "note-1", res.ResultRef)
		require.Equal(t, "applied NOTED resultRef \"note-1\"\n  0 Update t {PK: \"CASE#c-1\", SK: \"CASE\"} SET stage = \"review\"", res.String())
	})
}

// Writes the commit would refuse end terminal as the commit ends them.
func TestInvalidWrites(t *testing.T) {
	key := ddbworker.Key{"PK": "a", "SK": "b"}
	many := make([]ddbworker.Write, mutation.MaxWrites+1)
	for i := range many {
		many[i] = ddbworker.Update("t", ddbworker.Key{"PK": fmt.Sprint(i), "SK": "x"}).Add("n", 1)
	}
	for _, tc := range []struct {
		name    string
		writes  []ddbworker.Write
		code    string
		invalid int // index of the write shown as invalid, or -1
		message string
	}{
		{"update without changes", []ddbworker.Write{ddbworker.Update("t", key).Set("a", 1), ddbworker.Update("t", key)}, failure.CodeInvalidResult, 1, "an Update needs at least one change"},
		{"check without guard", []ddbworker.Write{ddbworker.Check("t", key)}, failure.CodeInvalidResult, 0, "a Check needs a guard"},
		{"zero write", []ddbworker.Write{{}}, failure.CodeInvalidResult, 0, "a write needs a table and a key"},
		{"raw write with no action", []ddbworker.Write{ddbwrites.Raw[ddbworker.Write](mutation.Write{})}, failure.CodeInvalidResult, 0, "write 0: mutation: invalid writes: it sets 0 of"},
		{"too many writes", many, failure.CodeInvalidResult, -1, "100 domain writes, at most 99"},
		{"two writes to one item", []ddbworker.Write{ddbworker.Update("t", key).Set("a", 1), ddbworker.Put("t", key, ddbworker.Item{"b": 2})},
			failure.CodeInvalidTransaction, -1, "Transaction request cannot include multiple operations on one item (writes 0 and 1: t {PK: \"a\", SK: \"b\"})"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ddbworkertest.New(returning(tc.writes...)).RequireWork(t, msg())
			f := res.RequireTerminal(t, tc.code)
			require.Contains(t, f.Message, tc.message)
			for i, w := range res.Writes {
				require.Equal(t, ddbworkertest.NotEvaluated, w.Eval)
				if i == tc.invalid {
					require.Error(t, w.Err)
					require.Empty(t, w.Kind)
					require.True(t, strings.HasPrefix(w.String(), "invalid: "), w.String())
					got, ok := failure.As(w.Err)
					require.True(t, ok)
					require.Equal(t, failure.CodeInvalidResult, got.Code)
				} else {
					require.NoError(t, w.Err)
				}
			}
		})
	}
}

// Every guard of the builders is evaluated exactly, by the write's own
// judge — the one the commit asks when DynamoDB cancels the transaction —
// on the item the test declares. The old kit parsed the condition back and
// asked the judge only for a policy; where the two disagreed it reported
// the wrong outcome (in parentheses: what it said).
func TestGuardsJudgedExactly(t *testing.T) {
	at := func(item ddbworker.Item) ddbworkertest.Existing {
		return ddbworkertest.Existing{Table: "t", Key: caseKey, Item: item}
	}
	update := func(guards ...ddbworker.Guard) ddbworker.Write {
		return ddbworker.Update("t", caseKey).Set("stage", "review").Guard(guards...)
	}
	fail := func(code string) ddbworker.Policy { return ddbworker.Fail(code, "") }
	for _, tc := range []struct {
		name   string
		write  ddbworker.Write
		before ddbworker.Item
		kind   ddbworkertest.Kind
		want   string // the outcome (Superseded) or code (Terminal)
	}{
		{"equal on a map whose member has another type (rerun)", update(ddbworker.Equal("m", map[string]any{"k": 1}).Else(fail("M"))),
			ddbworker.Item{"m": map[string]any{"k": "1"}}, ddbworkertest.Terminal, "M"},
		{"equal on a map, numbers by value", update(ddbworker.Equal("m", map[string]any{"k": 1, "l": []any{"x"}}).Else(fail("M"))),
			ddbworker.Item{"m": map[string]any{"k": 1.0, "l": []string{"x"}}}, ddbworkertest.Applied, "APPLIED"},
		{"equal on a list out of order", update(ddbworker.Equal("tags", []string{"a", "b"}).Else(fail("TAGS"))),
			ddbworker.Item{"tags": []string{"b", "a"}}, ddbworkertest.Terminal, "TAGS"},
		{"equal: a number is not its string (rerun)", update(ddbworker.Equal("n", 1).Else(fail("N"))),
			ddbworker.Item{"n": "1"}, ddbworkertest.Terminal, "N"},
		{"newer version on a fraction, with must-exist (rerun)", update(ddbworker.MustExist(), ddbworker.NewerVersion("v", 3).Else(ddbworker.Supersede("OLD"))),
			ddbworker.Item{"v": 3.5}, ddbworkertest.Superseded, "OLD"},
		{"newer version on a string (rerun)", update(ddbworker.MustExist(), ddbworker.NewerVersion("v", 3).Else(ddbworker.Supersede("OLD"))),
			ddbworker.Item{"v": "1"}, ddbworkertest.Superseded, "OLD"},
		{"newer version on a missing attribute, another guard fails", update(ddbworker.NewerVersion("v", 3), ddbworker.Equal("state", "open").Else(fail("CLOSED"))),
			ddbworker.Item{"state": "closed"}, ddbworkertest.Terminal, "CLOSED"},
		{"a nested member holds, the next guard fails (OWNER)", update(ddbworker.Equal("meta.owner", "ann").Else(fail("OWNER")), ddbworker.ExpectVersion("v", 1).Else(fail("VERSION"))),
			ddbworker.Item{"meta": map[string]any{"owner": "ann"}, "v": 2}, ddbworkertest.Terminal, "VERSION"},
		{"a list element", update(ddbworker.Equal("lines[1].sku", "B-2").Else(fail("SKU"))),
			ddbworker.Item{"lines": []any{map[string]any{"sku": "A-1"}, map[string]any{"sku": "B-2"}}}, ddbworkertest.Applied, "APPLIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ddbworkertest.New(returning(tc.write)).Before(at(tc.before)).RequireWork(t, msg())
			switch tc.kind {
			case ddbworkertest.Applied:
				res.RequireApplied(t)
				require.Equal(t, ddbworkertest.Holds, res.Writes[0].Eval)
				return
			case ddbworkertest.Superseded:
				require.Zero(t, res.RequireSuperseded(t, tc.want))
			case ddbworkertest.Terminal:
				res.RequireTerminal(t, tc.want)
				require.Zero(t, res.FailedWrite)
			}
			require.Equal(t, ddbworkertest.Fails, res.Writes[0].Eval)
		})
	}
}

// A Raw write is judged by its policy only: by its judge, asked about the
// item the test declares; with no judge, its condition is taken to hold
// (the commit would re-run the handler if DynamoDB failed it).
func TestRawWrites(t *testing.T) {
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#c-1"}, "SK": &types.AttributeValueMemberS{Value: "CASE"}}
	raw := func(cond *expression.ConditionBuilder, j mutation.Judge) ddbworker.Write {
		b := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("n"), expression.Value(1)))
		if cond != nil {
			b = b.WithCondition(*cond)
		}
		ex, err := b.Build()
		require.NoError(t, err)
		return ddbwrites.Raw[ddbworker.Write](mutation.Write{Item: types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String("t"), Key: key, UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		}}, Judge: j})
	}
	prefixed := expression.Name("stage").BeginsWith("rev")
	inReview := func(old map[string]types.AttributeValue) (mutation.Verdict, bool) {
		s, ok := old["stage"].(*types.AttributeValueMemberS)
		return mutation.Verdict{Kind: mutation.Fail, Code: "NOT_IN_REVIEW"}, !ok || !strings.HasPrefix(s.Value, "rev")
	}
	inStage := func(stage string) ddbworkertest.Existing {
		return ddbworkertest.Existing{Table: "t", Key: caseKey, Item: ddbworker.Item{"stage": stage}}
	}

	res := ddbworkertest.New(returning(raw(&prefixed, nil))).RequireWork(t, msg())
	res.RequireApplied(t)
	require.Equal(t, ddbworkertest.PolicyOnly, res.Writes[0].Eval)
	require.Equal(t, `begins_with(stage, "rev")`, res.Writes[0].Condition)
	require.Contains(t, res.String(), `IF begins_with(stage, "rev")  [judged by its policy only: no judge, taken to hold]`)

	res = ddbworkertest.New(returning(raw(&prefixed, inReview))).Before(inStage("intake")).RequireWork(t, msg())
	res.RequireTerminal(t, "NOT_IN_REVIEW")
	require.Equal(t, ddbworkertest.Fails, res.Writes[0].Eval)
	res = ddbworkertest.New(returning(raw(&prefixed, inReview))).Before(inStage("review")).RequireWork(t, msg())
	res.RequireApplied(t)
	require.Equal(t, ddbworkertest.Holds, res.Writes[0].Eval)

	res = ddbworkertest.New(returning(raw(nil, inReview))).RequireWork(t, msg())
	res.RequireApplied(t)
	require.Equal(t, ddbworkertest.Unconditional, res.Writes[0].Eval, "without a condition the judge is never asked")
}

func TestRendering(t *testing.T) {
	update := ddbworker.Update("cases", caseKey).Set("stage", "review").SetIfMissing("openedAt", "2026-01-01").
		Add("notes", 1).Remove("draft").Set("meta.owner", "ann").
		Guard(ddbworker.MustExist(), ddbworker.NewerVersion("stageVersion", 7), ddbworker.Equal("tags", []string{"a", "b"}))
	put := ddbworker.Put("cases", ddbworker.Key{"PK": "CASE#c-1", "SK": "NOTE#1"}, ddbworker.Item{
		"text": "hi", "n": 12, "ratio": 0.5, "ok": true, "none": nil, "raw": []byte{1, 2}, "list": []any{1, "x"}, "map": map[string]any{"k": 2},
	}).Guard(ddbworker.CreateOnly())
	res := ddbworkertest.New(returning(update, put)).RequireWork(t, msg())
	u := res.RequireWrite(t, "cases", caseKey)
	require.Equal(t, "Update", u.Kind)
	require.Equal(t, map[string]any{"PK": "CASE#c-1", "SK": "CASE"}, u.Key)
	require.Equal(t, `ADD notes 1 REMOVE draft SET stage = "review", openedAt = if_not_exists(openedAt, "2026-01-01"), meta.owner = "ann"`, u.Update)
	require.Equal(t, `attribute_exists(PK) AND (attribute_not_exists(stageVersion) OR stageVersion < 7) AND tags = ["a", "b"]`, u.Condition)
	require.Equal(t, 0, u.Index)

	p := res.RequireWrite(t, "cases", ddbworker.Key{"PK": "CASE#c-1", "SK": "NOTE#1"})
	require.Equal(t, "Put", p.Kind)
	require.Equal(t, 1, p.Index)
	require.Equal(t, map[string]any{"PK": "CASE#c-1", "SK": "NOTE#1"}, p.Key, "the key names come from the other write")
	require.Equal(t, map[string]any{
		"PK": "CASE#c-1", "SK": "NOTE#1", "text": "hi", "n": int64(12), "ratio": 0.5, "ok": true, "none": nil,
		"raw": []byte{1, 2}, "list": []any{int64(1), "x"}, "map": map[string]any{"k": int64(2)},
	}, p.Item)
	require.Equal(t, "attribute_not_exists(PK)", p.Condition)
	require.Equal(t, `Put cases {PK: "CASE#c-1", SK: "NOTE#1", list: [1, "x"], map: {k: 2}, n: 12, none: NULL, ok: true, ratio: 0.5, raw: 0x0102, text: "hi"} IF attribute_not_exists(PK)`, p.String())

	t.Run("a put alone has no known key", func(t *testing.T) {
		res := ddbworkertest.New(returning(put)).RequireWork(t, msg())
		require.Nil(t, res.Writes[0].Key)
		require.Equal(t, "Put", res.RequireWrite(t, "cases", ddbworker.Key{"PK": "CASE#c-1", "SK": "NOTE#1"}).Kind)
		withItem := ddbworkertest.New(returning(put)).Before(ddbworkertest.Existing{Table: "cases", Key: caseKey}).RequireWork(t, msg())
		require.Equal(t, map[string]any{"PK": "CASE#c-1", "SK": "NOTE#1"}, withItem.Writes[0].Key, "the key names come from an Existing item")
	})
	t.Run("plain values", func(t *testing.T) {
		for _, tc := range []struct {
			in   types.AttributeValue
			want any
		}{
			{&types.AttributeValueMemberN{Value: "12"}, int64(12)},
			{&types.AttributeValueMemberN{Value: "1.5"}, 1.5},
			{&types.AttributeValueMemberN{Value: "1e40"}, 1e40},
			{&types.AttributeValueMemberSS{Value: []string{"a"}}, []string{"a"}},
			{&types.AttributeValueMemberNS{Value: []string{"1", "2.5"}}, []any{int64(1), 2.5}},
			{&types.AttributeValueMemberBS{Value: [][]byte{{1}}}, [][]byte{{1}}},
			{&types.AttributeValueMemberNULL{Value: true}, nil},
		} {
			require.Equal(t, tc.want, ddbworkertest.Plain(tc.in))
		}
	})
}

// fakeT records what the Require methods report instead of stopping.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	if f.failed == "" {
		f.failed = fmt.Sprintf(format, args...)
	}
}

func TestRequireReports(t *testing.T) {
	res := invoiceKit().RequireWork(t, invoiceRequest("o-1")) // no order: terminal ORDER_NOT_FOUND
	for _, tc := range []struct {
		name  string
		check func(tb testing.TB)
		want  string
	}{
		{"applied", func(tb testing.TB) { res.RequireApplied(tb) }, "want applied, got terminal ORDER_NOT_FOUND: no order o-1 (the guard of write 1)\n  0 Put app"},
		{"superseded", func(tb testing.TB) { res.RequireSuperseded(tb, "SUPERSEDED") }, "want superseded SUPERSEDED, got terminal ORDER_NOT_FOUND"},
		{"rerun", func(tb testing.TB) { res.RequireRerun(tb) }, "want rerun, got terminal"},
		{"another code", func(tb testing.TB) { res.RequireTerminal(tb, "X") }, "want terminal X, got terminal ORDER_NOT_FOUND"},
		{"retryable", func(tb testing.TB) { res.RequireRetryable(tb, "ORDER_NOT_FOUND") }, "want retryable ORDER_NOT_FOUND, got terminal"},
		{"no such write", func(tb testing.TB) { res.RequireWrite(tb, "app", ddbworker.Key{"PK": "ORDER#o-2", "SK": "ORDER"}) }, `want a write to app {PK: "ORDER#o-2", SK: "ORDER"}, got terminal`},
		{"another table", func(tb testing.TB) { res.RequireWrite(tb, "other", invoices.OrderKey("o-1")) }, `want a write to other`},
		{"the right one", func(tb testing.TB) { res.RequireTerminal(tb, invoices.CodeOrderNotFound) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeT{TB: t}
			tc.check(f)
			if tc.want == "" {
				require.Empty(t, f.failed)
				return
			}
			require.True(t, strings.HasPrefix(f.failed, tc.want), "got %q", f.failed)
		})
	}
	f := &fakeT{TB: t}
	ddbworkertest.New(nil).RequireWork(f, msg())
	require.Contains(t, f.failed, "no handler")
}

// Work refuses what it cannot run at all; everything else is a Result.
func TestWorkErrors(t *testing.T) {
	h := returning()
	for _, tc := range []struct {
		name string
		w    *ddbworkertest.Worker
		msg  ddbworkertest.Message
		want string
	}{
		{"no handler", ddbworkertest.New(nil), msg(), "no handler"},
		{"zero worker", &ddbworkertest.Worker{}, msg(), "no handler"},
		{"attempt 0", ddbworkertest.New(h), msg(ddbworkertest.Attempt(0)), "attempt 0 must be at least 1"},
		{"payload does not marshal", ddbworkertest.New(h), ddbworkertest.NewMessage("T", make(chan int)), "payload"},
		{"envelope option on a body", ddbworkertest.New(h), ddbworkertest.FromBody([]byte("{}"), ddbworkertest.Key("k")), "does not apply to a raw body"},
		{"nil envelope", ddbworkertest.New(h), ddbworkertest.FromEnvelope(nil), "nil envelope"},
		{"payload not JSON", ddbworkertest.New(h), ddbworkertest.NewMessage("T", []byte("{")), "FromBody"},
		{"existing without table", ddbworkertest.New(h).Before(ddbworkertest.Existing{Key: caseKey}), msg(), "needs a table and a key"},
		{"existing twice", ddbworkertest.New(h).Before(ddbworkertest.Existing{Table: "t", Key: caseKey}, ddbworkertest.Existing{Table: "t", Key: caseKey}), msg(), "two items at key"},
		{"existing with two key shapes", ddbworkertest.New(h).Before(ddbworkertest.Existing{Table: "t", Key: caseKey}, ddbworkertest.Existing{Table: "t", Key: ddbworker.Key{"id": 1}}), msg(), "another item of the table has key"},
		{"existing item disagrees with its key", ddbworkertest.New(h).Before(ddbworkertest.Existing{Table: "t", Key: caseKey, Item: ddbworker.Item{"PK": "CASE#c-9"}}), msg(), `the item's PK is "CASE#c-9"`},
		{"existing does not marshal", ddbworkertest.New(h).Before(ddbworkertest.Existing{Table: "t", Key: caseKey, Item: ddbworker.Item{"m": map[struct{ A int }]int{{1}: 1}}}), msg(), "item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.w.Work(context.Background(), tc.msg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// One Worker serves tests in parallel; its handler gets the test's context.
func TestConcurrentAndContext(t *testing.T) {
	type ctxKey struct{}
	kit := ddbworkertest.New(ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if ctx.Value(ctxKey{}) != "v" {
			return ddbworker.Result{}, errors.New("not the caller's context")
		}
		return ddbworker.Apply(ddbworker.Update("t", ddbworker.Key{"PK": m.Key()}).Add("n", 1).Guard(ddbworker.MustExist())), nil
	})).Before(ddbworkertest.Existing{Table: "t", Key: ddbworker.Key{"PK": "k-3"}})
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	var wg sync.WaitGroup
	results := make([]*ddbworkertest.Result, 8)
	for i := range results {
		wg.Go(func() {
			r, err := kit.Work(ctx, msg(ddbworkertest.Key(fmt.Sprintf("k-%d", i))))
			if err == nil {
				results[i] = r
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		require.NotNil(t, r)
		if i == 3 {
			r.RequireApplied(t)
		} else {
			r.RequireTerminal(t, "ITEM_NOT_FOUND")
		}
	}
}

// A single-write route's write is fenced as the worker fences it: the kit
// renders the fence and judges the declared item by it.
func TestSingleWriteRoute(t *testing.T) {
	write := ddbworker.Update("t", caseKey).Set("stage", "review").Guard(ddbworker.NewerVersion("v", 3))
	kit := func(ws ...ddbworker.Write) *ddbworkertest.Worker {
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register("Tested", returning(ws...), ddbworker.SingleWrite()))
		return ddbworkertest.NewRegistry(reg)
	}
	m := msg(ddbworkertest.Key("k-1"), ddbworkertest.AggregateVersion(3))
	fresh := kit(write).RequireWork(t, m)
	fresh.RequireApplied(t)
	require.Len(t, fresh.Writes, 1)
	require.Contains(t, fresh.Writes[0].String(), ddbworker.FenceKeyAttr("v"), "the fence is part of the write: %s", fresh.Writes[0])

	fence := ddbworker.Item{"v": 3, ddbworker.FenceKeyAttr("v"): "k-1", ddbworker.FenceTypeAttr("v"): "Tested", ddbworker.FenceHashAttr("v"): fresh.Envelope.RequestHash}
	at := func(item ddbworker.Item) ddbworkertest.Existing {
		return ddbworkertest.Existing{Table: "t", Key: caseKey, Item: item}
	}
	kit(write).Before(at(fence)).RequireWork(t, m).RequireDuplicate(t)
	older := ddbworker.Item{"v": 3, ddbworker.FenceKeyAttr("v"): "k-1", ddbworker.FenceHashAttr("v"): fresh.Envelope.RequestHash} // no type: an older worker's
	kit(write).Before(at(older)).RequireWork(t, m).RequireDuplicate(t)
	otherType := ddbworker.Item{"v": 3, ddbworker.FenceKeyAttr("v"): "k-1", ddbworker.FenceTypeAttr("v"): "Other", ddbworker.FenceHashAttr("v"): "v2:00"}
	kit(write).Before(at(otherType)).RequireWork(t, m).RequireSuperseded(t, "SUPERSEDED") // its key's work of another type at its version: the guard's
	other := ddbworker.Item{"v": 3, ddbworker.FenceKeyAttr("v"): "k-0", ddbworker.FenceHashAttr("v"): "v2:00"}
	kit(write).Before(at(other)).RequireWork(t, m).RequireTerminal(t, failure.CodeHashMismatch)
	kit(write).Before(at(ddbworker.Item{"v": 4})).RequireWork(t, m).RequireSuperseded(t, "SUPERSEDED")
	kit(write, write).RequireWork(t, m).RequireTerminal(t, failure.CodeInvalidResult)
	kit(ddbworker.Update("t", caseKey).Set("stage", "review")).RequireWork(t, m).RequireTerminal(t, failure.CodeInvalidResult)
}
