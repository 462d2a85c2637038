package ddbworker_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/mutation"
)

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func TestWriteRenders(t *testing.T) {
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	t.Run("update with guards", func(t *testing.T) {
		w, err := ddbworker.Update("t", key).Set("stage", "review").Add("count", 1).Remove("old").SetIfMissing("createdAt", "x").
			Guard(ddbworker.MustExist(), ddbworker.NewerVersion("v", 3)).Mutation()
		require.NoError(t, err)
		u := w.Item.Update
		require.NotNil(t, u)
		require.Equal(t, "t", aws.ToString(u.TableName))
		require.Equal(t, map[string]types.AttributeValue{"PK": s("CASE#1"), "SK": s("CASE")}, u.Key)
		require.Contains(t, aws.ToString(u.UpdateExpression), "SET")
		require.Contains(t, aws.ToString(u.UpdateExpression), "ADD")
		require.Contains(t, aws.ToString(u.UpdateExpression), "REMOVE")
		require.Contains(t, aws.ToString(u.ConditionExpression), "attribute_exists")
		require.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, u.ReturnValuesOnConditionCheckFailure)
	})
	t.Run("put merges the key into the item", func(t *testing.T) {
		w, err := ddbworker.Put("t", key, ddbworker.Item{"amount": 1200, "at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}).
			Guard(ddbworker.CreateOnly()).Mutation()
		require.NoError(t, err)
		p := w.Item.Put
		require.Equal(t, s("CASE#1"), p.Item["PK"])
		require.Equal(t, n("1200"), p.Item["amount"])
		require.Equal(t, s("2026-01-02T03:04:05Z"), p.Item["at"])
		require.Contains(t, aws.ToString(p.ConditionExpression), "attribute_not_exists")
	})
	t.Run("delete and check", func(t *testing.T) {
		d, err := ddbworker.Delete("t", key).Mutation()
		require.NoError(t, err)
		require.NotNil(t, d.Item.Delete)
		require.Nil(t, d.Item.Delete.ConditionExpression, "unguarded")
		c, err := ddbworker.Check("t", key, ddbworker.ExpectVersion("v", 7)).Mutation()
		require.NoError(t, err)
		require.NotNil(t, c.Item.ConditionCheck)
	})
	for _, tc := range []struct {
		name string
		w    ddbworker.Write
	}{
		{"zero write", ddbworker.Write{}},
		{"no table", ddbworker.Update("", key).Set("a", 1)},
		{"no key", ddbworker.Update("t", nil).Set("a", 1)},
		{"update without changes", ddbworker.Update("t", key)},
		{"changes on a put", ddbworker.Put("t", key, nil).Set("a", 1)},
		{"check without guard", ddbworker.Check("t", key)},
		{"zero guard", ddbworker.Delete("t", key).Guard(ddbworker.Guard{})},
		{"unmarshalable value", ddbworker.Put("t", key, ddbworker.Item{"m": map[struct{ A int }]int{{1}: 1}})},
	} {
		t.Run("invalid: "+tc.name, func(t *testing.T) {
			_, err := tc.w.Mutation()
			f, ok := failure.As(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, failure.CodeInvalidResult, f.Code)
			require.True(t, f.IsTerminal())
		})
	}
}

// The judge reads the item as it was and names the first guard that fails
// on it: its policy is the verdict. When none fails, it says so (the
// commit then re-runs: the item changed between the commit and the
// judgement).
func TestGuardVerdicts(t *testing.T) {
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	stage := ddbworker.Update("t", key).Set("stage", "review").Set("v", 5).
		Guard(ddbworker.MustExist().Else(ddbworker.Fail("CASE_NOT_FOUND", "no such case")), ddbworker.NewerVersion("v", 5))
	for _, tc := range []struct {
		name string
		w    ddbworker.Write
		old  map[string]types.AttributeValue
		want mutation.Verdict
	}{
		{"missing item fails MustExist", stage, nil, mutation.Verdict{Kind: mutation.Fail, Code: "CASE_NOT_FOUND", Message: "no such case"}},
		{"same version is superseded", stage, map[string]types.AttributeValue{"PK": s("CASE#1"), "v": n("5")}, mutation.Verdict{Kind: mutation.Supersede}},
		{"newer version is superseded", stage, map[string]types.AttributeValue{"PK": s("CASE#1"), "v": n("9")}, mutation.Verdict{Kind: mutation.Supersede}},
		{"create-only finds the item", ddbworker.Put("t", key, nil).Guard(ddbworker.CreateOnly()),
			map[string]types.AttributeValue{"PK": s("CASE#1")}, mutation.Verdict{Kind: mutation.Supersede, Outcome: "ALREADY_EXISTS"}},
		{"expected version moved", ddbworker.Update("t", key).Add("n", 1).Guard(ddbworker.ExpectVersion("v", 2)),
			map[string]types.AttributeValue{"v": n("3")}, mutation.Verdict{Kind: mutation.Retry}},
		{"equal with another policy", ddbworker.Delete("t", key).Guard(ddbworker.Equal("state", "open").Else(ddbworker.Fail("CLOSED", "closed already"))),
			map[string]types.AttributeValue{"state": s("closed")}, mutation.Verdict{Kind: mutation.Fail, Code: "CLOSED", Message: "closed already"}},
		{"nothing fails", stage, map[string]types.AttributeValue{"PK": s("CASE#1"), "v": n("1")}, mutation.Verdict{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.w.Mutation()
			require.NoError(t, err)
			v, failed := m.Judge(tc.old)
			require.Equal(t, tc.want, v)
			require.Equal(t, tc.want != mutation.Verdict{}, failed)
		})
	}
}

// Each guard fails exactly when DynamoDB finds its condition false on the
// item as it was (mutation's TestGuardsJudgedAsDynamoDBEvaluates checks the
// same cases against DynamoDB Local): paths into maps and lists, numbers by
// value, no equality across types, sets in any order.
func TestGuardsHoldAsDynamoDBEvaluates(t *testing.T) {
	item := func(kv ...any) map[string]types.AttributeValue {
		out := map[string]types.AttributeValue{"PK": s("CASE#1"), "SK": s("CASE")}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return out
	}
	m := func(kv ...any) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: item(kv...)}
	}
	l := func(vs ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: vs} }
	null := &types.AttributeValueMemberNULL{Value: true}
	for _, tc := range []struct {
		name  string
		guard ddbworker.Guard
		old   map[string]types.AttributeValue
		holds bool
	}{
		{"must exist: no item", ddbworker.MustExist(), nil, false},
		{"must exist: there", ddbworker.MustExist(), item(), true},
		{"create only: no item", ddbworker.CreateOnly(), nil, true},
		{"create only: there", ddbworker.CreateOnly(), item(), false},
		{"newer version: no item", ddbworker.NewerVersion("v", 3), nil, true},
		{"newer version: no attribute", ddbworker.NewerVersion("v", 3), item(), true},
		{"newer version: lower", ddbworker.NewerVersion("v", 3), item("v", n("2")), true},
		{"newer version: same", ddbworker.NewerVersion("v", 3), item("v", n("3")), false},
		{"newer version: a lower fraction", ddbworker.NewerVersion("v", 3), item("v", n("2.5")), true},
		{"newer version: a higher fraction", ddbworker.NewerVersion("v", 3), item("v", n("3.5")), false},
		{"newer version: beyond int64", ddbworker.NewerVersion("v", 3), item("v", n("12345678901234567890")), false},
		{"newer version: a string is never lower", ddbworker.NewerVersion("v", 3), item("v", s("1")), false},
		{"newer version: NULL exists", ddbworker.NewerVersion("v", 3), item("v", null), false},
		{"newer version: nested", ddbworker.NewerVersion("meta.v", 3), item("v", n("9"), "meta", m("v", n("2"))), true},
		{"newer than: no item", ddbworker.NewerThan("at", "2025-06-01T12:00:00Z"), nil, true},
		{"newer than: no attribute", ddbworker.NewerThan("at", "2025-06-01T12:00:00Z"), item(), true},
		{"newer than: older", ddbworker.NewerThan("at", "2025-06-01T12:00:00Z"), item("at", s("2025-06-01T11:00:00Z")), true},
		{"newer than: same", ddbworker.NewerThan("at", "2025-06-01T12:00:00Z"), item("at", s("2025-06-01T12:00:00Z")), false},
		{"newer than: newer", ddbworker.NewerThan("at", "2025-06-01T12:00:00Z"), item("at", s("2025-06-01T13:00:00Z")), false},
		{"newer than: a number lower", ddbworker.NewerThan("at", 1000), item("at", n("999.5")), true},
		{"newer than: a number the same", ddbworker.NewerThan("at", 1000), item("at", n("1000.0")), false},
		{"newer than: a string is never lower than a number", ddbworker.NewerThan("at", 1000), item("at", s("1")), false},
		{"newer than: a binary lower", ddbworker.NewerThan("at", []byte{2}), item("at", &types.AttributeValueMemberB{Value: []byte{1, 9}}), true},
		{"newer than: NULL exists", ddbworker.NewerThan("at", "x"), item("at", null), false},
		{"newer than: nested", ddbworker.NewerThan("meta.at", "b"), item("meta", m("at", s("a"))), true},
		{"expect version: same", ddbworker.ExpectVersion("v", 3), item("v", n("3")), true},
		{"expect version: same, written 3.0", ddbworker.ExpectVersion("v", 3), item("v", n("3.0")), true},
		{"expect version: other", ddbworker.ExpectVersion("v", 3), item("v", n("4")), false},
		{"expect version: a string", ddbworker.ExpectVersion("v", 3), item("v", s("3")), false},
		{"expect version: absent", ddbworker.ExpectVersion("v", 3), item(), false},
		{"equal: string", ddbworker.Equal("state", "open"), item("state", s("open")), true},
		{"equal: a number is not its string", ddbworker.Equal("n", 1), item("n", s("1")), false},
		{"equal: absent", ddbworker.Equal("state", "open"), item(), false},
		{"equal: nested member", ddbworker.Equal("meta.owner", "ann"), item("meta", m("owner", s("ann"))), true},
		{"equal: nested member differs", ddbworker.Equal("meta.owner", "ann"), item("meta", m("owner", s("bob")), "meta.owner", s("ann")), false},
		{"equal: list element", ddbworker.Equal("tags[1]", "y"), item("tags", l(s("x"), s("y"))), true},
		{"equal: list element out of range", ddbworker.Equal("tags[2]", "y"), item("tags", l(s("x"), s("y"))), false},
		{"equal: list in order", ddbworker.Equal("tags", []string{"x", "y"}), item("tags", l(s("x"), s("y"))), true},
		{"equal: list out of order", ddbworker.Equal("tags", []string{"x", "y"}), item("tags", l(s("y"), s("x"))), false},
		{"equal: a list is not a set", ddbworker.Equal("tags", []string{"x", "y"}), item("tags", &types.AttributeValueMemberSS{Value: []string{"x", "y"}}), false},
		{"equal: sets in any order", ddbworker.Equal("tags", &types.AttributeValueMemberSS{Value: []string{"y", "x"}}), item("tags", &types.AttributeValueMemberSS{Value: []string{"x", "y"}}), true},
		{"equal: number sets by value", ddbworker.Equal("ns", &types.AttributeValueMemberNS{Value: []string{"1", "2"}}), item("ns", &types.AttributeValueMemberNS{Value: []string{"2.0", "1"}}), true},
		{"equal: map, numbers by value", ddbworker.Equal("m", map[string]any{"k": 1}), item("m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": n("1.0")}}), true},
		{"equal: map member of another type", ddbworker.Equal("m", map[string]any{"k": 1}), item("m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("1")}}), false},
		{"equal: map with another member", ddbworker.Equal("m", map[string]any{"k": 1}), item("m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": n("1"), "j": n("1")}}), false},
		{"equal: nil is NULL", ddbworker.Equal("x", nil), item("x", null), true},
		{"equal: bool", ddbworker.Equal("ok", true), item("ok", &types.AttributeValueMemberBOOL{Value: true}), true},
		{"equal: binary", ddbworker.Equal("raw", []byte{1, 2}), item("raw", &types.AttributeValueMemberB{Value: []byte{1, 2}}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ddbworker.Update("t", ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}).Set("touched", true).
				Guard(tc.guard.Else(ddbworker.Fail("FAILED", ""))).Mutation()
			require.NoError(t, err)
			v, failed := m.Judge(tc.old)
			require.Equal(t, !tc.holds, failed)
			if failed {
				require.Equal(t, mutation.Verdict{Kind: mutation.Fail, Code: "FAILED"}, v)
			}
		})
	}
}

// A Write is a value: writes derived from one do not share changes.
func TestWriteIsAValue(t *testing.T) {
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	base := ddbworker.Update("t", key).Set("stage", "review")
	a := base.Set("x", 1)
	_ = base.Remove("y")
	m, err := a.Mutation()
	require.NoError(t, err)
	require.NotContains(t, aws.ToString(m.Item.Update.UpdateExpression), "REMOVE", "a change to base leaked into a")
	g := base.Guard(ddbworker.MustExist())
	_ = base.Guard(ddbworker.CreateOnly())
	mg, err := g.Mutation()
	require.NoError(t, err)
	require.NotContains(t, aws.ToString(mg.Item.Update.ConditionExpression), "attribute_not_exists")
}

func TestJSONAndRegistry(t *testing.T) {
	type approved struct {
		ID string `json:"id"`
	}
	var got string
	h := ddbworker.JSON(func(_ context.Context, m *ddbworker.Message, p approved) (ddbworker.Result, error) {
		got = p.ID
		return ddbworker.Result{}, nil
	})
	msg := func(payload string) *ddbworker.Message {
		return &ddbworker.Message{Envelope: &envelope.Envelope{MessageType: "Approved", Payload: []byte(payload)}}
	}
	_, err := h.Handle(context.Background(), msg(`{"id":"a-1"}`))
	require.NoError(t, err)
	require.Equal(t, "a-1", got)
	_, err = h.Handle(context.Background(), msg(`{"id":7}`))
	require.True(t, ddbworker.IsTerminal(err))
	require.ErrorIs(t, err, ddbworker.ErrPayload)

	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("B", h, ddbworker.Fused()))
	require.NoError(t, reg.Register("A", h))
	require.ErrorIs(t, reg.Register("A", h), ddbworker.ErrDuplicateRoute)
	require.Error(t, reg.Register("", h))
	require.Equal(t, []string{"A", "B"}, reg.Types())
	rt, ok := reg.Lookup("B")
	require.True(t, ok)
	require.True(t, rt.Fused)
	require.False(t, errors.Is(ddbworker.Retryable("X", "y"), failure.ErrTerminal))
}

// A single-write route fences a Put or an Update with one version guard:
// the write also sets the fence and the version, and its judge reads the
// fence before its own guards.
func TestSingleWriteFence(t *testing.T) {
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	stamp := mutation.Stamp{Key: "k1", Type: "T1", Hash: "v2:aa"}
	guarded := func(w ddbworker.Write) ddbworker.Write {
		return w.Guard(ddbworker.MustExist(), ddbworker.NewerVersion("v", 3))
	}
	fenced := func(t *testing.T, w ddbworker.Write) mutation.Write {
		t.Helper()
		m, err := w.Mutation()
		require.NoError(t, err)
		f, err := mutation.Fenced([]mutation.Write{m}, stamp)
		require.NoError(t, err)
		return f
	}
	t.Run("an update sets the fence and the version", func(t *testing.T) {
		f := fenced(t, guarded(ddbworker.Update("t", key).Set("stage", "review")))
		require.Equal(t, "v", f.Fence.Attr)
		require.EqualValues(t, 3, f.Fence.Version)
		u := f.Item.Update
		set := map[string]types.AttributeValue{}
		for ph, name := range u.ExpressionAttributeNames {
			for vph, v := range u.ExpressionAttributeValues {
				if strings.Contains(aws.ToString(u.UpdateExpression), ph+" = "+vph) {
					set[name] = v
				}
			}
		}
		require.Equal(t, map[string]types.AttributeValue{"stage": s("review"), "v": n("3"),
			ddbworker.FenceKeyAttr("v"): s("k1"), ddbworker.FenceTypeAttr("v"): s("T1"), ddbworker.FenceHashAttr("v"): s("v2:aa")}, set)
	})
	t.Run("a put carries them in its item", func(t *testing.T) {
		f := fenced(t, guarded(ddbworker.Put("t", key, ddbworker.Item{"stage": "review"})))
		require.Equal(t, map[string]types.AttributeValue{"PK": s("CASE#1"), "SK": s("CASE"), "stage": s("review"), "v": n("3"),
			ddbworker.FenceKeyAttr("v"): s("k1"), ddbworker.FenceTypeAttr("v"): s("T1"), ddbworker.FenceHashAttr("v"): s("v2:aa")}, f.Item.Put.Item)
	})
	t.Run("its condition: the fence does not name its work (its key with its type, or with none)", func(t *testing.T) {
		for _, w := range []ddbworker.Write{guarded(ddbworker.Update("t", key).Set("stage", "review")), guarded(ddbworker.Put("t", key, ddbworker.Item{"stage": "review"}))} {
			f := fenced(t, w)
			var cond *string
			var names map[string]string
			var values map[string]types.AttributeValue
			if u := f.Item.Update; u != nil {
				cond, names, values = u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues
			} else {
				p := f.Item.Put
				cond, names, values = p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues
			}
			key, typ := ddbworker.FenceKeyAttr("v"), ddbworker.FenceTypeAttr("v")
			require.Contains(t, plainCondition(aws.ToString(cond), names, values),
				"(attribute_not_exists ("+key+")) OR ("+key+" <> k1) OR ((attribute_exists ("+typ+")) AND ("+typ+" <> T1))")
		}
	})
	t.Run("the handler may set the version to the guard's", func(t *testing.T) {
		f := fenced(t, guarded(ddbworker.Update("t", key).Set("v", 3)))
		u := f.Item.Update
		require.Equal(t, 4, strings.Count(aws.ToString(u.UpdateExpression), "="), "the version and the fence (key, type, hash): %s", aws.ToString(u.UpdateExpression))
		names := 0
		for _, name := range u.ExpressionAttributeNames {
			if name == "v" {
				names++
			}
		}
		require.Equal(t, 1, names, "the version is set once")
	})
	for _, tc := range []struct {
		name   string
		writes []ddbworker.Write
	}{
		{"no write", nil},
		{"two writes", []ddbworker.Write{guarded(ddbworker.Update("t", key).Set("a", 1)), guarded(ddbworker.Update("t", key).Set("b", 1))}},
		{"no version guard", []ddbworker.Write{ddbworker.Update("t", key).Set("a", 1).Guard(ddbworker.MustExist())}},
		{"two version guards", []ddbworker.Write{guarded(ddbworker.Update("t", key).Set("a", 1)).Guard(ddbworker.NewerVersion("w", 1))}},
		{"a version guard on a path", []ddbworker.Write{ddbworker.Update("t", key).Set("a", 1).Guard(ddbworker.NewerVersion("meta.v", 1))}},
		{"a delete", []ddbworker.Write{guarded(ddbworker.Delete("t", key))}},
		{"a check", []ddbworker.Write{ddbworker.Check("t", key, ddbworker.NewerVersion("v", 3))}},
		{"the version set to another value", []ddbworker.Write{guarded(ddbworker.Update("t", key).Set("v", 4))}},
		{"the version added to", []ddbworker.Write{guarded(ddbworker.Update("t", key).Add("v", 1))}},
		{"the fence set by the handler", []ddbworker.Write{guarded(ddbworker.Update("t", key).Set(ddbworker.FenceKeyAttr("v"), "x"))}},
		{"the fence's type set by the handler", []ddbworker.Write{guarded(ddbworker.Update("t", key).Set(ddbworker.FenceTypeAttr("v"), "x"))}},
		{"a put with another version", []ddbworker.Write{guarded(ddbworker.Put("t", key, ddbworker.Item{"v": 2}))}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			ms := make([]mutation.Write, len(tc.writes))
			for i, w := range tc.writes {
				m, err := w.Mutation()
				require.NoError(t, err)
				ms[i] = m
			}
			_, err := mutation.Fenced(ms, stamp)
			require.ErrorIs(t, err, mutation.ErrNotSingleWrite)
			f, ok := failure.As(err)
			require.True(t, ok)
			require.Equal(t, failure.CodeInvalidResult, f.Code)
			require.True(t, f.IsTerminal())
		})
	}

	f := fenced(t, guarded(ddbworker.Update("t", key).Set("stage", "review")))
	item := func(v string, fenceKey, fenceHash string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{"PK": s("CASE#1"), "SK": s("CASE"), "v": n(v)}
		if fenceKey != "" {
			it[ddbworker.FenceKeyAttr("v")], it[ddbworker.FenceTypeAttr("v")], it[ddbworker.FenceHashAttr("v")] = s(fenceKey), s("T1"), s(fenceHash)
		}
		return it
	}
	for _, tc := range []struct {
		name   string
		old    map[string]types.AttributeValue
		failed bool
		want   mutation.Verdict
	}{
		{"no item: the write's own guard", nil, true, mutation.Verdict{Kind: mutation.Fail, Code: "ITEM_NOT_FOUND", Message: "the item does not exist"}},
		{"an older version: the guards hold", item("2", "k0", "v2:00"), false, mutation.Verdict{}},
		{"its own fence: duplicate", item("3", "k1", "v2:aa"), true, mutation.Verdict{Kind: mutation.Duplicate}},
		{"its own fence under a newer version: duplicate", item("5", "k1", "v2:aa"), true, mutation.Verdict{Kind: mutation.Duplicate}},
		{"another key at its version: mismatch", item("3", "k0", "v2:00"), true, mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
			Message: `v 3 of the item was set by the work of key "k0"`}},
		{"its key, another hash: mismatch", item("3", "k1", "v2:bb"), true, mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
			Message: "v 3 of the item was set by this key's work with another request hash: the key was reused for other work"}},
		{"its key, another hash, under an older version: mismatch (key reuse)", item("2", "k1", "v2:bb"), true, mutation.Verdict{Kind: mutation.Fail,
			Code: failure.CodeHashMismatch, Message: "v 2 of the item was set by this key's work with another request hash: the key was reused for other work"}},
		{"its key, another hash, under a newer version: mismatch (key reuse)", item("5", "k1", "v2:bb"), true, mutation.Verdict{Kind: mutation.Fail,
			Code: failure.CodeHashMismatch, Message: "v 5 of the item was set by this key's work with another request hash: the key was reused for other work"}},
		{"its version, no fence: mismatch", item("3", "", ""), true, mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
			Message: "v 3 of the item was set by work the item does not name"}},
		{"a newer version: superseded", item("4", "k0", "v2:00"), true, mutation.Verdict{Kind: mutation.Supersede}},
	} {
		t.Run("judged: "+tc.name, func(t *testing.T) {
			v, failed := f.Judge(tc.old)
			require.Equal(t, tc.failed, failed)
			require.Equal(t, tc.want, v)
		})
	}
	t.Run("judged: a stored hash in another form is compared like with like", func(t *testing.T) {
		m, err := guarded(ddbworker.Update("t", key).Set("a", 1)).Mutation()
		require.NoError(t, err)
		older := mutation.Stamp{Key: "k1", Type: "T1", Hash: "v2:aa", SameWork: func(stored string) bool { return stored == "v2:aa" || stored == "aa" }}
		w, err := mutation.Fenced([]mutation.Write{m}, older)
		require.NoError(t, err)
		v, failed := w.Judge(item("3", "k1", "aa"))
		require.True(t, failed)
		require.Equal(t, mutation.Duplicate, v.Kind)
	})
}

// A NewerThan guard fences a single-write route as a NewerVersion guard
// does, with its value (a timestamp) for the version: the write sets it,
// and the fence judges the item by it — except that another work at the
// same instant is not a key reused but an event the guard supersedes.
func TestSingleWriteFenceNewerThan(t *testing.T) {
	key := ddbworker.Key{"PK": "ORDER#1", "SK": "ORDER"}
	const at = "2025-06-01T12:00:00.000Z"
	stamp := mutation.Stamp{Key: "k1", Type: "T1", Hash: "v2:aa"}
	m, err := ddbworker.Update("t", key).Set("status", "PAID").Guard(ddbworker.NewerThan("at", at)).Mutation()
	require.NoError(t, err)
	f, err := mutation.Fenced([]mutation.Write{m}, stamp)
	require.NoError(t, err)
	require.Equal(t, "at", f.Fence.Attr)
	require.Equal(t, s(at), f.Fence.Value)
	u := f.Item.Update
	require.Contains(t, plainCondition(aws.ToString(u.ConditionExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues), "(attribute_not_exists (at)) OR (at < "+at+")")
	require.Contains(t, plainCondition(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues), "at = "+at, "the write sets the timestamp")

	item := func(v, fenceKey, fenceHash string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{"PK": s("ORDER#1"), "SK": s("ORDER"), "at": s(v)}
		if fenceKey != "" {
			it[ddbworker.FenceKeyAttr("at")], it[ddbworker.FenceTypeAttr("at")], it[ddbworker.FenceHashAttr("at")] = s(fenceKey), s("T1"), s(fenceHash)
		}
		return it
	}
	for _, tc := range []struct {
		name   string
		old    map[string]types.AttributeValue
		failed bool
		want   mutation.Verdict
	}{
		{"no item: holds", nil, false, mutation.Verdict{}},
		{"older: holds", item("2025-06-01T11:00:00.000Z", "k0", "v2:00"), false, mutation.Verdict{}},
		{"its own fence: duplicate", item(at, "k1", "v2:aa"), true, mutation.Verdict{Kind: mutation.Duplicate}},
		{"another work at the same instant: superseded", item(at, "k0", "v2:00"), true, mutation.Verdict{Kind: mutation.Supersede}},
		{"the same instant, no fence: superseded", item(at, "", ""), true, mutation.Verdict{Kind: mutation.Supersede}},
		{"newer: superseded", item("2025-06-01T13:00:00.000Z", "k0", "v2:00"), true, mutation.Verdict{Kind: mutation.Supersede}},
		{"its key, another hash: mismatch", item(at, "k1", "v2:bb"), true, mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
			Message: `at "` + at + `" of the item was set by this key's work with another request hash: the key was reused for other work`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, failed := f.Judge(tc.old)
			require.Equal(t, tc.failed, failed)
			require.Equal(t, tc.want, v)
		})
	}

	for _, tc := range []struct {
		name string
		w    ddbworker.Write
	}{
		{"the timestamp set to another value", ddbworker.Update("t", key).Set("at", "2025-06-01T12:00:00.001Z").Guard(ddbworker.NewerThan("at", at))},
		{"a version guard besides", ddbworker.Update("t", key).Set("a", 1).Guard(ddbworker.NewerThan("at", at), ddbworker.NewerVersion("v", 1))},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			m, err := tc.w.Mutation()
			require.NoError(t, err)
			_, err = mutation.Fenced([]mutation.Write{m}, stamp)
			require.ErrorIs(t, err, mutation.ErrNotSingleWrite)
		})
	}
	p, err := ddbworker.Put("t", key, ddbworker.Item{"at": at, "status": "PAID"}).Guard(ddbworker.NewerThan("at", at)).Mutation()
	require.NoError(t, err)
	_, err = mutation.Fenced([]mutation.Write{p}, stamp)
	require.NoError(t, err, "a put may set the timestamp to the guard's")
}

func TestRegisterRefusesFusedSingleWrite(t *testing.T) {
	reg := ddbworker.NewRegistry()
	h := ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) { return ddbworker.Result{}, nil })
	require.ErrorIs(t, reg.Register("T", h, ddbworker.Fused(), ddbworker.SingleWrite()), ddbworker.ErrRouteOptions)
	require.NoError(t, reg.Register("T", h, ddbworker.SingleWrite()))
	rt, ok := reg.Lookup("T")
	require.True(t, ok)
	require.True(t, rt.SingleWrite)
}

// plainCondition is cond with its placeholders replaced by the names and
// (string and number) values they stand for.
func plainCondition(cond string, names map[string]string, values map[string]types.AttributeValue) string {
	var pairs []string
	for _, ph := range slices.SortedFunc(maps.Keys(names), func(a, b string) int { return len(b) - len(a) }) {
		pairs = append(pairs, ph, names[ph])
	}
	for _, ph := range slices.SortedFunc(maps.Keys(values), func(a, b string) int { return len(b) - len(a) }) {
		switch v := values[ph].(type) {
		case *types.AttributeValueMemberS:
			pairs = append(pairs, ph, v.Value)
		case *types.AttributeValueMemberN:
			pairs = append(pairs, ph, v.Value)
		}
	}
	return strings.NewReplacer(pairs...).Replace(cond)
}

// NewerThan compares numbers, strings and binaries only, and refuses a
// time.Time (its marshalled form is not fixed width): such a write is an
// invalid handler result, as the commit reports it. Timestamp formats a
// time fixed width, so strings order as times do.
func TestNewerThanValues(t *testing.T) {
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	for _, tc := range []struct {
		name string
		v    any
		want string // "": valid
	}{
		{"a string", "2025-06-01T12:00:00Z", ""},
		{"an int64", int64(1748779200000), ""},
		{"a float", 1.5, ""},
		{"a binary", []byte{1}, ""},
		{"a time.Time", time.Now(), "pass Timestamp(t) or t.UnixMilli()"},
		{"a bool", true, "not a number, a string or a binary"},
		{"a list", []string{"a"}, "not a number, a string or a binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ddbworker.Update("t", key).Set("at", tc.v).Guard(ddbworker.NewerThan("at", tc.v)).Mutation()
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, "(attribute_not_exists (#0)) OR (#0 < :0)", aws.ToString(m.Item.Update.ConditionExpression))
				return
			}
			require.ErrorContains(t, err, tc.want)
			f, ok := failure.As(err)
			require.True(t, ok)
			require.Equal(t, failure.CodeInvalidResult, f.Code)
			require.True(t, f.IsTerminal())
		})
	}

	at := time.Date(2025, 6, 1, 14, 0, 0, 500_000_000, time.FixedZone("CEST", 2*3600))
	require.Equal(t, "2025-06-01T12:00:00.500000000Z", ddbworker.Timestamp(at))
	require.Less(t, ddbworker.Timestamp(at.Add(-500*time.Millisecond)), ddbworker.Timestamp(at), "fixed width: a whole second sorts before its fractions")
}
