package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
)

// capture records the requests the library builds instead of sending them,
// so the bare loops send byte-for-byte what the worker would: same items,
// same conditions, same ClientRequestToken. It answers nothing about
// DynamoDB's behaviour; it only keeps the request.
type capture struct {
	put *dynamodb.PutItemInput
	tx  *dynamodb.TransactWriteItemsInput
}

func (c *capture) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.put = in
	return &dynamodb.PutItemOutput{}, nil
}

func (c *capture) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errors.New("bench: the prepared paths issue no UpdateItem")
}

func (c *capture) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.tx = in
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// prepared are the calls of one work item on one path.
type prepared struct {
	put    *dynamodb.PutItemInput            // default: the gate
	tx     *dynamodb.TransactWriteItemsInput // default: the commit; fused: the fused commit
	update *dynamodb.UpdateItemInput         // naive: the domain update
}

// prepare builds the calls kind would make for env, through the library's
// own gate, handler and committer.
func prepare(kind Kind, table string, env *envelope.Envelope) (*prepared, error) {
	msg := &ddbworker.Message{Envelope: env, Attempt: 1}
	handlers := &caseflow.Handlers{Table: table}
	var p caseflow.NoteRecorded
	switch kind {
	case KindNaive:
		if err := jsonUnmarshal(env.Payload, &p); err != nil {
			return nil, err
		}
		ex, err := expression.NewBuilder().WithUpdate(caseflow.NoteUpdate(p)).Build()
		if err != nil {
			return nil, err
		}
		return &prepared{update: &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: caseflow.CaseKey(p.CaseID), UpdateExpression: ex.Update(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}}, nil
	case KindDefault, KindFused:
	default:
		return nil, fmt.Errorf("bench: unknown kind %q", kind)
	}
	res, err := ddbworker.JSON(handlers.Note).Handle(context.Background(), msg)
	if err != nil {
		return nil, err
	}
	writes := make([]mutation.Write, len(res.Writes))
	for i, w := range res.Writes {
		if writes[i], err = w.Mutation(); err != nil {
			return nil, err
		}
	}
	c := &capture{}
	committer, err := mutation.New(c, mutation.Config{Store: inbox.Store{Table: table}})
	if err != nil {
		return nil, err
	}
	work := inbox.Work{Key: env.IdempotencyKey, MessageType: env.MessageType, RequestHash: env.RequestHash,
		SchemaVersion: env.SchemaVersion, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		CorrelationID: env.CorrelationID, Producer: env.Producer}
	if kind == KindFused {
		rec := inbox.NewRecord(&work, time.Now())
		rec.LeaseToken, rec.LeaseOwner = gate.NewToken(), "bench"
		if err := committer.CommitFused(context.Background(), rec, writes, mutation.Completion{}, 0); err != nil {
			return nil, err
		}
		return &prepared{tx: c.tx}, nil
	}
	g, err := gate.New(c, gate.Config{Store: inbox.Store{Table: table}, Owner: "bench", Policy: leasePolicy})
	if err != nil {
		return nil, err
	}
	dec, err := g.Acquire(context.Background(), &gate.Request{Work: work})
	if err != nil {
		return nil, err
	}
	if err := committer.Commit(context.Background(), dec.Lease, writes, mutation.Completion{}, 0); err != nil {
		return nil, err
	}
	return &prepared{put: c.put, tx: c.tx}, nil
}

// bareHandle issues a prepared message's calls: what the worker does per
// message minus everything around the calls.
func bareHandle(kind Kind, ddb *dynamodb.Client, p *prepared) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		switch kind {
		case KindNaive:
			_, err := ddb.UpdateItem(ctx, p.update)
			return err == nil
		case KindFused:
			_, err := ddb.TransactWriteItems(ctx, p.tx)
			return err == nil || isCancelled(err)
		default:
			if _, err := ddb.PutItem(ctx, p.put); err != nil {
				return isConditionFailed(err) // a duplicate: one call, then delete
			}
			_, err := ddb.TransactWriteItems(ctx, p.tx)
			return err == nil
		}
	}
}
