package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbworker/ddbworker/internal/attr"
)

// A shard lease item: PK = RELAY#<name>#<stream label>, SK = SHARD#<shard
// id>; leaseOwner, leaseToken, leaseExpiresAt (epoch ms), checkpoint (the
// sequence number last done), shardEnded, streamArn, shardId, updatedAt.

// lease is this instance's claim on one shard.
type lease struct {
	shardID    string
	token      string
	checkpoint string

	mu sync.Mutex
	// renewed is when the last successful lease write (acquire, renew,
	// checkpoint) started: the lease in the table lasts until renewed +
	// LeaseDuration, on this instance's clock.
	renewed time.Time
}

// renewedAt returns when the last successful lease write started.
func (ls *lease) renewedAt() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.renewed
}

func (ls *lease) setRenewed(t time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if t.After(ls.renewed) {
		ls.renewed = t
	}
}

// leasePK is the partition of the relay's leases on stream arn.
func (r *Relay) leasePK(arn string) string {
	label := arn
	if i := strings.LastIndex(arn, "/stream/"); i >= 0 {
		label = arn[i+len("/stream/"):]
	}
	return "RELAY#" + r.cfg.Name + "#" + label
}

func (r *Relay) leaseKey(arn, shardID string) map[string]types.AttributeValue {
	l := r.cfg.Layout
	return map[string]types.AttributeValue{l.PartitionKey: &types.AttributeValueMemberS{Value: r.leasePK(arn)},
		l.SortKey: &types.AttributeValueMemberS{Value: "SHARD#" + shardID}}
}

// leaseState is what the lease items say about a stream's shards.
type leaseState struct {
	ended map[string]bool
	// held: shards whose lease has not expired (epoch ms of the expiry).
	held map[string]int64
}

// leases reads the lease items of stream arn.
func (r *Relay) leases(ctx context.Context, arn string) (leaseState, error) {
	l := r.cfg.Layout
	st := leaseState{ended: map[string]bool{}, held: map[string]int64{}}
	key := expression.Key(l.PartitionKey).Equal(expression.Value(r.leasePK(arn)))
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return st, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(r.cfg.Table), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true)}
	p := dynamodb.NewQueryPaginator(r.deps.DynamoDB, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return st, fmt.Errorf("query the shard leases: %w", err)
		}
		for _, it := range out.Items {
			id, _ := it[attr.RelayShardID].(*types.AttributeValueMemberS)
			if id == nil {
				continue
			}
			if b, ok := it[attr.RelayShardEnded].(*types.AttributeValueMemberBOOL); ok && b.Value {
				st.ended[id.Value] = true
			}
			if n, ok := it[attr.LeaseExpiresAt].(*types.AttributeValueMemberN); ok {
				if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil && ms >= r.cfg.Now().UnixMilli() {
					st.held[id.Value] = ms
				}
			}
		}
	}
	return st, nil
}

// acquire takes shardID's lease when it is free (no item, or expired) and
// the shard is not finished. It returns nil, nil when another instance
// holds it.
func (r *Relay) acquire(ctx context.Context, arn, shardID string) (*lease, error) {
	l := r.cfg.Layout
	now := r.cfg.Now()
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	upd := expression.Set(expression.Name(attr.LeaseOwner), expression.Value(r.cfg.Owner)).
		Set(expression.Name(attr.LeaseToken), expression.Value(token)).
		Set(expression.Name(attr.LeaseExpiresAt), expression.Value(now.Add(r.cfg.LeaseDuration).UnixMilli())).
		Set(expression.Name(attr.RelayStreamARN), expression.Value(arn)).
		Set(expression.Name(attr.RelayShardID), expression.Value(shardID)).
		Set(expression.Name(attr.RelayUpdatedAt), expression.Value(now.UTC().Format("2006-01-02T15:04:05.000Z")))
	free := expression.AttributeNotExists(expression.Name(l.PartitionKey)).
		Or(expression.Name(attr.LeaseExpiresAt).LessThan(expression.Value(now.UnixMilli())))
	notEnded := expression.AttributeNotExists(expression.Name(attr.RelayShardEnded)).
		Or(expression.Name(attr.RelayShardEnded).Equal(expression.Value(false)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(free.And(notEnded)).Build()
	if err != nil {
		return nil, err
	}
	out, err := r.deps.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.cfg.Table), Key: r.leaseKey(arn, shardID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(), ReturnValues: types.ReturnValueAllNew})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("acquire the lease of shard %s: %w", shardID, err)
	}
	ls := &lease{shardID: shardID, token: token, renewed: now}
	if cp, ok := out.Attributes[attr.RelayCheckpoint].(*types.AttributeValueMemberS); ok {
		ls.checkpoint = cp.Value
	}
	return ls, nil
}

// renew writes the lease (fenced on its token): a new expiry and, when
// checkpoint is not "", the checkpoint; ended marks the shard finished;
// release ends the lease now. ErrLeaseLost when the token changed.
func (r *Relay) renew(ctx context.Context, arn string, ls *lease, checkpoint string, ended, release bool) error {
	now := r.cfg.Now()
	exp := now.Add(r.cfg.LeaseDuration).UnixMilli()
	if release {
		exp = 0
	}
	upd := expression.Set(expression.Name(attr.LeaseExpiresAt), expression.Value(exp)).
		Set(expression.Name(attr.RelayUpdatedAt), expression.Value(now.UTC().Format("2006-01-02T15:04:05.000Z")))
	if checkpoint != "" {
		upd = upd.Set(expression.Name(attr.RelayCheckpoint), expression.Value(checkpoint))
	}
	if ended {
		upd = upd.Set(expression.Name(attr.RelayShardEnded), expression.Value(true))
	}
	cond := expression.Name(attr.LeaseToken).Equal(expression.Value(ls.token))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = r.deps.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.cfg.Table), Key: r.leaseKey(arn, ls.shardID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%w: shard %s", ErrLeaseLost, ls.shardID)
	}
	if err != nil {
		return fmt.Errorf("write the lease of shard %s: %w", ls.shardID, err)
	}
	ls.setRenewed(now)
	if checkpoint != "" {
		ls.checkpoint = checkpoint
	}
	return nil
}
