package inbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbworker/ddbworker/internal/attr"
)

// Transition is one fenced change of an inbox record: the update and the
// condition that must hold for it to apply. This file is the state machine;
// the gate, the committer, the renewer and the sweeper send these (the
// commit inside the handler's transaction), and none builds its own.
//
//	(none)            → PROCESSING        gate: conditional PutItem (NewRecord)
//	(none)            → COMPLETED         a fused commit (CompletedRecord, in
//	                                      the handler's transaction)
//	(none)            → FAILED_*          a fused run's failure (FailedRecord,
//	                                      attempts 1)
//	PROCESSING(token) → COMPLETED         Complete (in the commit transaction)
//	PROCESSING(token) → FAILED_*          Fail (attempts + 1: the one place a
//	                                      business attempt is counted)
//	PROCESSING(token) → PROCESSING        Renew (later expiry)
//	PROCESSING(token) → PROCESSING        Release (the lease given back, no
//	                                      token: infrastructure trouble or a
//	                                      shutdown ended it without an outcome)
//	decided-on record → PROCESSING        Takeover (new token; takeovers + 1
//	                                      when the lease it takes had expired)
//	decided-on record → FAILED_TERMINAL   End (attempts, takeovers or retry
//	                                      window used up; the sweeper's
//	                                      LEASE_ABANDONED)
//
// Attempts are charged by business outcomes only: taking a lease counts
// nothing, so a lease that ends without an outcome (throttling, a 5xx, a
// timeout, a lost response, a shutdown, a crash) costs no attempt and needs
// no second write to say so.
type Transition struct {
	Update    expression.UpdateBuilder
	Condition expression.ConditionBuilder
}

// Build renders the transition's expressions.
func (t Transition) Build() (expression.Expression, error) {
	ex, err := expression.NewBuilder().WithUpdate(t.Update).WithCondition(t.Condition).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("inbox: build transition: %w", err)
	}
	return ex, nil
}

// UpdateItem renders the transition as one UpdateItem of the record at key
// in table. A failed condition returns the record as it was (ALL_OLD), so
// the sender learns what it lost to without a read.
func (t Transition) UpdateItem(table string, key map[string]types.AttributeValue) (*dynamodb.UpdateItemInput, error) {
	ex, err := t.Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key,
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// TransactUpdate renders the transition as one action of a
// TransactWriteItems (the commit's inbox flip), with ALL_OLD on a failed
// condition.
func (t Transition) TransactUpdate(table string, key map[string]types.AttributeValue) (*types.Update, error) {
	ex, err := t.Build()
	if err != nil {
		return nil, err
	}
	return &types.Update{
		TableName: aws.String(table), Key: key,
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// ErrLeaseLost is the sentinel of *LeaseLostError.
var ErrLeaseLost = errors.New("inbox: lease lost")

// LeaseLostError reports that a fenced transition found the record no
// longer PROCESSING under the lease's token: another worker took it over,
// or it was completed or failed (possibly by this lease's own earlier
// attempt, whose response was lost). Record is the record as it was (nil
// when it did not exist or could not be read).
type LeaseLostError struct {
	Lease  Lease
	Record *Record
}

// LostLease builds the error from the ALL_OLD image a failed condition
// returned (empty when the record did not exist).
func (s Store) LostLease(l Lease, old map[string]types.AttributeValue) *LeaseLostError {
	e := &LeaseLostError{Lease: l}
	if len(old) > 0 {
		e.Record, _ = s.Decode(old)
	}
	return e
}

func (e *LeaseLostError) Error() string {
	if e.Record == nil {
		return fmt.Sprintf("inbox: lease lost on %s/%s: record missing", e.Lease.Key, e.Lease.MessageType)
	}
	owner := "another token"
	if e.Record.LeaseToken == e.Lease.Token {
		owner = "this token"
	}
	return fmt.Sprintf("inbox: lease lost on %s/%s: record is %s under %s", e.Lease.Key, e.Lease.MessageType, e.Record.Status, owner)
}

// Unwrap returns ErrLeaseLost.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// Completed reports whether the work is COMPLETED anyway (by this lease's
// own earlier, ambiguous commit, or by another worker): a duplicate success.
func (e *LeaseLostError) Completed() bool {
	return e.Record != nil && e.Record.Status == StatusCompleted
}

// Ours reports whether the record is in status under this lease's own token
// with code: a fenced update of ours applied and its response was lost.
func (e *LeaseLostError) Ours(status Status, code string) bool {
	r := e.Record
	return r != nil && r.LeaseToken == e.Lease.Token && r.Status == status && r.FailureCode == code
}

// fence is the condition of every transition a lease holder makes: the
// record is PROCESSING under the lease's token.
func fence(l Lease) expression.ConditionBuilder {
	return expression.Name(attr.Status).Equal(expression.Value(string(StatusProcessing))).
		And(expression.Name(attr.LeaseToken).Equal(expression.Value(l.Token)))
}

// CompletedRecord is rec, a fresh record no lease holds (a fused run's,
// from NewRecord), as its one write creates it: COMPLETED at now with
// outcome (default APPLIED), its TTL, and no lease or attention entry.
func (s Store) CompletedRecord(rec *Record, now time.Time, outcome, resultRef string) *Record {
	if outcome == "" {
		outcome = OutcomeApplied
	}
	r := *rec
	r.Status, r.Outcome, r.ResultRef = StatusCompleted, outcome, resultRef
	r.CompletedAt = FormatTime(now)
	r.TTL = s.ttl().For(StatusCompleted, now)
	r.LeaseExpiresAt, r.GSI2PK, r.GSI2SK = 0, "", ""
	return &r
}

// FailedRecord is rec, a fresh record no lease holds (a fused run's), as
// its one write creates it after the run's business failure: status with
// code and message, attempt 1 counted, in the attention index.
func (s Store) FailedRecord(rec *Record, now time.Time, status Status, code, message string) *Record {
	ts := FormatTime(now)
	r := *rec
	r.Status, r.FailureCode, r.FailureMessage, r.FailedAt = status, code, message, ts
	r.Attempts = 1
	r.TTL = s.ttl().For(status, now)
	r.LeaseExpiresAt = 0
	r.GSI2PK, r.GSI2SK = AttentionPK(status, Shard(strings.TrimPrefix(r.PK, prefixIdempotency), s.shards())), ts
	return &r
}

// Complete flips a held record to COMPLETED with outcome (default APPLIED):
// the lease and the attention-index entry go; ttl (epoch s) must outlive
// every redelivery.
func (s Store) Complete(l Lease, now time.Time, outcome, resultRef string) Transition {
	if outcome == "" {
		outcome = OutcomeApplied
	}
	ts := FormatTime(now)
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(StatusCompleted))).
		Set(expression.Name(attr.CompletedAt), expression.Value(ts)).
		Set(expression.Name(attr.Outcome), expression.Value(outcome)).
		Set(expression.Name(s.layout().TTL), expression.Value(s.ttl().For(StatusCompleted, now))).
		Remove(expression.Name(attr.LeaseExpiresAt)).
		Remove(expression.Name(s.layout().AttentionPK)).
		Remove(expression.Name(s.layout().AttentionSK))
	if resultRef != "" {
		upd = upd.Set(expression.Name(attr.ResultRef), expression.Value(resultRef))
	}
	return Transition{Update: upd, Condition: fence(l)}
}

// Fail records a business failure on a held record and ends the lease:
// FAILED_RETRYABLE (a later delivery takes over) or FAILED_TERMINAL (never
// re-run), with code, message, time and an attention-index entry in one of
// the store's shards, and the lease's attempt counted (attempts =
// l.Attempt): the only transition that charges a business attempt.
func (s Store) Fail(l Lease, now time.Time, status Status, code, message string) Transition {
	upd := s.failed(l.Key, now, status, code, message).Set(expression.Name(attr.Attempts), expression.Value(l.Attempt))
	return Transition{Update: upd, Condition: fence(l)}
}

func (s Store) failed(key string, now time.Time, status Status, code, message string) expression.UpdateBuilder {
	ts := FormatTime(now)
	return expression.Set(expression.Name(attr.Status), expression.Value(string(status))).
		Set(expression.Name(attr.FailureCode), expression.Value(code)).
		Set(expression.Name(attr.FailureMessage), expression.Value(message)).
		Set(expression.Name(attr.FailedAt), expression.Value(ts)).
		Set(expression.Name(s.layout().TTL), expression.Value(s.ttl().For(status, now))).
		Set(expression.Name(s.layout().AttentionPK), expression.Value(AttentionPK(status, Shard(key, s.shards())))).
		Set(expression.Name(s.layout().AttentionSK), expression.Value(ts)).
		Remove(expression.Name(attr.LeaseExpiresAt))
}

// Release gives a held lease back without an outcome: infrastructure
// trouble (throttling, a 5xx, a timeout, a conflict) or a shutdown ended
// the attempt before the work succeeded or failed. The token goes (the
// record stays PROCESSING, held by no one, so the next delivery takes it
// over at once and counts no crash), leaseExpiresAt says when it ended
// (the sweeper's clock for a record whose message never returns), and code
// and message say why. Nothing is refunded because nothing was charged;
// the release only saves the next delivery the wait for the lease to
// expire, so a Release that cannot be written loses nothing.
func (s Store) Release(l Lease, now time.Time, code, message string) Transition {
	ts := FormatTime(now)
	upd := expression.Set(expression.Name(attr.LeaseExpiresAt), expression.Value(now.UnixMilli())).
		Set(expression.Name(attr.LastSeenAt), expression.Value(ts)).
		Set(expression.Name(attr.FailureCode), expression.Value(code)).
		Set(expression.Name(attr.FailureMessage), expression.Value(message)).
		Remove(expression.Name(attr.LeaseToken))
	if s.IndexProcessing {
		upd = upd.Set(expression.Name(s.layout().AttentionSK), expression.Value(ts))
	}
	return Transition{Update: upd, Condition: fence(l)}
}

// Renew extends a held lease to exp. With IndexProcessing the attention
// index sort key follows the expiry.
func (s Store) Renew(l Lease, now, exp time.Time) Transition {
	upd := expression.Set(expression.Name(attr.LeaseExpiresAt), expression.Value(exp.UnixMilli())).
		Set(expression.Name(attr.LastSeenAt), expression.Value(FormatTime(now)))
	if s.IndexProcessing {
		upd = upd.Set(expression.Name(s.layout().AttentionSK), expression.Value(FormatTime(exp)))
	}
	return Transition{Update: upd, Condition: fence(l)}
}

// unchanged is the condition of a transition decided on rec by someone who
// does not hold it (a takeover, the sweeper): the record is still exactly
// as read — same request hash, status, attempts and token — and, when it is
// PROCESSING, its lease is still expired (leaseExpiresAt < staleBefore, in
// epoch ms), so a renewal landing in between makes the transition fail —
// or, given back (Released), not given back again since.
// The request hash compared is the one stored, in whatever canonical
// version its writer used (envelope.HashVersion): the caller decided that
// its work is the same (gate.Request.SameWork), and a takeover keeps the
// stored hash.
func unchanged(rec *Record, staleBefore int64) expression.ConditionBuilder {
	attempts := expression.Name(attr.Attempts).Equal(expression.Value(rec.Attempts))
	if rec.Attempts == 0 { // a fresh record does not write the attribute
		attempts = expression.AttributeNotExists(expression.Name(attr.Attempts)).Or(attempts)
	}
	cond := expression.Name(attr.RequestHash).Equal(expression.Value(rec.RequestHash)).
		And(expression.Name(attr.Status).Equal(expression.Value(string(rec.Status)))).
		And(attempts)
	if rec.LeaseToken == "" {
		cond = cond.And(expression.AttributeNotExists(expression.Name(attr.LeaseToken)))
	} else {
		cond = cond.And(expression.Name(attr.LeaseToken).Equal(expression.Value(rec.LeaseToken)))
	}
	switch {
	case rec.Released():
		// Given back: nothing to wait for; the release it was decided on is
		// still the last write (a later one would set lastSeenAt again).
		cond = cond.And(expression.Name(attr.LastSeenAt).Equal(expression.Value(rec.LastSeenAt)))
	case rec.Status == StatusProcessing:
		cond = cond.And(expression.Name(attr.LeaseExpiresAt).LessThan(expression.Value(staleBefore)))
	}
	return cond
}

// Claim describes a takeover: the new holder and its lease.
type Claim struct {
	Token, Owner string
	Now, Expires time.Time
}

// Takeover claims rec, decided on at a moment it was FAILED_RETRYABLE,
// released, or PROCESSING under a lease that had expired: a new token,
// delivery + 1, and — for the expired lease, whose holder vanished without
// an outcome — takeovers + 1. No attempt is counted: the next recorded
// failure does that.
func (s Store) Takeover(rec *Record, c Claim, staleBefore int64) Transition {
	ts := FormatTime(c.Now)
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(StatusProcessing))).
		Set(expression.Name(attr.LeaseToken), expression.Value(c.Token)).
		Set(expression.Name(attr.LeaseOwner), expression.Value(c.Owner)).
		Set(expression.Name(attr.LeaseExpiresAt), expression.Value(c.Expires.UnixMilli())).
		Set(expression.Name(attr.StartedAt), expression.Value(ts)).
		Set(expression.Name(attr.LastSeenAt), expression.Value(ts)).
		Set(expression.Name(s.layout().TTL), expression.Value(s.ttl().For(StatusProcessing, c.Now))).
		Set(expression.Name(attr.Deliveries), expression.Plus(expression.IfNotExists(expression.Name(attr.Deliveries), expression.Value(0)), expression.Value(1)))
	if rec.AbandonedLease() {
		upd = upd.Set(expression.Name(attr.Takeovers), expression.Plus(expression.IfNotExists(expression.Name(attr.Takeovers), expression.Value(0)), expression.Value(1)))
	}
	if s.IndexProcessing {
		upd = upd.Set(expression.Name(s.layout().AttentionPK), expression.Value(AttentionPK(StatusProcessing, Shard(rec.Key, s.shards())))).
			Set(expression.Name(s.layout().AttentionSK), expression.Value(FormatTime(c.Expires)))
	} else {
		upd = upd.Remove(expression.Name(s.layout().AttentionPK)).Remove(expression.Name(s.layout().AttentionSK))
	}
	return Transition{Update: upd, Condition: unchanged(rec, staleBefore)}
}

// End ends rec, decided on by someone who does not hold it, as
// FAILED_TERMINAL with code: a delivery whose business attempts or retry
// window are used up, or the sweeper marking an abandoned lease.
func (s Store) End(rec *Record, now time.Time, code, message string, staleBefore int64) Transition {
	return Transition{Update: s.failed(rec.Key, now, StatusFailedTerminal, code, message), Condition: unchanged(rec, staleBefore)}
}

// Reopen gives a FAILED_TERMINAL record, decided on as rec, back to the
// retry path after an operator fixed what made it fail: FAILED_RETRYABLE
// with a fresh attempts budget, so the next delivery of the work (a DLQ
// redrive) takes it over and runs it. The last failure stays on the record,
// and reopenedAt, reopenedBy and reason audit the change. Fenced by
// unchanged: a record that moved meanwhile is not reopened.
func (s Store) Reopen(rec *Record, now time.Time, by, reason string) Transition {
	ts := FormatTime(now)
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(StatusFailedRetryable))).
		Set(expression.Name(attr.Attempts), expression.Value(0)).
		Set(expression.Name(attr.LastSeenAt), expression.Value(ts)).
		Set(expression.Name(attrReopenedAt), expression.Value(ts)).
		Set(expression.Name(attrReopenedBy), expression.Value(by)).
		Set(expression.Name(attrReopenReason), expression.Value(reason)).
		Set(expression.Name(s.layout().TTL), expression.Value(s.ttl().For(StatusFailedRetryable, now))).
		Set(expression.Name(s.layout().AttentionPK), expression.Value(AttentionPK(StatusFailedRetryable, Shard(rec.Key, s.shards())))).
		Set(expression.Name(s.layout().AttentionSK), expression.Value(ts)).
		// A discard said the work would never run; reopened, it may.
		Remove(expression.Name(attr.DiscardedAt)).Remove(expression.Name(attr.DiscardedBy)).
		Remove(expression.Name(attr.DiscardReason))
	return Transition{Update: upd, Condition: unchanged(rec, 0)}
}

// Discard marks the FAILED_TERMINAL record rec (a work item's, or a
// rejection's) as given up by an operator who removed its message from
// the DLQ: when, by whom and why (discardedAt, discardedBy,
// discardReason). Its status stays FAILED_TERMINAL — the work never ran —
// and a later delivery of the same work still finds it failed. It is
// fenced on the failure being the one read: still FAILED_TERMINAL, failed
// at the same time (a reopen, or a new failure after one, changes them).
func (s Store) Discard(rec *Record, now time.Time, by, reason string) Transition {
	upd := expression.Set(expression.Name(attr.DiscardedAt), expression.Value(FormatTime(now))).
		Set(expression.Name(attr.DiscardedBy), expression.Value(by)).
		Set(expression.Name(attr.DiscardReason), expression.Value(reason))
	cond := expression.Name(attr.Status).Equal(expression.Value(string(StatusFailedTerminal))).
		And(expression.Name(attr.FailedAt).Equal(expression.Value(rec.FailedAt)))
	return Transition{Update: upd, Condition: cond}
}
