package bench

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

// What a message costs per kind, from the sizes of the items it writes.
func TestUnits(t *testing.T) {
	small := sizes{Domain: 1000, Completed: 600, Processing: 580, Index: 300}
	bigItem := sizes{Domain: 1100, Completed: 600, Processing: 580, Index: 300}
	bigRecord := sizes{Domain: 1000, Completed: 1100, Processing: 1050, Index: 300}
	tests := []struct {
		kind Kind
		s    sizes
		u    usage
		want capacity
	}{
		{KindNaive, small, usage{}, capacity{WriteFresh: 1, WriteDup: 1}},
		{KindNaive, bigItem, usage{}, capacity{WriteFresh: 2, WriteDup: 2}},
		// gate 1 + index 1 + transaction 2 × (1 + 1); a duplicate: the gate.
		{KindDefault, small, usage{}, capacity{WriteFresh: 6, WriteDup: 1}},
		{KindDefault, bigRecord, usage{}, capacity{WriteFresh: 2 + 1 + 2 + 4, WriteDup: 2}},
		// transaction 2 × (1 + 1) + index 1; a duplicate: the cancelled transaction.
		{KindFusedPlain, small, usage{FreshTx: 1, DupTx: 1}, capacity{WriteFresh: 5, WriteDup: 4}},
		{KindFusedPlain, bigItem, usage{FreshTx: 1, DupTx: 1}, capacity{WriteFresh: 7, WriteDup: 6}},
		// the read ahead: every key read (half a unit), a duplicate found
		// completed makes no transaction; a tenth of them was not found
		// (read in a batch under the threshold).
		{KindFused, small, usage{FreshTx: 1, FreshReads: 1, DupTx: 0.1, DupReads: 0.9}, capacity{WriteFresh: 5, WriteDup: 0.4, ReadFresh: 0.5, ReadDup: 0.45}},
		// one conditional update; a duplicate's failed condition costs the item's units.
		{KindSingle, small, usage{}, capacity{WriteFresh: 1, WriteDup: 1}},
		{KindSingle, bigItem, usage{}, capacity{WriteFresh: 2, WriteDup: 2}},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			sp, err := kindOf(tt.kind)
			require.NoError(t, err)
			got := sp.units(tt.s, tt.u)
			require.InDelta(t, tt.want.WriteFresh, got.WriteFresh, 1e-9)
			require.InDelta(t, tt.want.WriteDup, got.WriteDup, 1e-9)
			require.InDelta(t, tt.want.ReadFresh, got.ReadFresh, 1e-9)
			require.InDelta(t, tt.want.ReadDup, got.ReadDup, 1e-9)
		})
	}
	require.Equal(t, 1.0, readUnits(1, true))
	require.Equal(t, 1.0, readUnits(4096, true))
	require.Equal(t, 2.0, readUnits(4097, true))
	require.Equal(t, 0.5, readUnits(1000, false), "an eventually consistent read costs half")
}

// Every kind of the default list is wired, and an unknown one is refused
// with the list.
func TestKinds(t *testing.T) {
	require.Equal(t, []string{"naive", "default", "fused", "fused-plain", "single"}, KindNames())
	for _, k := range kindOrder {
		sp, err := kindOf(k)
		require.NoError(t, err)
		require.NotNil(t, sp.prepare, k)
		require.NotNil(t, sp.bare, k)
		require.NotNil(t, sp.units, k)
	}
	_, err := kindOf("fast")
	require.ErrorContains(t, err, "naive, default, fused, fused-plain, single")
	cfg := Config{Kinds: []Kind{"fast"}}
	require.Error(t, cfg.defaults())
}

// A run's messages: notes version after version per case, the late ones
// (an odd version sent after the next) far behind it, duplicates of
// earlier work, keys padded to a length.
func TestMakeMessages(t *testing.T) {
	ms, err := makeMessages(KindSingle, "r1", 400, shape{dupRatio: 0.25, lateRatio: 0.1, noteBytes: 700, keyBytes: 256})
	require.NoError(t, err)
	require.Len(t, ms.fresh, 300)
	require.Len(t, ms.dups, 100)
	require.Len(t, ms.cases, 300/notesPerCase)
	require.InDelta(t, 30, ms.late, 15, "about a tenth of the fresh notes are late")

	type note struct {
		pos int
		v   int64
	}
	byCase := map[string][]note{}
	keys := map[string]bool{}
	for i, body := range ms.fresh {
		e := ms.envs[body]
		require.Len(t, e.IdempotencyKey, 256)
		require.False(t, keys[e.IdempotencyKey], "a fresh key is new")
		keys[e.IdempotencyKey] = true
		require.NotNil(t, e.AggregateVersion)
		var p caseflow.NoteRecorded
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		require.Len(t, p.Note, 700)
		byCase[p.CaseID] = append(byCase[p.CaseID], note{i, *e.AggregateVersion})
	}
	late := 0
	for c, notes := range byCase {
		var versions []int64
		for j, n := range notes {
			versions = append(versions, n.v)
			if j > 0 && n.v < notes[j-1].v {
				late++
				require.Equal(t, notes[j-1].v-1, n.v, "%s: a late note is the one before", c)
				require.GreaterOrEqual(t, n.pos-notes[j-1].pos, len(ms.cases), "%s: a late note arrives long after the next one", c)
			}
		}
		slices.Sort(versions)
		for j, v := range versions {
			require.EqualValues(t, j+1, v, "%s: versions 1, 2, 3 … each once", c)
		}
	}
	require.Equal(t, ms.late, late)
	for _, body := range ms.dups {
		require.True(t, keys[ms.envs[body].IdempotencyKey], "a duplicate carries earlier work")
	}

	none, err := makeMessages(KindSingle, "r1", 400, shape{noteBytes: 10})
	require.NoError(t, err)
	require.Zero(t, none.late)
	require.Empty(t, none.dups)
	_, err = makeMessages(KindSingle, "r1", 40, shape{noteBytes: 10, keyBytes: 10})
	require.ErrorContains(t, err, "as long already")
}

// benchEnv is an Env on the emulators with a table of its own.
func benchEnv(t *testing.T) Env {
	ddbEndpoint, sqsEndpoint := testenv.Endpoints(t)
	env := Env{AWS: testenv.AWSConfig(t), Table: testenv.Unique("bench"), DynamoDBEndpoint: ddbEndpoint,
		DynamoDB: []func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ddbEndpoint) }},
		SQS:      []func(*sqs.Options){func(o *sqs.Options) { o.BaseEndpoint = aws.String(sqsEndpoint) }},
	}
	t.Cleanup(func() {
		_, _ = dynamodb.NewFromConfig(env.AWS, env.DynamoDB...).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(env.Table)})
	})
	return env
}

// readBack tells work applied twice and work lost from the case items.
func TestReadBack(t *testing.T) {
	env := benchEnv(t)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(env.AWS, env.DynamoDB...)
	require.NoError(t, tables.Ensure(ctx, ddb, tables.Config{Name: env.Table}))
	ms, err := makeMessages(KindSingle, "rb", 40, shape{noteBytes: 10})
	require.NoError(t, err)
	require.NoError(t, caseflow.SeedCases(ctx, ddb, env.Table, ms.cases))
	set := func(caseID string, count, version int64, fence *string) {
		t.Helper()
		values := map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(count, 10)},
			":v": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}
		update := "SET noteCount = :n, noteVersion = :v"
		if fence != nil {
			values[":k"], values[":h"] = &ddbtypes.AttributeValueMemberS{Value: *fence}, &ddbtypes.AttributeValueMemberS{Value: "v2:x"}
			update += ", " + ddbworker.FenceKeyAttr(caseflow.AttrNoteVersion) + " = :k, " + ddbworker.FenceHashAttr(caseflow.AttrNoteVersion) + " = :h"
		}
		_, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(env.Table), Key: caseflow.CaseKey(caseID),
			UpdateExpression: aws.String(update), ExpressionAttributeValues: values})
		require.NoError(t, err)
	}
	// As every note applied once: noteCount = notes, noteVersion = the last.
	perCase := map[string]int64{}
	for _, body := range ms.fresh {
		var p caseflow.NoteRecorded
		require.NoError(t, json.Unmarshal(ms.envs[body].Payload, &p))
		perCase[p.CaseID]++
	}
	for c, n := range perCase {
		set(c, n, n, nil)
	}
	a, err := readBack(ctx, ddb, env.Table, ms, nil, true)
	require.NoError(t, err)
	require.Equal(t, applications{applied: 40}, a)

	// Superseded notes are not expected to apply: one that did is an
	// application too many.
	e0 := ms.envs[ms.fresh[0]]
	a, err = readBack(ctx, ddb, env.Table, ms, map[string]bool{e0.IdempotencyKey: true}, true)
	require.NoError(t, err)
	require.Equal(t, applications{applied: 39, twice: 1}, a)

	first, second := ms.cases[0], ms.cases[1]
	set(first, perCase[first]+1, perCase[first], nil) // one note applied twice
	set(second, perCase[second]-1, perCase[second], nil)
	a, err = readBack(ctx, ddb, env.Table, ms, nil, true)
	require.NoError(t, err)
	require.Equal(t, applications{applied: 39, twice: 1, lost: 1}, a)

	// In order, a case left short of its newest note lost it, whatever its
	// count.
	set(first, perCase[first], perCase[first]-1, nil)
	set(second, perCase[second], perCase[second], aws.String("other work"))
	a, err = readBack(ctx, ddb, env.Table, ms, nil, true)
	require.NoError(t, err)
	require.Equal(t, applications{applied: 40, lost: 2}, a)
	a, err = readBack(ctx, ddb, env.Table, ms, nil, false)
	require.NoError(t, err)
	require.Equal(t, applications{applied: 40}, a, "not in order: the count alone")
}

// The concurrency sweep, small: every kind side by side; the single-write
// route makes one call per message, fresh or duplicate, writes one unit
// for a case item under 1 KB with its fence, supersedes every late note,
// and neither applies twice nor loses work.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every kind four times against the emulators")
	}
	cfg := Config{Messages: 80, Concurrency: []int{4}, Progress: testWriter{t}}
	r, err := Run(context.Background(), benchEnv(t), cfg)
	require.NoError(t, err)
	require.Len(t, r.Concurrency, len(kindOrder))
	byKind := map[Kind]Result{}
	for _, x := range r.Concurrency {
		t.Logf("%s: DDB %.2f/%.2f WCU %g/%g item %d B record %d B late %d superseded %d twice %d lost %d outcomes %v %v",
			x.Kind, x.DynamoDBFresh, x.DynamoDBDup, x.AWSWCUFresh, x.AWSWCUDup, x.ItemBytes, x.RecordBytes, x.Late, x.Superseded,
			x.DoubleApplies, x.Lost, x.Worker.Fresh.Outcomes, x.Worker.Duplicate.Outcomes)
		byKind[x.Kind] = x
		require.Zero(t, x.Lost, x.Kind)
		require.Equal(t, 160, x.Messages, "two worker runs of 80")
		require.Positive(t, x.Late, "the seed makes late notes")
		if x.Kind != KindFused {
			require.Zero(t, x.AWSRCUFresh+x.AWSRCUDup, "%s reads nothing", x.Kind)
		}
		require.Positive(t, x.VsNaive, x.Kind)
		require.LessOrEqual(t, x.ItemBytes, 1024, "%s: the case item fits one write unit", x.Kind)
	}
	require.Equal(t, 40, byKind[KindNaive].DoubleApplies, "naive applies every duplicate again")
	for _, k := range []Kind{KindDefault, KindFused, KindFusedPlain, KindSingle} {
		require.Zero(t, byKind[k].DoubleApplies, k)
	}
	for _, k := range []Kind{KindNaive, KindDefault, KindFused, KindFusedPlain} {
		require.Zero(t, byKind[k].Superseded, "%s applies every note", k)
	}
	d := byKind[KindDefault]
	require.Equal(t, [4]float64{2, 1, 6, 1}, [4]float64{d.DynamoDBFresh, d.DynamoDBDup, d.AWSWCUFresh, d.AWSWCUDup})
	p := byKind[KindFusedPlain]
	require.Equal(t, [4]float64{1, 1, 5, 4}, [4]float64{p.DynamoDBFresh, p.DynamoDBDup, p.AWSWCUFresh, p.AWSWCUDup}, "fused without the read ahead")
	require.Zero(t, p.Worker.Fresh.ReadKeys+p.Worker.Duplicate.ReadKeys)
	// With it, a duplicate the read found completed makes no transaction;
	// every key read costs half a read unit, and the reads are the worker's
	// own (how many depends on how the receives batch the messages).
	f := byKind[KindFused]
	require.Equal(t, 5.0, f.AWSWCUFresh)
	require.LessOrEqual(t, f.AWSWCUDup, 4.0)
	require.InDelta(t, 0.5*float64(f.Worker.Duplicate.ReadKeys)/float64(f.Worker.Duplicate.Messages), f.AWSRCUDup, 1e-9)
	if f.Worker.Duplicate.ReadKeys > 0 {
		require.Less(t, f.AWSWCUDup, 4.0, "a duplicate read ahead costs no write")
		require.Less(t, f.DynamoDBDup, 1.0, "a batch of duplicates costs its one read")
	}
	s := byKind[KindSingle]
	require.Equal(t, [4]float64{1, 1, 1, 1}, [4]float64{s.DynamoDBFresh, s.DynamoDBDup, s.AWSWCUFresh, s.AWSWCUDup})
	require.Equal(t, map[string]int{"DynamoDB.UpdateItem": 120}, ddbOnly(s.Worker.Fresh.Calls), "fresh: one conditional update each")
	require.Equal(t, map[string]int{"DynamoDB.UpdateItem": 40}, ddbOnly(s.Worker.Duplicate.Calls), "duplicates: one failed conditional update each")
	// A late note is far behind its next one (a case count of messages,
	// four times the concurrency): it always finds it applied.
	require.Equal(t, s.Late, s.Superseded, "every late note superseded")
	require.Zero(t, s.RecordBytes, "no inbox record")
}

func ddbOnly(calls map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range calls {
		if len(k) > 9 && k[:9] == "DynamoDB." {
			out[k] = v
		}
	}
	return out
}
