package mutation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
)

// MaxWrites is the most domain writes one commit takes: DynamoDB allows 100
// actions per transaction and the inbox record is one of them.
const MaxWrites = 99

// maxFailureMessage bounds failureMessage so a chatty error cannot push the
// record over a WCU or the item size limit.
const maxFailureMessage = 512

// API is what the committer needs of DynamoDB.
type API interface {
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Config configures a Committer.
type Config struct {
	// Store is the inbox. Required (Table).
	Store inbox.Store
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Committer commits domain writes with the inbox flip.
type Committer struct {
	api API
	cfg Config
}

// New validates cfg and returns a Committer.
func New(api API, cfg Config) (*Committer, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("mutation: API is required"))
	}
	var err error
	if cfg.Store, err = cfg.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("mutation: Config: %w", err))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Committer{api: api, cfg: cfg}, nil
}

// Completion is what the inbox records about applied work.
type Completion struct {
	// Outcome of the work. Default: APPLIED.
	Outcome string
	// ResultRef optionally points at what the work produced.
	ResultRef string
}

// Sentinels of the commit's typed errors.
var (
	ErrGuard        = errors.New("mutation: domain guard failed")
	ErrExists       = errors.New("mutation: inbox record exists")
	ErrInvalidWrite = errors.New("mutation: invalid writes")
)

// GuardError: the domain write at Index failed its condition; Old is the
// item as it was and Verdict the write's judgement of it: the policy of
// the first guard that fails on Old, or Retry when none does (the item
// changed between the commit and the judgement) or the write has no
// judge.
type GuardError struct {
	Index   int
	Verdict Verdict
	Old     map[string]types.AttributeValue
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("mutation: domain write %d failed its condition (verdict %d %s)", e.Index, e.Verdict.Kind, e.Verdict.Code)
}

// Unwrap returns ErrGuard.
func (e *GuardError) Unwrap() error { return ErrGuard }

// ExistsError: a fused commit found an inbox record already there.
type ExistsError struct{ Record *inbox.Record }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("mutation: inbox record %s/%s exists (%s)", e.Record.Key, e.Record.MessageType, e.Record.Status)
}

// Unwrap returns ErrExists.
func (e *ExistsError) Unwrap() error { return ErrExists }

// RequestToken derives the ClientRequestToken of a commit: the same lease
// and attempt always give the same token, so an SDK retry of a commit whose
// response was lost is not applied twice; a re-run handler (attempt+1)
// sends different items under a different token.
func RequestToken(l inbox.Lease, attempt int) string {
	h := sha256.New()
	for _, s := range []string{l.Key, l.MessageType, l.Token, strconv.Itoa(attempt)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:36]
}

// Commit applies writes and flips the inbox record to COMPLETED in one
// transaction, only while the record is PROCESSING under l's token. attempt
// numbers the handler runs within this lease (0 first). It returns nil,
// *inbox.LeaseLostError, *GuardError, a *failure.Error (retryable cancellations,
// or terminal for invalid writes), or the SDK's error.
func (c *Committer) Commit(ctx context.Context, l inbox.Lease, writes []Write, done Completion, attempt int) error {
	if err := CheckWrites(writes); err != nil {
		return err
	}
	flip, err := c.complete(l, c.cfg.Now(), done).TransactUpdate(c.cfg.Store.Table, c.cfg.Store.Key(l.Key, l.MessageType))
	if err != nil {
		return fmt.Errorf("mutation: inbox flip: %w", err)
	}
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	for _, w := range writes {
		items = append(items, w.Item)
	}
	items = append(items, types.TransactWriteItem{Update: flip})
	_, err = c.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(RequestToken(l, attempt)),
	})
	if err == nil {
		return nil
	}
	return c.mapCancellation(err, writes, func(old map[string]types.AttributeValue) error {
		return c.cfg.Store.LostLease(l, old)
	})
}

// CommitFused writes rec as COMPLETED (only if no record exists) with the
// domain writes in one transaction: one round trip for handlers that need no
// PROCESSING phase. rec comes from inbox.NewRecord with LeaseToken set; the
// token keys the ClientRequestToken. When a record exists it returns
// *ExistsError with it, unless that record is this commit's own (an
// ambiguous earlier attempt), which is success.
func (c *Committer) CommitFused(ctx context.Context, rec *inbox.Record, writes []Write, done Completion, attempt int) error {
	if err := CheckWrites(writes); err != nil {
		return err
	}
	cond, err := c.createOnly()
	if err != nil {
		return err
	}
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	for _, w := range writes {
		items = append(items, w.Item)
	}
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName:           aws.String(c.cfg.Store.Table),
		Item:                c.cfg.Store.Encode(c.cfg.Store.CompletedRecord(rec, c.cfg.Now(), done.Outcome, done.ResultRef)),
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	l := inbox.Lease{Key: rec.Key, MessageType: rec.MessageType, Token: rec.LeaseToken}
	_, err = c.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(RequestToken(l, attempt)),
	})
	if err == nil {
		return nil
	}
	return c.mapCancellation(err, writes, func(old map[string]types.AttributeValue) error {
		existing, derr := c.cfg.Store.Decode(old)
		if derr != nil {
			return failure.Wrap(failure.Retryable, failure.CodeTransactionConflict, fmt.Errorf("fused commit: inbox condition failed without a readable record: %w", derr))
		}
		if existing.Status == inbox.StatusCompleted && existing.LeaseToken == rec.LeaseToken {
			return nil
		}
		return &ExistsError{Record: existing}
	})
}

// Cancellation reason codes of TransactionCanceledException.
const (
	reasonNone                  = "None"
	reasonConditionalCheck      = "ConditionalCheckFailed"
	reasonTransactionConflict   = "TransactionConflict"
	reasonThrottling            = "ThrottlingError"
	reasonProvisionedThroughput = "ProvisionedThroughputExceeded"
	reasonValidation            = "ValidationError"
)

// CancellationReason returns the reason code of action i of a cancelled
// transaction in err's chain ("" and false when err is not a cancellation
// or has no reason i).
func CancellationReason(err error, i int) (string, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || i < 0 || i >= len(tce.CancellationReasons) {
		return "", false
	}
	return aws.ToString(tce.CancellationReasons[i].Code), true
}

// mapCancellation maps the cancellation reasons of a commit, by index: the
// inbox action (last) failing its condition wins (onInbox decides what it
// means), then the first domain write whose condition failed (a
// *GuardError with its judge's verdict, or Retry when its judge finds no
// failing guard), then conflicts and throttling (retryable), then
// validation (terminal).
func (c *Committer) mapCancellation(err error, writes []Write, onInbox func(old map[string]types.AttributeValue) error) error {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		if failure.IsValidation(err) {
			return failure.Wrap(failure.Terminal, failure.CodeInvalidTransaction, err)
		}
		return fmt.Errorf("mutation: commit: %w", err)
	}
	reasons := tce.CancellationReasons
	inboxIdx := len(writes)
	if inboxIdx < len(reasons) && aws.ToString(reasons[inboxIdx].Code) == reasonConditionalCheck {
		return onInbox(reasons[inboxIdx].Item)
	}
	var retryable, invalid string
	for i, r := range reasons {
		switch code := aws.ToString(r.Code); code {
		case reasonConditionalCheck:
			if i < len(writes) {
				return &GuardError{Index: i, Verdict: writes[i].verdict(r.Item), Old: r.Item}
			}
		case reasonTransactionConflict:
			retryable = failure.CodeTransactionConflict
		case reasonThrottling, reasonProvisionedThroughput, "RequestLimitExceeded":
			if retryable == "" {
				retryable = failure.CodeThrottled
			}
		case reasonValidation:
			invalid = aws.ToString(r.Message)
		case reasonNone, "":
		default:
			if retryable == "" {
				retryable = failure.CodeServiceUnavailable
			}
		}
	}
	switch {
	case retryable != "":
		return failure.Wrap(failure.Retryable, retryable, err)
	case invalid != "":
		return failure.Wrap(failure.Terminal, failure.CodeInvalidTransaction, err)
	default:
		return failure.Wrap(failure.Retryable, failure.CodeTransactionConflict, err)
	}
}

func (c *Committer) complete(l inbox.Lease, now time.Time, done Completion) inbox.Transition {
	return c.cfg.Store.Complete(l, now, done.Outcome, done.ResultRef)
}

// Supersede completes the record with outcome (default SUPERSEDED) and no
// domain writes, fenced by l's token: one UpdateItem. It returns nil or
// *inbox.LeaseLostError (check Completed) or the SDK's error.
func (c *Committer) Supersede(ctx context.Context, l inbox.Lease, outcome string) error {
	if outcome == "" {
		outcome = inbox.OutcomeSuperseded
	}
	return c.fencedUpdate(ctx, l, c.complete(l, c.cfg.Now(), Completion{Outcome: outcome}))
}

// Fail records the business failure f of the attempt l runs, fenced by l's
// token, and counts the attempt in the same write (the only place one is
// counted): FAILED_RETRYABLE (a later delivery takes over) or
// FAILED_TERMINAL (never re-run), with code, message, time and an
// attention-index entry. It returns nil — also when an earlier try of the
// same write applied and its response was lost —, *inbox.LeaseLostError
// (check Completed: an ambiguous commit that did apply shows up here as
// COMPLETED) or the SDK's error.
func (c *Committer) Fail(ctx context.Context, l inbox.Lease, f *failure.Error) error {
	now := c.cfg.Now()
	status := inbox.StatusFailedRetryable
	if f.IsTerminal() {
		status = inbox.StatusFailedTerminal
	}
	err := c.fencedUpdate(ctx, l, c.cfg.Store.Fail(l, now, status, f.Code, truncate(f.Message, maxFailureMessage)))
	var lost *inbox.LeaseLostError
	if errors.As(err, &lost) && lost.Ours(status, f.Code) {
		return nil
	}
	return err
}

// Release gives the lease l back without an outcome (inbox.Release): f
// is the infrastructure trouble or shutdown that ended the attempt. No
// attempt was charged, so nothing is refunded: the release only lets the
// next delivery take the work over without waiting for the lease to
// expire, and one that fails costs nothing but that wait. It returns nil,
// *inbox.LeaseLostError (the record moved on — or an earlier try of this
// release applied and its response was lost), or the SDK's error.
func (c *Committer) Release(ctx context.Context, l inbox.Lease, f *failure.Error) error {
	return c.fencedUpdate(ctx, l, c.cfg.Store.Release(l, c.cfg.Now(), f.Code, truncate(f.Message, maxFailureMessage)))
}

// FailFresh records the business failure f of a fused run, whose work has
// no record yet (rec, from inbox.NewRecord): one conditional PutItem
// creates it failed, attempt 1 counted. It returns nil (also when an
// earlier try of the same write applied), *ExistsError when another
// delivery created the record meanwhile, or the SDK's error.
func (c *Committer) FailFresh(ctx context.Context, rec *inbox.Record, f *failure.Error) error {
	status := inbox.StatusFailedRetryable
	if f.IsTerminal() {
		status = inbox.StatusFailedTerminal
	}
	return c.create(ctx, rec, c.cfg.Store.FailedRecord(rec, c.cfg.Now(), status, f.Code, truncate(f.Message, maxFailureMessage)))
}

// SupersedeFresh completes a fused run's work, which has no record yet,
// with outcome and no domain write: one conditional PutItem creates the
// record COMPLETED. Returns as FailFresh.
func (c *Committer) SupersedeFresh(ctx context.Context, rec *inbox.Record, outcome string) error {
	return c.create(ctx, rec, c.cfg.Store.CompletedRecord(rec, c.cfg.Now(), outcome, ""))
}

// create writes r, the first state of fresh's record, if no record exists.
func (c *Committer) create(ctx context.Context, fresh, r *inbox.Record) error {
	cond, err := c.createOnly()
	if err != nil {
		return err
	}
	_, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(c.cfg.Store.Table), Item: c.cfg.Store.Encode(r),
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		existing, derr := c.cfg.Store.Decode(ccf.Item)
		if derr != nil {
			return fmt.Errorf("mutation: create %s/%s: the record exists but does not decode: %w", fresh.Key, fresh.MessageType, derr)
		}
		if existing.LeaseToken == fresh.LeaseToken && existing.Status == r.Status {
			return nil // an earlier try of this write applied; its response was lost
		}
		return &ExistsError{Record: existing}
	}
	if err != nil {
		return fmt.Errorf("mutation: create %s/%s: %w", fresh.Key, fresh.MessageType, err)
	}
	return nil
}

// ErrChanged is the sentinel of *ChangedError.
var ErrChanged = errors.New("mutation: record changed since it was read")

// ChangedError: a transition decided on a record as read found it changed
// (another worker got there first); Record is the record as it is now (nil
// when it is gone).
type ChangedError struct{ Record *inbox.Record }

func (e *ChangedError) Error() string {
	if e.Record == nil {
		return "mutation: the record changed since it was read: it is gone"
	}
	return fmt.Sprintf("mutation: the record %s/%s changed since it was read: it is %s", e.Record.Key, e.Record.MessageType, e.Record.Status)
}

// Unwrap returns ErrChanged.
func (e *ChangedError) Unwrap() error { return ErrChanged }

// End records rec, decided on without holding it, as FAILED_TERMINAL with
// f's code and message: the attempts, the retry window or the takeovers of
// its expired leases are used up (gate.Exhausted). It is fenced on the
// record as read (inbox.Unchanged; staleBefore is the lease policy's bound
// at the decision). It returns nil, *ChangedError, or the SDK's error.
func (c *Committer) End(ctx context.Context, rec *inbox.Record, f *failure.Error, staleBefore int64) error {
	t := c.cfg.Store.End(rec, c.cfg.Now(), f.Code, truncate(f.Message, maxFailureMessage), staleBefore)
	in, err := t.UpdateItem(c.cfg.Store.Table, c.cfg.Store.Key(rec.Key, rec.MessageType))
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	_, err = c.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		now, _ := c.cfg.Store.Decode(ccf.Item)
		if now != nil && now.Status == inbox.StatusFailedTerminal && now.FailureCode == f.Code {
			return nil // an earlier try of this End applied; its response was lost
		}
		return &ChangedError{Record: now}
	}
	if err != nil {
		return fmt.Errorf("mutation: end %s/%s: %w", rec.Key, rec.MessageType, err)
	}
	return nil
}

// Rejection describes a message refused before it could be filed under its
// idempotency key: an invalid envelope, an unknown message type, a replay
// or a deferral the worker will not run, or a hash mismatch (whose key
// already holds other work, which stays untouched).
type Rejection struct {
	SQSMessageID string
	Code         string
	Message      string
	// Whatever of the work's identity could be read (may be empty). With
	// the aggregate, the rejection is listed in the aggregate's history.
	Key           string
	MessageType   string
	RequestHash   string
	AggregateType string
	AggregateID   string
	CorrelationID string
}

// maxRejectionMessage bounds a rejection's failureMessage: a decoder error
// may quote what it refused.
const maxRejectionMessage = 512

// Reject records r as a FAILED_TERMINAL rejection record keyed by the SQS
// message id, in the attention index, so every refused message is accounted
// for in the inbox. Recording the same message again is a no-op.
func (c *Committer) Reject(ctx context.Context, r *Rejection) error {
	s := c.cfg.Store
	now := c.cfg.Now()
	ts := inbox.FormatTime(now)
	rec := &inbox.Record{
		Key: r.Key, MessageType: r.MessageType, RequestHash: r.RequestHash, SQSMessageID: r.SQSMessageID,
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, CorrelationID: r.CorrelationID,
		Status: inbox.StatusFailedTerminal, FailureCode: r.Code, FailureMessage: truncate(r.Message, maxRejectionMessage),
		FirstSeenAt: ts, FailedAt: ts, TTL: s.TTL.For(inbox.StatusFailedTerminal, now),
		GSI2PK: inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(r.SQSMessageID, s.AttentionShards)),
		GSI2SK: ts,
	}
	// Listed in the aggregate's history when its keys fit DynamoDB's
	// limits (a rejection may be about an oversized field).
	if pk, sk := inbox.AggregatePK(r.AggregateType, r.AggregateID), inbox.AggregateSK(ts, r.MessageType, r.Key); r.AggregateType != "" && r.AggregateID != "" &&
		len(pk) <= 2048 && len(sk) <= 1024 {
		rec.GSI1PK, rec.GSI1SK = pk, sk
	}
	item := s.Encode(rec)
	for k, v := range s.RejectionKey(r.SQSMessageID) {
		item[k] = v
	}
	cond, err := c.createOnly()
	if err != nil {
		return err
	}
	_, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.Table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("mutation: record rejection of %s: %w", r.SQSMessageID, err)
	}
	return nil
}

// createOnly is the condition of a write that creates an inbox record:
// none is there yet (its partition key attribute is absent).
func (c *Committer) createOnly() (expression.Expression, error) {
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(c.cfg.Store.Layout.PartitionKey))).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("mutation: build condition: %w", err)
	}
	return cond, nil
}

// fencedUpdate sends a transition of the record l holds as one UpdateItem.
func (c *Committer) fencedUpdate(ctx context.Context, l inbox.Lease, t inbox.Transition) error {
	in, err := t.UpdateItem(c.cfg.Store.Table, c.cfg.Store.Key(l.Key, l.MessageType))
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	_, err = c.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return c.cfg.Store.LostLease(l, ccf.Item)
	}
	if err != nil {
		return fmt.Errorf("mutation: update %s/%s: %w", l.Key, l.MessageType, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
