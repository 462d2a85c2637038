package mutation

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

// BenchmarkBuildCommit: the transaction items of one commit — a guarded
// domain update and the fenced inbox flip — built through the expression
// builder, as the worker does for every fresh message.
func BenchmarkBuildCommit(b *testing.B) {
	c, err := New(struct{ API }{}, Config{Store: inbox.Store{Table: "t"}})
	if err != nil {
		b.Fatal(err)
	}
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#1"}, "SK": &types.AttributeValueMemberS{Value: "CASE"}}
	l := inbox.Lease{Key: "k-123", MessageType: "CaseNoteRecorded", Token: "0123456789abcdef0123456789abcdef"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		cond := MustExist(tables.DefaultLayout().PartitionKey).And(NewerVersion("stageVersion", 5))
		w, err := Update("t", key, expression.Set(expression.Name("stage"), expression.Value("review")).
			Set(expression.Name("stageVersion"), expression.Value(5)), &cond, IfMissing(Terminal("X", ""), Superseded("")))
		if err != nil {
			b.Fatal(err)
		}
		flip, err := c.complete(l, now, Completion{}).TransactUpdate(c.cfg.Store.Table, c.cfg.Store.Key(l.Key, l.MessageType))
		if err != nil {
			b.Fatal(err)
		}
		_ = []types.TransactWriteItem{w.Item, {Update: flip}}
		_ = RequestToken(l, 0)
	}
}
