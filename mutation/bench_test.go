package mutation_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// BenchmarkBuildCommit: the transaction items of one commit — a guarded
// domain update (rendered by ddbworker.Write.Mutation) and the fenced
// inbox flip — built through the expression builder, as the worker does
// for every fresh message.
func BenchmarkBuildCommit(b *testing.B) {
	store, err := inbox.Store{Table: "t"}.WithDefaults()
	if err != nil {
		b.Fatal(err)
	}
	key := ddbworker.Key{"PK": "CASE#1", "SK": "CASE"}
	l := inbox.Lease{Key: "k-123", MessageType: "CaseNoteRecorded", Token: "0123456789abcdef0123456789abcdef"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		w, err := writes.Mutation(ddbworker.Update("t", key).Set("stage", "review").Set("stageVersion", 5).
			Guard(ddbworker.MustExist().Else(ddbworker.Fail("X", "")), ddbworker.NewerVersion("stageVersion", 5)))
		if err != nil {
			b.Fatal(err)
		}
		flip, err := store.Complete(l, now, "", "").TransactUpdate(store.Table, store.Key(l.Key, l.MessageType))
		if err != nil {
			b.Fatal(err)
		}
		_ = []types.TransactWriteItem{w.Item, {Update: flip}}
		_ = mutation.RequestToken(l, 0)
	}
}
