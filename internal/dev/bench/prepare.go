package bench

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	ddbwrites "github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// capture records the requests the library builds instead of sending them,
// so the bare loops send byte-for-byte what the worker would: same items,
// same conditions, same ClientRequestToken. It answers nothing about
// DynamoDB's behaviour; it only keeps the request.
type capture struct {
	put    *dynamodb.PutItemInput
	update *dynamodb.UpdateItemInput
	tx     *dynamodb.TransactWriteItemsInput
}

func (c *capture) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.put = in
	return &dynamodb.PutItemOutput{}, nil
}

func (c *capture) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.update = in
	return &dynamodb.UpdateItemOutput{}, nil
}

func (c *capture) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.tx = in
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// prepared are the calls of one work item on one path.
type prepared struct {
	put    *dynamodb.PutItemInput            // default: the gate
	tx     *dynamodb.TransactWriteItemsInput // default: the commit; fused: the fused commit
	update *dynamodb.UpdateItemInput         // naive: the domain update; single-skip: the fenced update
}

// prepareNaive is the domain update alone, as a first worker sends it.
func prepareNaive(table string, env *envelope.Envelope) (*prepared, error) {
	var p caseflow.NoteRecorded
	if err := jsonUnmarshal(env.Payload, &p); err != nil {
		return nil, err
	}
	ex, err := expression.NewBuilder().WithUpdate(caseflow.NoteUpdate(p)).Build()
	if err != nil {
		return nil, err
	}
	return &prepared{update: &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: caseflow.CaseKey(p.CaseID), UpdateExpression: ex.Update(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}, nil
}

// handlerWrites runs h for env, as the worker would at its first attempt,
// and renders its writes.
func handlerWrites(h ddbworker.Handler, env *envelope.Envelope) ([]mutation.Write, error) {
	res, err := h.Handle(context.Background(), &ddbworker.Message{Envelope: env, Attempt: 1})
	if err != nil {
		return nil, err
	}
	writes := make([]mutation.Write, len(res.Writes))
	for i, w := range res.Writes {
		if writes[i], err = ddbwrites.Mutation(w); err != nil {
			return nil, err
		}
	}
	return writes, nil
}

func work(env *envelope.Envelope) inbox.Work {
	return inbox.Work{Key: env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
		SchemaVersion: env.SchemaVersion, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		CorrelationID: env.CorrelationID, Producer: env.Producer}
}

// prepareDefault is the gate's PutItem and the commit's transaction.
func prepareDefault(table string, env *envelope.Envelope) (*prepared, error) {
	writes, err := handlerWrites(ddbworker.JSON((&caseflow.Handlers{Table: table}).Note), env)
	if err != nil {
		return nil, err
	}
	c := &capture{}
	committer, err := mutation.New(c, mutation.Config{Store: inbox.Store{Table: table}})
	if err != nil {
		return nil, err
	}
	g, err := gate.New(c, gate.Config{Store: inbox.Store{Table: table}, Owner: "bench", Policy: leasePolicy})
	if err != nil {
		return nil, err
	}
	dec, err := g.Acquire(context.Background(), &gate.Request{Work: work(env)})
	if err != nil {
		return nil, err
	}
	if err := committer.Commit(context.Background(), dec.Lease, writes, mutation.Completion{}, 0); err != nil {
		return nil, err
	}
	return &prepared{put: c.put, tx: c.tx}, nil
}

// prepareFused is the fused commit's transaction.
func prepareFused(table string, env *envelope.Envelope) (*prepared, error) {
	writes, err := handlerWrites(ddbworker.JSON((&caseflow.Handlers{Table: table}).Note), env)
	if err != nil {
		return nil, err
	}
	c := &capture{}
	committer, err := mutation.New(c, mutation.Config{Store: inbox.Store{Table: table}})
	if err != nil {
		return nil, err
	}
	w := work(env)
	rec := inbox.NewRecord(&w, time.Now())
	rec.LeaseToken, rec.LeaseOwner = gate.NewToken(), "bench"
	if err := committer.CommitFused(context.Background(), rec, writes, mutation.Completion{}, 0); err != nil {
		return nil, err
	}
	return &prepared{tx: c.tx}, nil
}

// prepareSingle is the single-write route's one transaction of
// NoteInOrder's fenced write and the check that the work has no inbox
// record.
func prepareSingle(table string, env *envelope.Envelope) (*prepared, error) {
	fenced, committer, c, err := singleWrite(table, env)
	if err != nil {
		return nil, err
	}
	w := work(env)
	rec := inbox.NewRecord(&w, time.Now())
	rec.LeaseToken, rec.LeaseOwner = gate.NewToken(), "bench"
	if err := committer.CommitSingleGuarded(context.Background(), rec, fenced, 0); err != nil {
		return nil, err
	}
	return &prepared{tx: c.tx}, nil
}

// prepareSingleSkip is SkipInboxCheck's one fenced UpdateItem of
// NoteInOrder's write.
func prepareSingleSkip(table string, env *envelope.Envelope) (*prepared, error) {
	fenced, committer, c, err := singleWrite(table, env)
	if err != nil {
		return nil, err
	}
	if err := committer.CommitSingle(context.Background(), fenced); err != nil {
		return nil, err
	}
	return &prepared{update: c.update}, nil
}

// singleWrite is NoteInOrder's fenced write of env and a committer that
// captures what it would send.
func singleWrite(table string, env *envelope.Envelope) (mutation.Write, *mutation.Committer, *capture, error) {
	writes, err := handlerWrites(ddbworker.JSON((&caseflow.Handlers{Table: table}).NoteInOrder), env)
	if err != nil {
		return mutation.Write{}, nil, nil, err
	}
	fenced, err := mutation.Fenced(writes, mutation.Stamp{Key: env.IdempotencyKey, Type: env.MessageType, Hash: env.RequestHash})
	if err != nil {
		return mutation.Write{}, nil, nil, err
	}
	c := &capture{}
	committer, err := mutation.New(c, mutation.Config{Store: inbox.Store{Table: table}})
	if err != nil {
		return mutation.Write{}, nil, nil, err
	}
	return fenced, committer, c, nil
}

// The bare loops send a shallow copy of each prepared request: a work
// item's duplicates share its requests, and the meter sets
// ReturnConsumedCapacity on the request it is given.

// bareUpdate sends the one UpdateItem (naive: unconditional; single: a
// failed condition is a duplicate or a late version, acked).
func bareUpdate(ctx context.Context, ddb *dynamodb.Client, p *prepared) bool {
	in := *p.update
	_, err := ddb.UpdateItem(ctx, &in)
	return err == nil || isConditionFailed(err)
}

// bareGated sends the gate's PutItem, then the commit (a failed gate
// condition is a duplicate: one call, then delete).
func bareGated(ctx context.Context, ddb *dynamodb.Client, p *prepared) bool {
	put, tx := *p.put, *p.tx
	if _, err := ddb.PutItem(ctx, &put); err != nil {
		return isConditionFailed(err)
	}
	_, err := ddb.TransactWriteItems(ctx, &tx)
	return err == nil
}

// bareTransaction sends the one transaction (a cancelled one is a
// duplicate).
func bareTransaction(ctx context.Context, ddb *dynamodb.Client, p *prepared) bool {
	tx := *p.tx
	_, err := ddb.TransactWriteItems(ctx, &tx)
	return err == nil || isCancelled(err)
}
