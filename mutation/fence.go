package mutation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
)

// The attributes of the fence a single-write commit records in the domain
// item, beside the version the write sets: which work set that version,
// named as the inbox names work — by idempotency key and message type
// (its record is IDEMP#key, WORKER#type), so that two message types'
// work under one key is two works here too. There is one fence per
// version attribute (FenceKeyAttr, FenceTypeAttr, FenceHashAttr), so that
// routes guarding one item on different version attributes (a case's
// stageVersion and its noteVersion) do not overwrite each other's.
const (
	// FenceKeyPrefix, followed by a version attribute's name, names the
	// attribute that holds the idempotency key of the work that set that
	// version attribute.
	FenceKeyPrefix = "ddbworkerKey_"
	// FenceTypePrefix, followed by a version attribute's name, names the
	// attribute that holds that work's message type. A fence written
	// before fences named the type has none: see Fenced.
	FenceTypePrefix = "ddbworkerType_"
	// FenceHashPrefix, followed by a version attribute's name, names the
	// attribute that holds that work's request hash (its stored form).
	FenceHashPrefix = "ddbworkerHash_"
)

// FenceKeyAttr is the attribute that holds the idempotency key of the work
// that set versionAttr: FenceKeyPrefix + versionAttr.
func FenceKeyAttr(versionAttr string) string { return FenceKeyPrefix + versionAttr }

// FenceTypeAttr is the attribute that holds the message type of the work
// that set versionAttr: FenceTypePrefix + versionAttr.
func FenceTypeAttr(versionAttr string) string { return FenceTypePrefix + versionAttr }

// FenceHashAttr is the attribute that holds the request hash of the work
// that set versionAttr: FenceHashPrefix + versionAttr.
func FenceHashAttr(versionAttr string) string { return FenceHashPrefix + versionAttr }

// Fence is what a write guarded by a version (ddbworker.NewerVersion:
// "the item's Attr is absent or lower than Version"; ddbworker.NewerThan:
// "… lower than Value", a timestamp) tells a single-write commit: the
// version, and the write rendered again with more attributes set.
// ddbworker.Write.Mutation fills it for a Put or Update with exactly one
// such guard; it is nil otherwise.
type Fence struct {
	// Attr is the version attribute the guard reads.
	Attr string
	// Version is the version the write sets: the guard holds below it
	// (NewerVersion; 0 when Value is set).
	Version int64
	// Value, when set, is the value the write sets Attr to instead of
	// Version (NewerThan: a timestamp), and Compare compares an item's
	// Attr with it as DynamoDB's < does (ok false when absent or not
	// comparable). Unlike a version, such a value may be other work's
	// too (two events of one instant): the item at the write's own value
	// set by other work is the guard's to judge (superseded by default),
	// not a key reused.
	Value   types.AttributeValue
	Compare func(have types.AttributeValue) (c int, ok bool)
	// Render renders the write again with m: it also sets the string
	// attributes of m.Set and sets Attr to Version (which the handler may
	// have set to Version itself), and its condition also requires
	// m.Require. It refuses a write that sets Attr otherwise or touches an
	// attribute of m.Set.
	Render func(m Marks) (types.TransactWriteItem, error)
}

// Marks is what Fenced has Fence.Render add to a write: the fence it
// sets, and the condition that the fence does not name this work already.
type Marks struct {
	// Set are string attributes the write also sets.
	Set map[string]string
	// Require is a condition the write's condition also requires (ANDed
	// with its guards'); Holds is the same condition read on an item as
	// it was. Fenced's judge reads the fence before any guard, so Holds
	// only keeps the rendered write's own judge honest.
	Require expression.ConditionBuilder
	Holds   func(old map[string]types.AttributeValue) bool
}

// Stamp is the work a single-write commit fences its write with: the
// inbox's identity of it (key and message type) and its request hash.
type Stamp struct {
	// Key is the work's idempotency key.
	Key string
	// Type is its message type: one key's work of two types is two
	// works, as in the inbox.
	Type string
	// Hash is its request hash, as the inbox would store it.
	Hash string
	// SameWork reports whether a stored request hash is this work's
	// (comparing like with like across hash versions). Nil: equality.
	SameWork func(stored string) bool
}

func (s Stamp) same(stored string) bool {
	if s.SameWork != nil {
		return s.SameWork(stored)
	}
	return stored == s.Hash
}

// ErrNotSingleWrite is the refusal of a single-write route's result that
// is not one version-guarded Put or Update.
var ErrNotSingleWrite = errors.New("mutation: a single-write route's result must be one Put or Update guarded by ddbworker.NewerVersion or ddbworker.NewerThan")

// Fenced renders the one write of a single-write route's result with its
// fence — the fence of its version attribute f.Attr: the write also sets
// FenceKeyAttr(f.Attr), FenceTypeAttr(f.Attr) and FenceHashAttr(f.Attr) to
// s, and f.Attr to its version, and its condition also requires that this
// fence does not name s's work: s's key with s's type, or with no type (a
// fence written before fences named the type: it may be this work's),
//
//	attribute_not_exists(key) OR key <> s.Key OR (attribute_exists(type) AND type <> s.Type)
//
// — so that a work applies at most once, whatever the version its
// messages carry, while another message type's work under the same key is
// other work, as in the inbox. Its judge reads that fence first:
//
//   - the fence names this work with its request hash: Duplicate, it
//     applied already (whatever the item's version now: a lost response's
//     retry, a redelivery). A fence with no type counts: the request hash
//     covers the message type, so the same hash is the same work;
//   - the fence names this work with another request hash: Fail with
//     IDEMPOTENCY_HASH_MISMATCH (the key was reused for other work). A
//     fence with no type and another hash is this too: it may be another
//     type's work under the key, or the key reused, and the fence cannot
//     tell which — refusing never applies work twice, and the first write
//     of this code to the item ends the doubt;
//
// and otherwise the item's version, when it is not below the write's
// (its version guard failed):
//
//   - the write's own version, set by this key's work of another message
//     type: the write's own judge decides (its version guard's policy,
//     Supersede by default), as on the gated route, where each type has
//     its own inbox record and the second meets the version guard;
//   - the write's own version, set by other work (another key, or no
//     fence): Fail with IDEMPOTENCY_HASH_MISMATCH;
//   - a newer version: Supersede — this delivery applies nothing because
//     the item holds a newer version already. The fence names only the
//     work of the item's newest version, so a work that applied earlier
//     and was overtaken is superseded here too: Supersede means "not
//     applied by this delivery", not "never applied"; and a key reused
//     for other work is caught only while the fence still names it.
//
// Otherwise (the fence is not this work's and the version guard held:
// another guard failed) the write's own judge decides. A result of another
// shape — more than one write, a Delete, a Check, a Raw write, a write
// without exactly one version guard — is a terminal INVALID_HANDLER_RESULT
// wrapping ErrNotSingleWrite (so is no write at all: the worker does not
// fence a result with no write, it completes it without a call).
func Fenced(writes []Write, s Stamp) (Write, error) {
	refuse := func(why string) (Write, error) {
		return Write{}, failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("%w: %s", ErrNotSingleWrite, why))
	}
	switch {
	case len(writes) != 1:
		return refuse(fmt.Sprintf("it has %d writes", len(writes)))
	case writes[0].Fence == nil:
		return refuse("its write has no single version guard (or is a Delete, a Check or a Raw write)")
	}
	w := writes[0]
	f := w.Fence
	keyAttr, typeAttr, hashAttr := FenceKeyAttr(f.Attr), FenceTypeAttr(f.Attr), FenceHashAttr(f.Attr)
	key, typ := expression.Name(keyAttr), expression.Name(typeAttr)
	notNamed := expression.AttributeNotExists(key).Or(key.NotEqual(expression.Value(s.Key)),
		expression.AttributeExists(typ).And(typ.NotEqual(expression.Value(s.Type))))
	item, err := f.Render(Marks{
		Set:     map[string]string{keyAttr: s.Key, typeAttr: s.Type, hashAttr: s.Hash},
		Require: notNamed,
		Holds:   func(old map[string]types.AttributeValue) bool { return !names(old, f, s) },
	})
	if err != nil {
		return Write{}, failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("%w: %w", ErrNotSingleWrite, err))
	}
	own := w.Judge
	judge := func(old map[string]types.AttributeValue) (Verdict, bool) {
		if v, decided := fenceVerdict(old, f, s); decided {
			return v, true
		}
		if own != nil {
			return own(old)
		}
		return Verdict{}, false
	}
	return Write{Item: item, Judge: judge, Fence: f}, nil
}

// names reports whether old's fence of f.Attr names s's work: s's key,
// with s's type or with none (a fence written before fences named the
// type) — the item Fenced's condition refuses.
func names(old map[string]types.AttributeValue, f *Fence, s Stamp) bool {
	key, _ := old[FenceKeyAttr(f.Attr)].(*types.AttributeValueMemberS)
	typ, typed := old[FenceTypeAttr(f.Attr)]
	t, _ := typ.(*types.AttributeValueMemberS)
	return key != nil && key.Value == s.Key && (!typed || t != nil && t.Value == s.Type)
}

// fenceVerdict is the fence's judgement of old: decided is false while
// the fence does not name s's work and the item's version is below f's
// (the fence's part of the condition holds), and for the item's version
// set by s's key's work of another type (the version guard's to judge).
func fenceVerdict(old map[string]types.AttributeValue, f *Fence, s Stamp) (Verdict, bool) {
	key, _ := old[FenceKeyAttr(f.Attr)].(*types.AttributeValueMemberS)
	typ, _ := old[FenceTypeAttr(f.Attr)].(*types.AttributeValueMemberS)
	hash, _ := old[FenceHashAttr(f.Attr)].(*types.AttributeValueMemberS)
	c, have, known := f.compare(old[f.Attr])
	if names(old, f, s) {
		if hash != nil && s.same(hash.Value) {
			return Verdict{Kind: Duplicate}, true
		}
		at := fmt.Sprintf("the item's %s fence", f.Attr)
		if known {
			at = fmt.Sprintf("%s %s of the item", f.Attr, have)
		}
		if typ == nil {
			return Verdict{Kind: Fail, Code: failure.CodeHashMismatch,
				Message: fmt.Sprintf("%s was set by this key's work with another request hash, under a fence that does not name its message type: the key was reused for other work, or this is another type's work under the key, which that fence cannot tell", at)}, true
		}
		return Verdict{Kind: Fail, Code: failure.CodeHashMismatch,
			Message: fmt.Sprintf("%s was set by this key's work with another request hash: the key was reused for other work", at)}, true
	}
	if !known || c < 0 {
		return Verdict{}, false
	}
	if c == 0 {
		if key != nil && key.Value == s.Key {
			// This key's work of another type set this version: other
			// work, as its own inbox record makes it on the gated route,
			// where the version guard judges it.
			return Verdict{}, false
		}
		if f.Value != nil {
			// Another work's event of the same instant: not a version
			// two works cannot share, so the guard judges it, as on the
			// gated route.
			return Verdict{}, false
		}
		by := "work the item does not name"
		if key != nil {
			by = fmt.Sprintf("the work of key %q", key.Value)
		}
		return Verdict{Kind: Fail, Code: failure.CodeHashMismatch,
			Message: fmt.Sprintf("%s %d of the item was set by %s", f.Attr, f.Version, by)}, true
	}
	return Verdict{Kind: Supersede}, true
}

// compare compares the item's version attribute have with the write's:
// c < 0 below it, 0 the same, > 0 above; shown is have as a message shows
// it; known is false when have is absent or not comparable (a
// NewerVersion's attribute that is not an int64 number).
func (f *Fence) compare(have types.AttributeValue) (c int, shown string, known bool) {
	if f.Compare != nil {
		c, ok := f.Compare(have)
		if !ok {
			return 0, "", false
		}
		switch v := have.(type) {
		case *types.AttributeValueMemberS:
			return c, strconv.Quote(v.Value), true
		case *types.AttributeValueMemberN:
			return c, v.Value, true
		}
		return c, fmt.Sprintf("%T", have), true
	}
	n, _ := have.(*types.AttributeValueMemberN)
	if n == nil {
		return 0, "", false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return cmp.Compare(v, f.Version), strconv.FormatInt(v, 10), true
}

// CommitSingle applies a fenced write (Fenced) with one conditional
// UpdateItem or PutItem and no inbox record: the fence in the item is the
// work's idempotency record. A retry of a call whose response was lost
// finds its own fence (Duplicate). It returns nil, a *GuardError with the
// write's verdict on the item as it was (the fence's, or its own
// guards'), a terminal *failure.Error for a request DynamoDB refuses as
// invalid, or the SDK's error.
func (c *Committer) CommitSingle(ctx context.Context, w Write) error {
	if w.Fence == nil {
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, ErrNotSingleWrite)
	}
	all := types.ReturnValuesOnConditionCheckFailureAllOld
	var err error
	switch it := w.Item; {
	case it.Update != nil:
		u := it.Update
		_, err = c.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
			UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: all})
	case it.Put != nil:
		p := it.Put
		_, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item,
			ConditionExpression: p.ConditionExpression, ExpressionAttributeNames: p.ExpressionAttributeNames,
			ExpressionAttributeValues: p.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: all})
	default:
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("%w: a %s", ErrNotSingleWrite, "write that is neither a Put nor an Update"))
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return &GuardError{Index: 0, Verdict: w.verdict(ccf.Item), Old: ccf.Item}
	case failure.IsValidation(err):
		return failure.Wrap(failure.Terminal, failure.CodeInvalidTransaction, err)
	}
	return fmt.Errorf("mutation: single-write commit of %s: %w", aws.ToString(tableOf(w.Item)), err)
}

// CommitSingleGuarded applies a fenced write (Fenced) as CommitSingle
// does, in one TransactWriteItems that also checks that rec's work has no
// inbox record: the single-write route's fresh path, which must not apply
// work whose record says it is PROCESSING under a lease, FAILED_TERMINAL,
// or done — the record a message that comes back unmarked (SQS's own
// DLQ redrive, a producer's resend) cannot announce. One call, as
// CommitSingle; the transaction writes the item and checks the record, 2
// write units per started KB of each (4 for an item of at most 1 KB), where
// CommitSingle's write costs 1.
//
// It returns nil, *ExistsError with the record found (the delivery decides
// from it, under the gate), a *GuardError with the write's verdict on the
// item as it was, a *failure.Error (retryable cancellations, terminal for a
// request DynamoDB refuses as invalid), or the SDK's error. rec comes from
// inbox.NewRecord with LeaseToken set; the token keys the
// ClientRequestToken, so an SDK retry of a call whose response was lost is
// not applied twice (and after the token's 10 minutes, the write finds its
// own fence: Duplicate).
func (c *Committer) CommitSingleGuarded(ctx context.Context, rec *inbox.Record, w Write, attempt int) error {
	if w.Fence == nil || SingleOperation(w) == "" {
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, ErrNotSingleWrite)
	}
	cond, err := c.createOnly()
	if err != nil {
		return err
	}
	check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(c.cfg.Store.Table), Key: map[string]types.AttributeValue{
			c.cfg.Store.Layout.PartitionKey: &types.AttributeValueMemberS{Value: rec.PK},
			c.cfg.Store.Layout.SortKey:      &types.AttributeValueMemberS{Value: rec.SK},
		},
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	l := inbox.Lease{Key: rec.PK, MessageType: rec.MessageType, Token: rec.LeaseToken}
	_, err = c.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      []types.TransactWriteItem{w.Item, check},
		ClientRequestToken: aws.String(RequestToken(l, attempt)),
	})
	if err == nil {
		return nil
	}
	// The fence naming this work and its hash means it applied: a
	// duplicate, whatever record the inbox holds under its key (another
	// work's, reusing the key, which the gate would call a mismatch).
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == reasonConditionalCheck {
		if v := w.verdict(tce.CancellationReasons[0].Item); v.Kind == Duplicate {
			return &GuardError{Index: 0, Verdict: v, Old: tce.CancellationReasons[0].Item}
		}
	}
	return c.mapCancellation(err, []Write{w}, func(old map[string]types.AttributeValue) error {
		existing, derr := c.cfg.Store.Decode(old)
		if derr != nil {
			return failure.Wrap(failure.Retryable, failure.CodeTransactionConflict, fmt.Errorf("single-write commit: inbox check failed without a readable record: %w", derr))
		}
		return &ExistsError{Record: existing}
	})
}

// CommitApart is Commit for a table that refuses transactions (a global
// table with multi-Region strong consistency, MRSC): a single-write
// route's fenced write (Fenced) alone, as CommitSingle, then the record's
// flip to COMPLETED, fenced by l's token, as one UpdateItem — two calls,
// not one transaction. writes holds that one write, or none (the flip
// alone). Not atomic, and it need not be: the fence in the item is the
// work's idempotency record. A flip that fails after the write applied
// leaves the record PROCESSING under l; the next delivery takes it over,
// its run finds the fence naming its work (a *GuardError, Duplicate) and
// completes the record without writing again. A retry of a flip whose
// response was lost finds the record COMPLETED under l's own token (a
// *inbox.LeaseLostError whose Completed is true). It returns what
// CommitSingle and Supersede return.
func (c *Committer) CommitApart(ctx context.Context, l inbox.Lease, writes []Write, done Completion) error {
	switch len(writes) {
	case 0:
	case 1:
		if err := c.CommitSingle(ctx, writes[0]); err != nil {
			return err
		}
	default:
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("%w: %d writes without a transaction", ErrNotSingleWrite, len(writes)))
	}
	return c.fencedUpdate(ctx, l, c.complete(l, c.cfg.Now(), done))
}

// SingleOperation names the DynamoDB operation CommitSingle calls for w:
// UpdateItem or PutItem ("" for a write it refuses).
func SingleOperation(w Write) string {
	switch {
	case w.Item.Update != nil:
		return "UpdateItem"
	case w.Item.Put != nil:
		return "PutItem"
	}
	return ""
}

func tableOf(it types.TransactWriteItem) *string {
	switch {
	case it.Update != nil:
		return it.Update.TableName
	case it.Put != nil:
		return it.Put.TableName
	case it.Delete != nil:
		return it.Delete.TableName
	case it.ConditionCheck != nil:
		return it.ConditionCheck.TableName
	}
	return nil
}
