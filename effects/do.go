package effects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/calltime"
	"github.com/ddbworker/ddbworker/internal/hooks"
)

// CodeRefused is the failure code of a refusal whose own code is not a
// valid failure code.
const CodeRefused = "EFFECT_REFUSED"

// Call describes one effect of a work item.
type Call struct {
	// Name names the effect within its work item ("charge", "receipt"):
	// one work item's effects have distinct names. 1..64 of [A-Za-z0-9._-].
	Name string
	// Provider and Operation name the outside system and what is asked of
	// it ("payments", "charge"). They are metric labels: constants of the
	// handler's code, never data. 1..64 of [A-Za-z0-9._-].
	Provider, Operation string
	// Request is what is sent to the provider (any value encoding/json
	// marshals). Its hash, with Provider and Operation, is recorded: the
	// same effect key with another request is EFFECT_REQUEST_MISMATCH.
	Request any
	// Idempotent says the provider deduplicates by the key it is given: a
	// call whose outcome is unclear is simply made again with the same key.
	// Without it, an unclear outcome makes the effect UNKNOWN until an
	// operator resolves it.
	Idempotent bool
}

// Outcome is a provider's answer to a call that did the effect.
type Outcome struct {
	// Ref is the provider's reference of what it did (a charge id, a
	// message id). Required: a provider that returns none gets a stable one
	// of the handler's choosing (e.g. the key). At most 1 KiB.
	Ref string
	// Result is anything else worth keeping (small JSON, a status). At
	// most 4 KiB.
	Result string
}

// CallFunc calls the provider with key as its idempotency key. It returns
// the Outcome when the provider did the effect; Refused or NotDone when the
// provider answered that it did not; any other error when the outcome is
// unclear (a timeout, a lost response, a 5xx after sending).
type CallFunc func(ctx context.Context, key string) (Outcome, error)

// Do performs the effect c of the work item msg at most once, as far as the
// log can tell. It reads the log first:
//
//   - COMPLETED: returns the recorded effect; fn is not called.
//   - FAILED: returns the recorded refusal (terminal, its code); fn is not
//     called.
//   - UNKNOWN: terminal EFFECT_OUTCOME_UNKNOWN until an operator resolves it.
//   - another request under the key: terminal EFFECT_REQUEST_MISMATCH, the
//     record untouched.
//   - STARTED under a live call lease of the same attempt: retryable
//     EFFECT_IN_PROGRESS. STARTED left by an earlier attempt or with its
//     call lease over (a crash before, during or after the call): an
//     idempotent provider is called again with the same key; any other is
//     marked UNKNOWN (terminal EFFECT_OUTCOME_UNKNOWN).
//   - none, or NOT_DONE: claims it and calls fn.
//
// The claim (STARTED, calls + 1) commits only while the work's inbox record
// is PROCESSING under msg's attempt with its lease unexpired, so a worker
// whose lease was taken over never starts a call. fn gets a context bounded
// by Config.CallTimeout and the effect key. Its answer is written at once,
// fenced on the claim, and even when ctx has ended: COMPLETED with the
// reference, FAILED with the refusal, NOT_DONE, or — unclear — STARTED
// again (idempotent: the next attempt calls again with the same key) or
// UNKNOWN.
//
// On success the Effect is COMPLETED: add Effect.Write to the handler's
// Result. Errors are *EffectError values carrying the failure the worker
// records (return them as they are) — except errors of DynamoDB itself,
// returned wrapped for the worker to classify (throttling is
// infrastructure trouble, not an attempt).
func (l *Log) Do(ctx context.Context, msg *ddbworker.Message, c Call, fn CallFunc) (*Effect, error) {
	if err := validCall(msg, c, fn); err != nil {
		return nil, err
	}
	key := Key(msg.Type(), msg.Key(), c.Name)
	hash, err := requestHash(c.Provider, c.Operation, c.Request)
	if err != nil {
		return nil, effectErr(failure.Terminal, CodeInvalidCall, key, nil, ErrInvalidCall, err, err.Error())
	}
	lbl := labels{c.Provider, c.Operation}
	fail := hooks.From(ctx).Failpoint
	if fail == nil {
		fail = func(string) {}
	}
	const maxRounds = 4 // each round reads the record once; races are rare
	var lastErr error
	for round := 0; round < maxRounds; round++ {
		rec, err := l.get(ctx, key)
		if err != nil {
			return nil, err
		}
		now := l.cfg.Now()
		act := decide(rec, hash, c.Idempotent, msg, now)
		switch act {
		case actMismatch:
			l.metrics.mismatches.WithLabelValues(lbl.values()...).Inc()
			l.log.Error("ALERT effect request mismatch: the effect key holds another request; the record is untouched",
				"effectKey", key, "provider", c.Provider, "operation", c.Operation, "recordedHash", rec.RequestHash, "requestHash", hash)
			return rec, effectErr(failure.Terminal, CodeRequestMismatch, key, rec, ErrRequestMismatch, nil,
				fmt.Sprintf("effect %q of this work was recorded for another request (%s %s, hash %.12s…, now %.12s…)", c.Name, rec.Provider, rec.Operation, rec.RequestHash, hash))
		case actDone:
			l.metrics.answered.WithLabelValues(c.Provider, c.Operation, string(rec.Status)).Inc()
			return rec, nil
		case actRefused:
			l.metrics.answered.WithLabelValues(c.Provider, c.Operation, string(rec.Status)).Inc()
			return rec, refusedErr(key, rec)
		case actUnknown:
			l.metrics.answered.WithLabelValues(c.Provider, c.Operation, string(rec.Status)).Inc()
			return rec, unknownErr(key, rec)
		case actInProgress:
			l.metrics.answered.WithLabelValues(c.Provider, c.Operation, "IN_PROGRESS").Inc()
			return rec, effectErr(failure.Retryable, CodeInProgress, key, rec, ErrInProgress, nil,
				fmt.Sprintf("a call of attempt %d is in progress until %s", rec.WorkAttempt, inbox.FormatTime(rec.CallExpiresAt)))
		case actMarkUnknown:
			// The call may still be in progress (its worker lost the work's
			// lease, not necessarily its call): the record keeps its call
			// lease, so that an operator cannot resolve it before the call is
			// over (a late answer still settles it).
			marked, err := l.markUnknown(ctx, rec, "a call was started (attempt "+strconv.Itoa(rec.WorkAttempt)+") and never answered: the process crashed or lost its lease during it", true)
			if errors.Is(err, errMoved) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return marked, unknownErr(key, marked)
		case actClaim:
		}
		claimed, err := l.claim(ctx, msg, c, key, hash, newToken(), rec, now)
		if errors.Is(err, errMoved) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		fail(hooks.EffectBeforeCall)
		eff, err := l.call(ctx, c, lbl, key, claimed, fn, fail)
		if err == nil {
			fail(hooks.EffectBeforeCommit)
		}
		return eff, err
	}
	return nil, effectErr(failure.Retryable, CodeLeaseLost, key, nil, ErrLeaseLost, errors.Join(l.lostLease(msg.Key(), msg.Type(), msg.LeaseToken, msg.Attempt, nil), lastErr),
		"the effect record kept changing under this attempt")
}

// lostLease is the cause of an EFFECT_LEASE_LOST failure: the inbox's own
// *inbox.LeaseLostError for the work's lease (old is the inbox record as a
// fence found it, nil when not read). Through it the worker takes the
// failure for what it is, a lost lease — never a business attempt: the
// call was not made, and the work's record is not this attempt's to fail.
func (l *Log) lostLease(workKey, messageType, token string, attempt int, old map[string]types.AttributeValue) *inbox.LeaseLostError {
	return l.store.inbox.LostLease(inbox.Lease{Key: workKey, MessageType: messageType, Token: token, Attempt: attempt}, old)
}

func validCall(msg *ddbworker.Message, c Call, fn CallFunc) error {
	var problems []error
	if msg == nil || msg.Envelope == nil {
		problems = append(problems, errors.New("Do needs the handler's message"))
	}
	if fn == nil {
		problems = append(problems, errors.New("Do needs a call function"))
	}
	for _, f := range []struct{ name, v string }{{"Name", c.Name}, {"Provider", c.Provider}, {"Operation", c.Operation}} {
		if !validName(f.v) {
			problems = append(problems, fmt.Errorf("the Call's %s %q must be 1..64 characters of [A-Za-z0-9._-]", f.name, f.v))
		}
	}
	if err := errors.Join(problems...); err != nil {
		key := ""
		if msg != nil && msg.Envelope != nil {
			key = Key(msg.Type(), msg.Key(), c.Name)
		}
		return effectErr(failure.Terminal, CodeInvalidCall, key, nil, ErrInvalidCall, err, err.Error())
	}
	return nil
}

func refusedErr(key string, rec *Effect) error {
	code := rec.FailureCode
	if !isCode(code) {
		code = CodeRefused
	}
	return effectErr(failure.Terminal, code, key, rec, ErrRefused, nil, fmt.Sprintf("%s %s refused: %s", rec.Provider, rec.Operation, rec.FailureMessage))
}

func unknownErr(key string, rec *Effect) error {
	return effectErr(failure.Terminal, CodeOutcomeUnknown, key, rec, ErrOutcomeUnknown, nil, fmt.Sprintf(
		"%s %s (no idempotency keys) may or may not have happened: resolve it (`ddbworker effects resolve %s --completed --ref R | --not-done --reason …`), then reopen the work",
		rec.Provider, rec.Operation, key))
}

// action is Do's decision from the record as read.
type action int

const (
	actClaim       action = iota + 1 // claim and call
	actDone                          // COMPLETED: answer from the log
	actRefused                       // FAILED: answer from the log
	actUnknown                       // UNKNOWN: an operator must resolve it
	actInProgress                    // another claim's call is in progress
	actMarkUnknown                   // STARTED, abandoned, provider not idempotent
	actMismatch                      // another request under the key
)

// decide is Do's decision table: pure, from the record as read (nil: none).
func decide(rec *Effect, hash string, idempotent bool, msg *ddbworker.Message, now time.Time) action {
	if rec == nil {
		return actClaim
	}
	if rec.RequestHash != hash {
		return actMismatch
	}
	switch rec.Status {
	case StatusCompleted:
		return actDone
	case StatusFailed:
		return actRefused
	case StatusUnknown:
		return actUnknown
	case StatusNotDone:
		return actClaim
	}
	// STARTED. Its call is over when its lease ended, or when it belongs to
	// another lease on the work (whose holder crashed or was fenced out:
	// this one holds the work now) — told by the lease token, or, on
	// records written before 0.9, by an earlier attempt.
	over := !now.Before(rec.CallExpiresAt) || rec.WorkAttempt < msg.Attempt ||
		(rec.WorkLease != "" && msg.LeaseToken != "" && rec.WorkLease != msg.LeaseToken)
	switch {
	case !over:
		return actInProgress
	case !idempotent:
		return actMarkUnknown
	}
	return actClaim
}

// errMoved: a conditional write found the record changed since it was
// read; read again.
var errMoved = errors.New("effects: record moved")

func (l *Log) get(ctx context.Context, key string) (*Effect, error) {
	done := calltime.Start(ctx)
	out, err := l.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.store.table), Key: l.store.key(key), ConsistentRead: aws.Bool(true)})
	done()
	if err != nil {
		return nil, fmt.Errorf("effects: read %s: %w", key, err)
	}
	return l.store.decode(out.Item)
}

// claim writes STARTED under token, fenced on the record as read (absent,
// NOT_DONE, or an abandoned STARTED) and on the work's inbox lease, in one
// transaction.
func (l *Log) claim(ctx context.Context, msg *ddbworker.Message, c Call, key, hash, token string, rec *Effect, now time.Time) (*Effect, error) {
	s := l.store
	ts := inbox.FormatTime(now)
	callEnd := now.Add(l.cfg.CallTimeout + l.cfg.Skew)
	e := &Effect{Key: key, Name: c.Name, WorkKey: msg.Key(), MessageType: msg.Type(), Provider: c.Provider, Operation: c.Operation,
		Idempotent: c.Idempotent, RequestHash: hash, HashVersion: hashVersion, Status: StatusStarted, Calls: 1,
		WorkAttempt: msg.Attempt, WorkLease: msg.LeaseToken, ClaimToken: token, CallExpiresAt: time.UnixMilli(callEnd.UnixMilli()).UTC(),
		CreatedAt: ts, StartedAt: ts, TTL: now.Add(s.ttl).Unix(), st: &l.store}
	var cond expression.ConditionBuilder
	if rec == nil {
		cond = expression.AttributeNotExists(expression.Name(s.inbox.Layout.PartitionKey))
	} else {
		e.Calls = rec.Calls + 1
		e.CreatedAt = rec.CreatedAt
		e.ProviderRef, e.LastError, e.Resolution, e.ResolvedAt, e.ResolvedBy, e.ResolveReason = rec.ProviderRef, rec.LastError, rec.Resolution, rec.ResolvedAt, rec.ResolvedBy, rec.ResolveReason
		cond = unchanged(rec)
	}
	upd := expression.Set(expression.Name(attr.EffectKey), expression.Value(key)).
		Set(expression.Name(attr.EffectName), expression.Value(c.Name)).
		Set(expression.Name(attr.WorkKey), expression.Value(e.WorkKey)).
		Set(expression.Name(attr.MessageType), expression.Value(e.MessageType)).
		Set(expression.Name(attr.EffectProvider), expression.Value(c.Provider)).
		Set(expression.Name(attr.EffectOperation), expression.Value(c.Operation)).
		Set(expression.Name(attr.Idempotent), expression.Value(c.Idempotent)).
		Set(expression.Name(attr.RequestHash), expression.Value(hash)).
		Set(expression.Name(attr.HashVersion), expression.Value(hashVersion)).
		Set(expression.Name(attr.Status), expression.Value(string(StatusStarted))).
		Set(expression.Name(attr.ClaimToken), expression.Value(token)).
		Set(expression.Name(attr.CallExpiresAt), expression.Value(callEnd.UnixMilli())).
		Set(expression.Name(attr.WorkAttempt), expression.Value(msg.Attempt)).
		Set(expression.Name(attr.WorkLease), expression.Value(msg.LeaseToken)).
		Set(expression.Name(attr.Calls), expression.Value(e.Calls)).
		Set(expression.Name(attr.CreatedAt), expression.Value(e.CreatedAt)).
		Set(expression.Name(attr.StartedAt), expression.Value(ts)).
		Set(expression.Name(s.inbox.Layout.TTL), expression.Value(e.TTL)).
		Remove(expression.Name(s.inbox.Layout.AttentionPK)).
		Remove(expression.Name(s.inbox.Layout.AttentionSK))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("effects: build claim: %w", err)
	}
	fence := expression.Name(attr.Status).Equal(expression.Value(string(inbox.StatusProcessing))).
		And(expression.Name(attr.LeaseExpiresAt).GreaterThan(expression.Value(now.UnixMilli())))
	if msg.LeaseToken != "" {
		// The lease itself: new at every acquisition, never reused.
		fence = fence.And(expression.Name(attr.LeaseToken).Equal(expression.Value(msg.LeaseToken)))
	} else {
		// No token to fence on: the attempt, as the record counts it (the
		// failed attempts before this one).
		failedBefore := expression.Name(attr.Attempts).Equal(expression.Value(msg.Attempt - 1))
		if msg.Attempt <= 1 {
			failedBefore = expression.AttributeNotExists(expression.Name(attr.Attempts)).Or(failedBefore)
		}
		fence = fence.And(failedBefore)
	}
	fex, err := expression.NewBuilder().WithCondition(fence).Build()
	if err != nil {
		return nil, fmt.Errorf("effects: build inbox fence: %w", err)
	}
	done := calltime.Start(ctx)
	_, err = l.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String(token),
		TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String(s.table), Key: s.key(key), UpdateExpression: ex.Update(),
				ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(s.inbox.Table), Key: s.inbox.Key(msg.Key(), msg.Type()),
				ConditionExpression: fex.Condition(), ExpressionAttributeNames: fex.Names(), ExpressionAttributeValues: fex.Values(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		},
	})
	done()
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		reasons := tce.CancellationReasons
		if len(reasons) == 2 && aws.ToString(reasons[1].Code) == "ConditionalCheckFailed" {
			if len(reasons[1].Item) == 0 {
				return nil, effectErr(failure.Terminal, CodeNotLeased, key, rec, ErrNotLeased, nil,
					"the work has no inbox record: effects need the gated path (a route registered without Fused), inside a worker")
			}
			held, _ := s.inbox.Decode(reasons[1].Item)
			msgText := "the work's inbox lease is not this attempt's any more"
			if held != nil {
				msgText = fmt.Sprintf("the work's inbox record is %s with %d failed attempts (this is attempt %d): the lease was lost", held.Status, held.Attempts, msg.Attempt)
			}
			return nil, effectErr(failure.Retryable, CodeLeaseLost, key, rec, ErrLeaseLost,
				l.lostLease(msg.Key(), msg.Type(), msg.LeaseToken, msg.Attempt, reasons[1].Item), msgText)
		}
		if len(reasons) >= 1 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
			return nil, errMoved
		}
		if len(reasons) >= 1 && (aws.ToString(reasons[0].Code) == "TransactionConflict" || (len(reasons) == 2 && aws.ToString(reasons[1].Code) == "TransactionConflict")) {
			return nil, fmt.Errorf("%w: %w", errMoved, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("effects: claim %s: %w", key, err)
	}
	return e, nil
}

// unchanged is the condition that the record is still as read.
func unchanged(rec *Effect) expression.ConditionBuilder {
	return expression.Name(attr.Status).Equal(expression.Value(string(rec.Status))).
		And(expression.Name(attr.ClaimToken).Equal(expression.Value(rec.ClaimToken))).
		And(expression.Name(attr.RequestHash).Equal(expression.Value(rec.RequestHash)))
}

// byClaim is the condition of the claim holder's writes after its call:
// still its claim, and not settled by someone else (an operator may have
// marked it UNKNOWN meanwhile — the provider's answer still wins).
func byClaim(rec *Effect) expression.ConditionBuilder {
	return expression.Name(attr.ClaimToken).Equal(expression.Value(rec.ClaimToken)).
		And(expression.Name(attr.Status).In(expression.Value(string(StatusStarted)), expression.Value(string(StatusUnknown))))
}

// call runs fn under the claim rec and records its answer.
func (l *Log) call(ctx context.Context, c Call, lbl labels, key string, rec *Effect, fn CallFunc, fail func(string)) (*Effect, error) {
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	start := l.cfg.Now()
	out, callErr := safeCall(callCtx, fn, key)
	cancel()
	l.metrics.duration.WithLabelValues(lbl.values()...).Observe(l.cfg.Now().Sub(start).Seconds())
	fail(hooks.EffectAfterCall)

	// The answer is written even if the work's context has ended.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.WriteTimeout)
	defer wcancel()
	var ans *answer
	switch {
	case callErr == nil:
		if out.Ref == "" || len(out.Ref) > maxRefBytes || len(out.Result) > maxResultBytes {
			// The provider did it, but the answer cannot be kept as given:
			// the outcome is as unclear to the log as a lost response.
			callErr = fmt.Errorf("the call function's Outcome is invalid (Ref required, at most %d bytes; Result at most %d bytes): recorded as an unclear outcome", maxRefBytes, maxResultBytes)
			break
		}
		l.metrics.calls.WithLabelValues(c.Provider, c.Operation, "completed").Inc()
		done, err := l.settle(wctx, rec, StatusCompleted, func(u expression.UpdateBuilder, now string) expression.UpdateBuilder {
			u = u.Set(expression.Name(attr.ProviderRef), expression.Value(out.Ref)).
				Set(expression.Name(attr.CompletedAt), expression.Value(now))
			if out.Result != "" {
				u = u.Set(expression.Name(attr.EffectResult), expression.Value(out.Result))
			}
			return u
		})
		if err != nil && !errors.Is(err, errMoved) {
			// DynamoDB failed after the provider answered: the work's
			// transaction carries the completion (Write).
			l.metrics.deferred.WithLabelValues(lbl.values()...).Inc()
			l.log.Warn("effect completed, but its record could not be written: the work's commit carries it", "effectKey", key,
				"provider", c.Provider, "operation", c.Operation, "providerRef", out.Ref, "error", err.Error())
			p := *rec
			p.Status, p.ProviderRef, p.Result, p.Pending = StatusCompleted, out.Ref, out.Result, true
			p.CompletedAt = inbox.FormatTime(l.cfg.Now())
			return &p, nil
		}
		if err != nil {
			return nil, l.moved(wctx, key, rec, err)
		}
		return done, nil
	case errors.As(callErr, &ans) && !ans.notDone:
		l.metrics.calls.WithLabelValues(c.Provider, c.Operation, "refused").Inc()
		code := ans.code
		if !isCode(code) {
			code = CodeRefused
		}
		failed, err := l.settle(wctx, rec, StatusFailed, func(u expression.UpdateBuilder, now string) expression.UpdateBuilder {
			return u.Set(expression.Name(attr.FailureCode), expression.Value(code)).
				Set(expression.Name(attr.FailureMessage), expression.Value(truncate(ans.message, 1024))).
				Set(expression.Name(attr.FailedAt), expression.Value(now))
		})
		if err != nil {
			// Not recorded: the next attempt finds STARTED (an idempotent
			// provider is asked again and refuses again; any other becomes
			// UNKNOWN). This attempt still ends with the refusal.
			l.log.Warn("effect refused, but its record could not be written", "effectKey", key, "error", err.Error())
			p := *rec
			p.Status, p.FailureCode, p.FailureMessage = StatusFailed, code, ans.message
			return &p, refusedErr(key, &p)
		}
		return failed, refusedErr(key, failed)
	case errors.As(callErr, &ans) && ans.notDone:
		l.metrics.calls.WithLabelValues(c.Provider, c.Operation, "not_done").Inc()
		nd, err := l.settle(wctx, rec, StatusNotDone, func(u expression.UpdateBuilder, _ string) expression.UpdateBuilder {
			return u.Set(expression.Name(attr.LastError), expression.Value(truncate(ans.err.Error(), 1024)))
		})
		if err != nil {
			nd = rec
		}
		return nd, effectErr(failure.Retryable, CodeNotDone, key, nd, ErrNotDone, ans.err, truncate(ans.err.Error(), 1024))
	}
	// Unclear: it may have happened.
	l.metrics.calls.WithLabelValues(c.Provider, c.Operation, "unclear").Inc()
	if c.Idempotent {
		again, err := l.settle(wctx, rec, StatusStarted, func(u expression.UpdateBuilder, _ string) expression.UpdateBuilder {
			return u.Set(expression.Name(attr.LastError), expression.Value(truncate(callErr.Error(), 1024)))
		})
		if err != nil {
			again = rec
		}
		return again, effectErr(failure.Retryable, CodeCallFailed, key, again, ErrCallFailed, callErr,
			"the call ended without an answer (the next attempt calls again with the same key): "+truncate(callErr.Error(), 512))
	}
	marked, err := l.markUnknown(wctx, rec, truncate(callErr.Error(), 1024), false)
	if errors.Is(err, errMoved) {
		// Another attempt marked it already (or an answer settled it):
		// the record as it is now says.
		if now, gerr := l.get(wctx, key); gerr == nil && now != nil && now.Status == StatusUnknown {
			return now, unknownErr(key, now)
		}
		return nil, l.moved(wctx, key, rec, err)
	}
	if err != nil {
		// Not marked: the record is still STARTED (no alert, not listed as
		// UNKNOWN, with a TTL). Failing the work terminal now would leave it
		// so; retried, the next attempt finds it STARTED and marks it.
		return nil, fmt.Errorf("effects: %s: the call's outcome is unclear and marking it UNKNOWN failed (the next attempt marks it): %w", key, err)
	}
	return marked, unknownErr(key, marked)
}

// moved explains a settle that found the record no longer under the
// claim: another holder of the work claimed it (this one lost its lease).
func (l *Log) moved(ctx context.Context, key string, rec *Effect, err error) error {
	now, _ := l.get(ctx, key)
	return effectErr(failure.Retryable, CodeLeaseLost, key, now, ErrLeaseLost, errors.Join(l.lostLease(rec.WorkKey, rec.MessageType, rec.WorkLease, rec.WorkAttempt, nil), err),
		"the effect record left this claim during the call (another holder of the work claimed it)")
}

func safeCall(ctx context.Context, fn CallFunc, key string) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("effects: the call function panicked: %v", r)
		}
	}()
	return fn(ctx, key)
}

// settle writes the claim holder's answer: status plus what set adds,
// fenced by byClaim, and returns the record as written. A status of
// STARTED ends the call lease (the call is over, the outcome unclear).
func (l *Log) settle(ctx context.Context, rec *Effect, status Status, set func(expression.UpdateBuilder, string) expression.UpdateBuilder) (*Effect, error) {
	s := l.store
	now := l.cfg.Now()
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(status))).
		Set(expression.Name(attr.CallExpiresAt), expression.Value(0)).
		Set(expression.Name(s.inbox.Layout.TTL), expression.Value(now.Add(s.ttl).Unix())).
		Remove(expression.Name(s.inbox.Layout.AttentionPK)).
		Remove(expression.Name(s.inbox.Layout.AttentionSK))
	upd = set(upd, inbox.FormatTime(now))
	return l.update(ctx, rec.Key, upd, byClaim(rec))
}

// markUnknown turns a STARTED record into UNKNOWN (the attention index
// lists it; it never expires), fenced on its claim. keepCallLease leaves
// the claim's call lease in place (the call may still be in progress:
// Resolve waits for its end); otherwise the call is over and it ends.
func (l *Log) markUnknown(ctx context.Context, rec *Effect, why string, keepCallLease bool) (*Effect, error) {
	s := l.store
	ts := inbox.FormatTime(l.cfg.Now())
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(StatusUnknown))).
		Set(expression.Name(attr.UnknownAt), expression.Value(ts)).
		Set(expression.Name(attr.LastError), expression.Value(why))
	if !keepCallLease {
		upd = upd.Set(expression.Name(attr.CallExpiresAt), expression.Value(0))
	}
	upd = upd.Set(expression.Name(s.inbox.Layout.AttentionPK), expression.Value(attentionUnknown)).
		Set(expression.Name(s.inbox.Layout.AttentionSK), expression.Value(ts)).
		Remove(expression.Name(s.inbox.Layout.TTL))
	cond := expression.Name(attr.ClaimToken).Equal(expression.Value(rec.ClaimToken)).
		And(expression.Name(attr.Status).Equal(expression.Value(string(StatusStarted))))
	e, err := l.update(ctx, rec.Key, upd, cond)
	if err == nil {
		l.metrics.unknown.WithLabelValues(rec.Provider, rec.Operation).Inc()
		l.log.Error("ALERT effect outcome unknown: a provider without idempotency keys may or may not have done it; resolve it with `ddbworker effects resolve`",
			"effectKey", rec.Key, "provider", rec.Provider, "operation", rec.Operation, "calls", rec.Calls, "why", why)
	}
	return e, err
}

// update applies one conditional UpdateItem and returns the record as
// written; errMoved when the condition failed.
func (l *Log) update(ctx context.Context, key string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) (*Effect, error) {
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("effects: build update: %w", err)
	}
	done := calltime.Start(ctx)
	out, err := l.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.store.table), Key: l.store.key(key),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ReturnValues: types.ReturnValueAllNew})
	done()
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, fmt.Errorf("%w: %s", errMoved, key)
	}
	if err != nil {
		return nil, fmt.Errorf("effects: write %s: %w", key, err)
	}
	return l.store.decode(out.Attributes)
}

func isCode(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
