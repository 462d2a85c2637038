package mutation

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
)

// VerdictKind is what a failed domain guard means.
type VerdictKind int

const (
	// Supersede: the write is obsolete (e.g. an older version arrived late).
	// The inbox completes with Verdict.Outcome and no domain write applies.
	Supersede VerdictKind = iota + 1
	// Retry: optimistic concurrency lost; re-run the handler (bounded), then
	// fail retryably with CONCURRENT_MODIFICATION.
	Retry
	// Fail: the work can never apply; terminal with Verdict.Code.
	Fail
)

// Verdict is a guard's judgement on its failed condition.
type Verdict struct {
	Kind    VerdictKind
	Outcome string // Supersede: the inbox outcome; default SUPERSEDED
	Code    string // Fail: the terminal code
	Message string
}

// Guard judges a failed condition from the item as it was (nil when the
// item did not exist).
type Guard func(old map[string]types.AttributeValue) Verdict

// Superseded is a Guard that completes the work with outcome.
func Superseded(outcome string) Guard {
	if outcome == "" {
		outcome = inbox.OutcomeSuperseded
	}
	return func(map[string]types.AttributeValue) Verdict { return Verdict{Kind: Supersede, Outcome: outcome} }
}

// RetryConflict is a Guard for optimistic concurrency: re-run the handler.
func RetryConflict() Guard {
	return func(map[string]types.AttributeValue) Verdict { return Verdict{Kind: Retry} }
}

// Terminal is a Guard that fails the work for good with code.
func Terminal(code, message string) Guard {
	return func(map[string]types.AttributeValue) Verdict {
		return Verdict{Kind: Fail, Code: code, Message: message}
	}
}

// IfMissing judges with missing when the item did not exist and with present
// otherwise: one condition can both require an item and guard its version.
func IfMissing(missing, present Guard) Guard {
	return func(old map[string]types.AttributeValue) Verdict {
		if len(old) == 0 {
			return missing(old)
		}
		return present(old)
	}
}

// Write is one domain write of a commit with the guard that judges its
// condition. A nil guard means Retry.
type Write struct {
	Item  types.TransactWriteItem
	Guard Guard
}

func (w Write) verdict(old map[string]types.AttributeValue) Verdict {
	if w.Guard == nil {
		return Verdict{Kind: Retry}
	}
	return w.Guard(old)
}

// MustExist is the condition that the item exists: its partition key
// attribute keyAttr (e.g. the table layout's PartitionKey, or the
// application table's own) is present.
func MustExist(keyAttr string) expression.ConditionBuilder {
	return expression.AttributeExists(expression.Name(keyAttr))
}

// CreateOnly is the condition that the item does not exist yet: its
// partition key attribute keyAttr is absent.
func CreateOnly(keyAttr string) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(keyAttr))
}

// NewerVersion is the condition that attr is absent or lower than v: a
// version guard that never lets state roll back.
func NewerVersion(attr string, v int64) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(attr)).Or(expression.Name(attr).LessThan(expression.Value(v)))
}

// ExpectVersion is the condition that attr equals v (optimistic concurrency).
func ExpectVersion(attr string, v int64) expression.ConditionBuilder {
	return expression.Name(attr).Equal(expression.Value(v))
}

func build(upd *expression.UpdateBuilder, cond *expression.ConditionBuilder) (expression.Expression, error) {
	b := expression.NewBuilder()
	if upd != nil {
		b = b.WithUpdate(*upd)
	}
	if cond != nil {
		b = b.WithCondition(*cond)
	}
	return b.Build()
}

// Put returns a guarded Put of item. cond may be nil (unconditional).
func Put(table string, item map[string]types.AttributeValue, cond *expression.ConditionBuilder, g Guard) (Write, error) {
	p := &types.Put{TableName: aws.String(table), Item: item}
	if cond != nil {
		ex, err := build(nil, cond)
		if err != nil {
			return Write{}, fmt.Errorf("mutation: put condition: %w", err)
		}
		p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues = ex.Condition(), ex.Names(), ex.Values()
		p.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return Write{Item: types.TransactWriteItem{Put: p}, Guard: g}, nil
}

// Update returns a guarded Update of the item at key. cond may be nil.
func Update(table string, key map[string]types.AttributeValue, upd expression.UpdateBuilder, cond *expression.ConditionBuilder, g Guard) (Write, error) {
	ex, err := build(&upd, cond)
	if err != nil {
		return Write{}, fmt.Errorf("mutation: update expression: %w", err)
	}
	u := &types.Update{TableName: aws.String(table), Key: key, UpdateExpression: ex.Update(),
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values()}
	if cond != nil {
		u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return Write{Item: types.TransactWriteItem{Update: u}, Guard: g}, nil
}

// Delete returns a guarded Delete of the item at key. cond may be nil.
func Delete(table string, key map[string]types.AttributeValue, cond *expression.ConditionBuilder, g Guard) (Write, error) {
	d := &types.Delete{TableName: aws.String(table), Key: key}
	if cond != nil {
		ex, err := build(nil, cond)
		if err != nil {
			return Write{}, fmt.Errorf("mutation: delete condition: %w", err)
		}
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = ex.Condition(), ex.Names(), ex.Values()
		d.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return Write{Item: types.TransactWriteItem{Delete: d}, Guard: g}, nil
}

// Check returns a ConditionCheck on the item at key: the commit applies
// only if cond holds, without writing that item.
func Check(table string, key map[string]types.AttributeValue, cond expression.ConditionBuilder, g Guard) (Write, error) {
	ex, err := build(nil, &cond)
	if err != nil {
		return Write{}, fmt.Errorf("mutation: check condition: %w", err)
	}
	return Write{Item: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(table), Key: key, ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, Guard: g}, nil
}
