package mutation_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// singleWork is one single-write work item for TestCommitSingle: key,
// message type and request hash, the version its write sets, and the
// stage it writes. A work without a type (typ "") is committed as the code
// before fences named the type committed it: its fence has a key and a
// hash, no type.
type singleWork struct {
	key, typ, hash string
	version        int64
	stage          string
}

// CommitSingle on DynamoDB Local: the one conditional write decides
// duplicate, key reuse, mismatch and superseded from the item it returns
// (ALL_OLD), with no other call, and writes nothing when its condition
// fails; the fence names work by key and message type, and a fence
// without a type (older code's) still refuses its key's work.
func TestCommitSingle(t *testing.T) {
	f := newFixture(t, false)
	n := 0
	commit := func(t *testing.T, item map[string]types.AttributeValue, w singleWork) error {
		t.Helper()
		pk := item["PK"].(*types.AttributeValueMemberS).Value
		write := ddbworker.Update(f.env.Table, ddbworker.Key{"PK": pk, "SK": "ITEM"}).Set("stage", w.stage).Add("n", 1)
		if w.typ == "" {
			// The older fence: the write, the version, the key and the
			// hash (its condition is not under test here).
			m, err := writes.Mutation(write.Set("version", w.version).Set(mutation.FenceKeyAttr("version"), w.key).
				Set(mutation.FenceHashAttr("version"), w.hash))
			require.NoError(t, err)
			u := m.Item.Update
			_, err = f.env.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
				UpdateExpression: u.UpdateExpression, ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues})
			return err
		}
		m, err := writes.Mutation(write.Guard(ddbworker.NewerVersion("version", w.version)))
		require.NoError(t, err)
		fenced, err := mutation.Fenced([]mutation.Write{m}, mutation.Stamp{Key: w.key, Type: w.typ, Hash: w.hash})
		require.NoError(t, err)
		return f.c.CommitSingle(context.Background(), fenced)
	}
	for _, tc := range []struct {
		name    string
		applied []singleWork // committed first, each applying
		then    singleWork
		want    *mutation.Verdict // nil: it applies
	}{
		{"the same work again: duplicate", []singleWork{{"k1", "A", "h1", 1, "review"}}, singleWork{"k1", "A", "h1", 1, "review"},
			&mutation.Verdict{Kind: mutation.Duplicate}},
		{"its key reused at a newer version: mismatch", []singleWork{{"k1", "A", "h1", 1, "review"}}, singleWork{"k1", "A", "h2", 2, "appeal"},
			&mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
				Message: "version 1 of the item was set by this key's work with another request hash: the key was reused for other work"}},
		{"its key reused at an older version: mismatch", []singleWork{{"k1", "A", "h1", 2, "review"}}, singleWork{"k1", "A", "h2", 1, "appeal"},
			&mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
				Message: "version 2 of the item was set by this key's work with another request hash: the key was reused for other work"}},
		{"another key at the same version: mismatch", []singleWork{{"k1", "A", "h1", 1, "review"}}, singleWork{"k2", "A", "h2", 1, "appeal"},
			&mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch, Message: `version 1 of the item was set by the work of key "k1"`}},
		{"an older version: superseded", []singleWork{{"k2", "A", "h2", 2, "appeal"}}, singleWork{"k1", "A", "h1", 1, "review"},
			&mutation.Verdict{Kind: mutation.Supersede}},
		// The fence names only the newest version's work: a duplicate of
		// work a newer version overtook is superseded (it applied earlier),
		// and a key reused behind that newer version is not recognised.
		{"a duplicate overtaken by a newer version: superseded", []singleWork{{"k1", "A", "h1", 1, "review"}, {"k2", "A", "h2", 2, "appeal"}},
			singleWork{"k1", "A", "h1", 1, "review"}, &mutation.Verdict{Kind: mutation.Supersede}},
		{"a key reused behind a newer version's fence: applies (the limit)", []singleWork{{"k1", "A", "h1", 1, "review"}, {"k2", "A", "h2", 2, "appeal"}},
			singleWork{"k1", "A", "h3", 3, "decision"}, nil},
		// The fence names work as the inbox does, by key and message type:
		// another type's work under the key is other work, judged as the
		// gated route judges it (its own record, the version guard).
		{"its key, another type, a newer version: applies", []singleWork{{"k1", "A", "h1", 1, "review"}}, singleWork{"k1", "B", "h2", 2, "appeal"}, nil},
		{"its key, another type, an older version: superseded", []singleWork{{"k1", "A", "h1", 2, "review"}}, singleWork{"k1", "B", "h2", 1, "appeal"},
			&mutation.Verdict{Kind: mutation.Supersede}},
		{"its key, another type, the same version: the version guard's policy", []singleWork{{"k1", "A", "h1", 1, "review"}}, singleWork{"k1", "B", "h2", 1, "appeal"},
			&mutation.Verdict{Kind: mutation.Supersede}},
		{"its key and type after another type applied: duplicate", []singleWork{{"k1", "A", "h1", 1, "review"}, {"k1", "B", "h2", 2, "appeal"}},
			singleWork{"k1", "B", "h2", 2, "appeal"}, &mutation.Verdict{Kind: mutation.Duplicate}},
		// A fence written before fences named the type (no type attribute)
		// may be this work's: the condition refuses it whatever the type,
		// the same hash is a duplicate (the hash covers the type), another
		// hash a mismatch — another type's work or the key reused, which
		// that fence cannot tell; never a second application.
		{"an older fence, the same work: duplicate", []singleWork{{"k1", "", "h1", 1, "review"}}, singleWork{"k1", "A", "h1", 1, "review"},
			&mutation.Verdict{Kind: mutation.Duplicate}},
		{"an older fence, the same work at a newer version: duplicate", []singleWork{{"k1", "", "h1", 1, "review"}}, singleWork{"k1", "A", "h1", 2, "review"},
			&mutation.Verdict{Kind: mutation.Duplicate}},
		{"an older fence, its key with another hash: mismatch", []singleWork{{"k1", "", "h1", 1, "review"}}, singleWork{"k1", "B", "h2", 2, "appeal"},
			&mutation.Verdict{Kind: mutation.Fail, Code: failure.CodeHashMismatch,
				Message: "version 1 of the item was set by this key's work with another request hash, under a fence that does not name its message type: the key was reused for other work, or this is another type's work under the key, which that fence cannot tell"}},
		{"an older fence of another key: applies", []singleWork{{"k0", "", "h0", 1, "review"}}, singleWork{"k1", "A", "h1", 2, "appeal"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			key := dkey("SINGLE#"+strconv.Itoa(n), "ITEM")
			for _, w := range tc.applied {
				require.NoError(t, commit(t, key, w))
			}
			before := f.raw(key)
			f.inj.ResetCalls()
			err := commit(t, key, tc.then)
			require.Equal(t, map[string]int{opUpd: 1}, f.inj.Calls(), "one conditional write, no read")
			if tc.want == nil {
				require.NoError(t, err)
				after := f.raw(key)
				require.Equal(t, tc.then.key, after[mutation.FenceKeyAttr("version")].(*types.AttributeValueMemberS).Value)
				require.Equal(t, tc.then.typ, after[mutation.FenceTypeAttr("version")].(*types.AttributeValueMemberS).Value)
				require.Equal(t, tc.then.hash, after[mutation.FenceHashAttr("version")].(*types.AttributeValueMemberS).Value)
				require.Equal(t, strconv.Itoa(len(tc.applied)+1), after["n"].(*types.AttributeValueMemberN).Value)
				return
			}
			var ge *mutation.GuardError
			require.True(t, errors.As(err, &ge), "a guard error: %v", err)
			require.Equal(t, *tc.want, ge.Verdict)
			require.Equal(t, before, ge.Old, "the item as it was comes back with the failed condition")
			require.Equal(t, before, f.raw(key), "nothing written")
		})
	}
}

// CommitSingleGuarded on DynamoDB Local: one TransactWriteItems that
// applies the fenced write only while the work has no inbox record. A
// record of any state (a lease held, a terminal failure) comes back as an
// *ExistsError and nothing is written — the unmarked comeback (SQS's own
// redrive, a producer's resend) the unguarded CommitSingle applies; the
// fence's verdicts are CommitSingle's.
func TestCommitSingleGuarded(t *testing.T) {
	f := newFixture(t, false)
	n := 0
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, key string) // what the work has already
		status inbox.Status                   // the record found; "" none
		want   *mutation.Verdict              // nil with no status: it applies
	}{
		{name: "no record: applies", before: func(*testing.T, string) {}},
		{name: "a lease held: the record decides", before: func(_ *testing.T, key string) { f.acquire(key) }, status: inbox.StatusProcessing},
		{name: "a terminal failure: the record decides", before: func(t *testing.T, key string) {
			require.NoError(t, f.c.Fail(context.Background(), f.acquire(key), failure.NewTerminal("CASE_LOCKED", "locked")))
		}, status: inbox.StatusFailedTerminal},
		{name: "applied already: duplicate", before: func(t *testing.T, key string) {
			require.NoError(t, f.c.CommitSingleGuarded(context.Background(), newRec(f, key, "tok-first"), f.singleWrite(t, key, 1), 0))
		}, want: &mutation.Verdict{Kind: mutation.Duplicate}},
		// Found by the chaos run's key-reuse probe: the work applied, then a
		// message reusing its key for other work claimed the key's record
		// through the gate and failed. A duplicate of the applied work is
		// a duplicate (its fence), not the other work's mismatch.
		{name: "applied already, the key's record another work's: duplicate", before: func(t *testing.T, key string) {
			require.NoError(t, f.c.CommitSingleGuarded(context.Background(), newRec(f, key, "tok-first"), f.singleWrite(t, key, 1), 0))
			require.NoError(t, f.c.Fail(context.Background(), f.acquire(key), failure.NewTerminal(failure.CodeHashMismatch, "the key was reused")))
		}, want: &mutation.Verdict{Kind: mutation.Duplicate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n++
			key := "k-guarded-" + strconv.Itoa(n)
			tc.before(t, key)
			item := dkey("GUARDED#"+key, "ITEM")
			before := f.raw(item)
			f.inj.ResetCalls()
			err := f.c.CommitSingleGuarded(context.Background(), newRec(f, key, "tok"), f.singleWrite(t, key, 1), 0)
			require.Equal(t, map[string]int{opTWI: 1}, f.inj.Calls(), "one call")
			switch {
			case tc.status != "":
				var ee *mutation.ExistsError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, tc.status, ee.Record.Status)
				require.Equal(t, key, ee.Record.Key)
				require.Equal(t, before, f.raw(item), "nothing written")
			case tc.want != nil:
				var ge *mutation.GuardError
				require.ErrorAs(t, err, &ge)
				require.Equal(t, *tc.want, ge.Verdict)
				require.Equal(t, before, f.raw(item), "nothing written")
			default:
				require.NoError(t, err)
				after := f.raw(item)
				require.Equal(t, key, after[mutation.FenceKeyAttr("version")].(*types.AttributeValueMemberS).Value)
				require.Empty(t, f.raw((inbox.Store{}).Key(key, msgType)), "no inbox record written")
			}
		})
	}
}

// singleWrite is key's fenced single write of version v to its own item.
func (f *fixture) singleWrite(t *testing.T, key string, v int64) mutation.Write {
	t.Helper()
	m, err := writes.Mutation(ddbworker.Update(f.env.Table, ddbworker.Key{"PK": "GUARDED#" + key, "SK": "ITEM"}).Set("stage", "review").
		Guard(ddbworker.NewerVersion("version", v)))
	require.NoError(t, err)
	w := work(key).Work
	fenced, err := mutation.Fenced([]mutation.Write{m}, mutation.Stamp{Key: key, Type: w.MessageType, Hash: w.RequestHash})
	require.NoError(t, err)
	return fenced
}
