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
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// What a message costs per kind, from the sizes of the items it writes
// and what its phase sent: fresh messages, duplicates, or both mixed (a
// mixed phase costs the mean of its fresh and duplicate messages, plus what
// the duplicates that found their original in flight sent again).
func TestUnits(t *testing.T) {
	small := sizes{Domain: 1000, Completed: 600, Processing: 580, Index: 300}
	bigItem := sizes{Domain: 1100, Completed: 600, Processing: 580, Index: 300}
	bigRecord := sizes{Domain: 1000, Completed: 1100, Processing: 1050, Index: 300}
	tests := []struct {
		name string
		kind Kind
		s    sizes
		u    usage
		want capacity
	}{
		// An unconditional update per message.
		{"fresh", KindNaive, small, usage{Updates: 1, Work: 1}, capacity{Write: 1}},
		{"duplicate", KindNaive, small, usage{Updates: 1}, capacity{Write: 1}},
		{"fresh, item over 1 KB", KindNaive, bigItem, usage{Updates: 1, Work: 1}, capacity{Write: 2}},
		// gate 1 + index 1 + transaction 2 × (1 + 1); a duplicate: the gate.
		{"fresh", KindDefault, small, usage{Puts: 1, Tx: 1, Work: 1}, capacity{Write: 6}},
		{"duplicate", KindDefault, small, usage{Puts: 1}, capacity{Write: 1}},
		{"fresh, record over 1 KB", KindDefault, bigRecord, usage{Puts: 1, Tx: 1, Work: 1}, capacity{Write: 2 + 1 + 2 + 4}},
		{"duplicate, record over 1 KB", KindDefault, bigRecord, usage{Puts: 1}, capacity{Write: 2}},
		// 90 fresh and 10 duplicates, 2 of which found their original in
		// flight and came back: (90 × 6 + 10 × 1 + 2 × 1) / 100.
		{"mixed", KindDefault, small, usage{Puts: 1.02, Tx: 0.9, Work: 0.9}, capacity{Write: 5.52}},
		// transaction 2 × (1 + 1) + index 1; a duplicate: the cancelled transaction.
		{"fresh", KindFused, small, usage{Tx: 1, Work: 1}, capacity{Write: 5}},
		{"duplicate", KindFused, small, usage{Tx: 1}, capacity{Write: 4}},
		{"fresh, item over 1 KB", KindFused, bigItem, usage{Tx: 1, Work: 1}, capacity{Write: 7}},
		{"duplicate, item over 1 KB", KindFused, bigItem, usage{Tx: 1}, capacity{Write: 6}},
		// A quarter duplicates: 0.75 × 5 + 0.25 × 4.
		{"mixed", KindFused, small, usage{Tx: 1, Work: 0.75}, capacity{Write: 4.75}},
		// One transaction of the update and the inbox check, each item twice.
		{"fresh", KindSingle, small, usage{Tx: 1, Work: 1}, capacity{Write: 4}},
		{"duplicate", KindSingle, small, usage{Tx: 1}, capacity{Write: 4}},
		{"fresh, item over 1 KB", KindSingle, bigItem, usage{Tx: 1, Work: 1}, capacity{Write: 6}},
		// One conditional update; a duplicate's failed condition costs the item's units.
		{"fresh", KindSingleSkip, small, usage{Updates: 1, Work: 1}, capacity{Write: 1}},
		{"duplicate", KindSingleSkip, small, usage{Updates: 1}, capacity{Write: 1}},
		{"fresh, item over 1 KB", KindSingleSkip, bigItem, usage{Updates: 1, Work: 1}, capacity{Write: 2}},
		{"duplicate, item over 1 KB", KindSingleSkip, bigItem, usage{Updates: 1}, capacity{Write: 2}},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+"/"+tt.name, func(t *testing.T) {
			sp, err := kindOf(tt.kind)
			require.NoError(t, err)
			got := sp.units(tt.s, tt.u)
			require.InDelta(t, tt.want.Write, got.Write, 1e-9)
			require.InDelta(t, tt.want.Read, got.Read, 1e-9)
		})
	}
	require.Equal(t, usage{Puts: 0.5, Updates: 0.25, Tx: 0.5, Reads: 1.5, Work: 0.75},
		usageOf(Phase{Messages: 4, Work: 3, ReadKeys: 6, Calls: map[string]int{"DynamoDB.PutItem": 2, "DynamoDB.UpdateItem": 1,
			"DynamoDB.TransactWriteItems": 2, "DynamoDB.BatchGetItem": 1, "SQS.ReceiveMessage": 3}}), "per message of the phase")
	require.Equal(t, 1.0, readUnits(1, true))
	require.Equal(t, 1.0, readUnits(4096, true))
	require.Equal(t, 2.0, readUnits(4097, true))
	require.Equal(t, 0.5, readUnits(1000, false), "an eventually consistent read costs half")
}

// Every kind of the default list is wired, and an unknown one is refused
// with the list.
func TestKinds(t *testing.T) {
	require.Equal(t, []string{"naive", "default", "fused", "single", "single-skip"}, KindNames())
	for _, k := range kindOrder {
		sp, err := kindOf(k)
		require.NoError(t, err)
		require.NotNil(t, sp.prepare, k)
		require.NotNil(t, sp.bare, k)
		require.NotNil(t, sp.units, k)
	}
	_, err := kindOf("fast")
	require.ErrorContains(t, err, "naive, default, fused, single, single-skip")
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

// The mixed stream: the fresh messages in their order, each duplicate
// after its original — near to far fresh messages after it, or at the end
// of a stream too short for that — the duplicates' share as asked, and the
// same stream for the same arguments.
func TestMixedStream(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		dups      float64
		near, far int
		// atEnd: how many of the duplicates may come after the last fresh
		// message, at most.
		atEnd float64
	}{
		{"production distances", 2000, 0.1, MixDistanceMin, MixDistanceMax, 0.25},
		{"a third duplicates", 3000, 0.3, MixDistanceMin, MixDistanceMax, 0.25},
		{"one distance", 300, 0.2, 7, 7, 0.1},
		{"shorter than the distances", 40, 0.25, MixDistanceMin, MixDistanceMax, 1},
		{"no duplicates", 200, 0, MixDistanceMin, MixDistanceMax, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh := shape{dupRatio: tt.dups, lateRatio: 0.1, noteBytes: 10, mixNear: tt.near, mixFar: tt.far}
			ms, err := makeMessages(KindFused, "mix", tt.n, sh)
			require.NoError(t, err)
			nDup := int(float64(tt.n) * tt.dups)
			require.Len(t, ms.dups, nDup)
			require.Len(t, ms.mixed, tt.n, "every message once")
			dup := map[string]bool{}
			for _, b := range ms.dups {
				dup[b] = true
			}
			original := map[string]int{} // key → fresh position of its original
			var keys []string
			fresh, dups, atEnd := 0, 0, 0
			for _, body := range ms.mixed {
				key := ms.envs[body].IdempotencyKey
				keys = append(keys, key)
				if !dup[body] {
					require.Equal(t, ms.fresh[fresh], body, "the fresh messages in their order")
					original[key] = fresh
					fresh++
					continue
				}
				dups++
				j, ok := original[key]
				require.True(t, ok, "a duplicate comes after its original")
				d := fresh - 1 - j // fresh messages from the original to the one it follows
				require.LessOrEqual(t, d, tt.far)
				if fresh == len(ms.fresh) {
					atEnd++
				} else {
					require.GreaterOrEqual(t, d, tt.near)
				}
			}
			require.Equal(t, len(ms.fresh), fresh)
			require.Equal(t, nDup, dups)
			require.InDelta(t, tt.dups, float64(dups)/float64(len(ms.mixed)), 1.0/float64(tt.n), "the share of duplicates")
			require.LessOrEqual(t, float64(atEnd), tt.atEnd*float64(nDup), "most duplicates among the fresh messages")
			if tt.near >= len(ms.fresh) {
				require.Equal(t, nDup, atEnd, "a stream shorter than the distances sends every duplicate at its end")
			}

			again, err := makeMessages(KindFused, "mix", tt.n, sh)
			require.NoError(t, err)
			var againKeys []string
			for _, body := range again.mixed {
				againKeys = append(againKeys, again.envs[body].IdempotencyKey)
			}
			require.Equal(t, keys, againKeys, "deterministic: the same stream for the same arguments")
		})
	}
	twoPhase, err := makeMessages(KindFused, "mix", 100, shape{dupRatio: 0.25, noteBytes: 10})
	require.NoError(t, err)
	require.Nil(t, twoPhase.mixed, "two-phase: no mixed stream")
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
// route makes one call per message, fresh or duplicate, writes 4 units
// (its transaction of the update and the inbox check) or, with
// SkipInboxCheck, one for a case item under 1 KB with its fence,
// supersedes every late note,
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
		require.False(t, x.Mixed, x.Kind)
		require.NotNil(t, x.Fresh, x.Kind)
		require.NotNil(t, x.Duplicate, x.Kind)
		require.Nil(t, x.All, "%s: two phases, no figure over all", x.Kind)
		t.Logf("%s: DDB %.2f/%.2f WCU %g/%g item %d B record %d B late %d superseded %d twice %d lost %d outcomes %v %v",
			x.Kind, x.Fresh.DynamoDBCalls, x.Duplicate.DynamoDBCalls, x.Fresh.AWSWCU, x.Duplicate.AWSWCU, x.ItemBytes, x.RecordBytes, x.Late, x.Superseded,
			x.DoubleApplies, x.Lost, x.Worker.Fresh.Outcomes, x.Worker.Duplicate.Outcomes)
		byKind[x.Kind] = x
		require.Zero(t, x.Lost, x.Kind)
		require.Equal(t, 160, x.Messages, "two worker runs of 80")
		require.Positive(t, x.Late, "the seed makes late notes")
		require.Zero(t, x.Fresh.AWSRCU+x.Duplicate.AWSRCU, "%s reads nothing", x.Kind)
		require.Positive(t, x.VsNaive, x.Kind)
		require.LessOrEqual(t, x.ItemBytes, 1024, "%s: the case item fits one write unit", x.Kind)
	}
	require.Equal(t, 40, byKind[KindNaive].DoubleApplies, "naive applies every duplicate again")
	for _, k := range []Kind{KindDefault, KindFused, KindSingle, KindSingleSkip} {
		require.Zero(t, byKind[k].DoubleApplies, k)
	}
	for _, k := range []Kind{KindNaive, KindDefault, KindFused} {
		require.Zero(t, byKind[k].Superseded, "%s applies every note", k)
	}
	d := byKind[KindDefault]
	require.Equal(t, [4]float64{2, 1, 6, 1}, [4]float64{d.Fresh.DynamoDBCalls, d.Duplicate.DynamoDBCalls, d.Fresh.AWSWCU, d.Duplicate.AWSWCU})
	p := byKind[KindFused]
	require.Equal(t, [4]float64{1, 1, 5, 4}, [4]float64{p.Fresh.DynamoDBCalls, p.Duplicate.DynamoDBCalls, p.Fresh.AWSWCU, p.Duplicate.AWSWCU}, "fused")
	require.Zero(t, p.Worker.Fresh.ReadKeys+p.Worker.Duplicate.ReadKeys)
	for _, tc := range []struct {
		kind      Kind
		op        string
		wcu       float64
		whatFresh string
	}{
		{KindSingle, "TransactWriteItems", 4, "fresh: one transaction of the update and the inbox check each"},
		{KindSingleSkip, "UpdateItem", 1, "fresh: one conditional update each"},
	} {
		s := byKind[tc.kind]
		require.Equal(t, [4]float64{1, 1, tc.wcu, tc.wcu}, [4]float64{s.Fresh.DynamoDBCalls, s.Duplicate.DynamoDBCalls, s.Fresh.AWSWCU, s.Duplicate.AWSWCU}, tc.kind)
		require.Equal(t, map[string]int{"DynamoDB." + tc.op: 120}, ddbOnly(s.Worker.Fresh.Calls), tc.whatFresh)
		require.Equal(t, map[string]int{"DynamoDB." + tc.op: 40}, ddbOnly(s.Worker.Duplicate.Calls), "duplicates: one failed call each")
		// A late note is far behind its next one (a case count of
		// messages, four times the concurrency): it always finds it
		// applied.
		require.Equal(t, s.Late, s.Superseded, "%s: every late note superseded", tc.kind)
		require.Zero(t, s.RecordBytes, "%s: no inbox record", tc.kind)
	}

	// Mixed, small: the duplicates interleaved a few messages after their
	// originals, through the fused worker. Still nothing lost or applied
	// twice; the figures are per message over all, the phases' apart are
	// not reported at all.
	mixed, err := Run(context.Background(), benchEnv(t), Config{Messages: 60, Duplicates: []float64{0.3}, Mix: true, Concurrency: []int{4},
		Kinds: []Kind{KindFused}, mixDistance: [2]int{4, 20}, Progress: testWriter{t}})
	require.NoError(t, err)
	require.Len(t, mixed.Concurrency, 1)
	const work, dups = 2 * 42, 2 * 18 // two worker runs of 60, 30 % duplicates
	byKind = map[Kind]Result{}
	for _, x := range mixed.Concurrency {
		w := x.Worker.Mixed
		t.Logf("%s mixed: DDB %.2f WCU %g RCU %g read keys %d calls %v outcomes %v kept %v",
			x.Kind, x.All.DynamoDBCalls, x.All.AWSWCU, x.All.AWSRCU, w.ReadKeys, ddbOnly(w.Calls), w.Outcomes, w.Kept)
		byKind[x.Kind] = x
		require.True(t, x.Mixed, x.Kind)
		require.Equal(t, 0.3, x.DuplicateRatio, x.Kind)
		require.Nil(t, x.Fresh, x.Kind)
		require.Nil(t, x.Duplicate, x.Kind)
		require.NotNil(t, x.All, x.Kind)
		require.Zero(t, x.Lost, x.Kind)
		require.Zero(t, x.DoubleApplies, x.Kind)
		require.Equal(t, [2]int{work + dups, dups}, [2]int{x.Messages, x.Duplicates}, x.Kind)
		require.Equal(t, [2]int{work + dups, work}, [2]int{w.Messages, w.Work}, x.Kind)
		require.Equal(t, work+dups, x.Ceiling.Mixed.Messages, "%s: the ceiling runs the same mixed stream", x.Kind)
		require.Zero(t, x.Worker.Fresh.Messages+x.Worker.Duplicate.Messages+x.Ceiling.Fresh.Messages+x.Ceiling.Duplicate.Messages, x.Kind)
		require.Equal(t, map[string]int{worker.OutcomeApplied: work, worker.OutcomeDuplicate: dups}, w.Outcomes, x.Kind)
		require.Equal(t, x.Kept, sum(w.Kept), x.Kind)
		// A transaction writes 2 × (1 + 1) units, new work one index entry
		// more (the case item and the record are under 1 KB).
		n := float64(w.Messages)
		require.Less(t, x.RecordBytes, 1024, x.Kind)
		require.InDelta(t, 4*float64(w.Calls["DynamoDB.TransactWriteItems"])/n+float64(work)/n, x.All.AWSWCU, 1e-9, x.Kind)
		require.InDelta(t, 0.5*float64(w.ReadKeys)/n, x.All.AWSRCU, 1e-9, x.Kind)

		var js map[string]any
		b, err := json.Marshal(x)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &js))
		require.Contains(t, js, "perMessage", x.Kind)
		require.NotContains(t, js, "perFresh", x.Kind)
		require.NotContains(t, js, "perDuplicate", x.Kind)
		require.Contains(t, js["worker"], "mixed", x.Kind)
		require.NotContains(t, js["worker"], "fresh", x.Kind)
		require.NotContains(t, js["worker"], "duplicate", x.Kind)
	}
	p = byKind[KindFused]
	require.Zero(t, p.Worker.Mixed.ReadKeys)
	require.GreaterOrEqual(t, p.Worker.Mixed.Calls["DynamoDB.TransactWriteItems"], work+dups, "every message is a transaction")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
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
