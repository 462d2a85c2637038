package effects

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// Write is the effect's part of the work's commit: add it to the handler's
// Result beside the domain writes that use the effect (the provider's
// reference, say), so they commit together with the inbox flip.
//
// The rule: the provider's reference is made durable the moment the call
// returns (Do's fenced UpdateItem), because a crash before the commit must
// not lose it — the next attempt reads it and never calls again. The
// commit then ties the effect to the work: Write is an Update of the effect
// record, conditioned on the record still holding exactly this outcome
// (COMPLETED with this reference, or FAILED with this code, under this
// request hash), that stamps committedAt and, when Do could not write the
// completion itself (Pending), writes it — fenced on Do's claim — in the
// same transaction as the domain writes. If the record changed (another
// holder of the work, an operator), the commit does not apply and the
// handler runs again (Rerun), reading the log afresh.
//
// Write of an effect in any other status is the zero ddbworker.Write, which
// the worker refuses as an invalid result.
func (e *Effect) Write() ddbworker.Write {
	if e == nil || e.st == nil || (e.Status != StatusCompleted && e.Status != StatusFailed) {
		return ddbworker.Write{}
	}
	s := e.st
	now := s.now()
	ts := inbox.FormatTime(now)
	upd := expression.Set(expression.Name(attr.CommittedAt), expression.Value(ts)).
		Set(expression.Name(s.inbox.Layout.TTL), expression.Value(now.Add(s.ttl).Unix()))
	var cond expression.ConditionBuilder
	hash := expression.Name(attr.RequestHash).Equal(expression.Value(e.RequestHash))
	switch e.Status {
	case StatusCompleted:
		recorded := expression.Name(attr.Status).Equal(expression.Value(string(StatusCompleted))).
			And(expression.Name(attr.ProviderRef).Equal(expression.Value(e.ProviderRef)))
		cond = hash.And(recorded)
		if e.Pending {
			// The completion travels with the commit: fenced on Do's claim,
			// exactly like Do's own completion write.
			upd = upd.Set(expression.Name(attr.Status), expression.Value(string(StatusCompleted))).
				Set(expression.Name(attr.ProviderRef), expression.Value(e.ProviderRef)).
				Set(expression.Name(attr.CompletedAt), expression.Value(e.CompletedAt)).
				Set(expression.Name(attr.CallExpiresAt), expression.Value(0)).
				Remove(expression.Name(s.inbox.Layout.AttentionPK)).
				Remove(expression.Name(s.inbox.Layout.AttentionSK))
			if e.Result != "" {
				upd = upd.Set(expression.Name(attr.EffectResult), expression.Value(e.Result))
			}
			cond = hash.And(expression.Or(recorded, byClaim(e)))
		}
	case StatusFailed:
		cond = hash.And(expression.Name(attr.Status).Equal(expression.Value(string(StatusFailed)))).
			And(expression.Name(attr.FailureCode).Equal(expression.Value(e.FailureCode)))
	}
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return ddbworker.Write{}
	}
	// A condition the builders do not cover (the pending completion's OR
	// and IN): a Raw write without a judge, whose failed condition re-runs
	// the handler.
	return writes.Raw[ddbworker.Write](mutation.Write{Item: types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: s.key(e.Key),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}})
}
