package ddbworker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// Key identifies an item by its key attributes: name → value. Values are
// Go values: strings, numbers and []byte (marshalled with the SDK's
// attributevalue rules).
type Key map[string]any

// Item is an item's other attributes: name → any Go value the SDK's
// attributevalue package marshals (strings, numbers, bools, time.Time as
// RFC 3339, slices, maps, structs with dynamodbav tags).
type Item map[string]any

// Write is one guarded domain write of a Result: build it with Update, Put,
// Delete or Check, add changes and guards, and return it. A Write is a
// value: each method returns a new one. Mistakes (a value that does not
// marshal, a guard a Put cannot have) surface when the worker commits, as a
// terminal INVALID_HANDLER_RESULT failure.
type Write struct {
	raw     *mutation.Write
	kind    writeKind
	table   string
	key     Key
	item    Item
	changes []change
	guards  []Guard
	err     error
}

// change is one change of an Update: the attribute it names (its top-level
// name for a path), the value a Set sets it to, and the change itself.
type change struct {
	attr  string
	set   any // Set's value; nil for the other changes
	apply func(expression.UpdateBuilder) expression.UpdateBuilder
}

type writeKind int

const (
	kindUpdate writeKind = iota + 1
	kindPut
	kindDelete
	kindCheck
)

// The engine's routes into a Write (internal/writes): a hand-built
// mutation.Write the builders here do not cover (any expression DynamoDB
// takes), committed as it is, and a Write's rendering. The test kit cannot
// evaluate a raw write's condition and judges it by its policy only: by its
// judge, asked about the item the test declares, or — with none — as if
// the condition held. Without a judge, a failed condition re-runs the
// handler (Rerun).
func init() {
	writes.Register(func(w mutation.Write) any { return Write{raw: &w} },
		func(w any) (mutation.Write, error) { return w.(Write).toMutation() })
}

// Update changes the item at key (creating it unless a guard forbids it).
// Add changes with Set, Add, Remove and SetIfMissing.
func Update(table string, key Key) Write { return Write{kind: kindUpdate, table: table, key: key} }

// Put writes the item at key with the attributes of item, replacing
// whatever was there (unless a guard forbids it: CreateOnly).
func Put(table string, key Key, item Item) Write {
	return Write{kind: kindPut, table: table, key: key, item: item}
}

// Delete removes the item at key.
func Delete(table string, key Key) Write { return Write{kind: kindDelete, table: table, key: key} }

// Check writes nothing: the commit applies only if the item at key passes
// its guards.
func Check(table string, key Key, guards ...Guard) Write {
	return Write{kind: kindCheck, table: table, key: key, guards: guards}
}

// with returns a copy of w changed by f; the copy shares nothing mutable
// with w (the SDK's update builder does, so changes are kept as functions
// and the builder is made in Mutation).
func (w Write) with(f func(*Write)) Write {
	w.guards = slices.Clone(w.guards)
	w.changes = slices.Clone(w.changes)
	f(&w)
	return w
}

func (w Write) change(c change) Write {
	if w.kind != kindUpdate {
		return w.with(func(w *Write) { w.err = errors.Join(w.err, errors.New("ddbworker: only an Update has changes")) })
	}
	c.attr, _, _ = strings.Cut(c.attr, ".")
	c.attr, _, _ = strings.Cut(c.attr, "[")
	return w.with(func(w *Write) { w.changes = append(w.changes, c) })
}

// Set sets attr to v.
func (w Write) Set(attr string, v any) Write {
	return w.change(change{attr: attr, set: v, apply: func(u expression.UpdateBuilder) expression.UpdateBuilder {
		return u.Set(expression.Name(attr), expression.Value(v))
	}})
}

// SetIfMissing sets attr to v only when the item has no attr yet.
func (w Write) SetIfMissing(attr string, v any) Write {
	return w.change(change{attr: attr, apply: func(u expression.UpdateBuilder) expression.UpdateBuilder {
		return u.Set(expression.Name(attr), expression.IfNotExists(expression.Name(attr), expression.Value(v)))
	}})
}

// Add adds the number n to attr (a missing attr counts as 0), or the
// elements of a set.
func (w Write) Add(attr string, n any) Write {
	return w.change(change{attr: attr, apply: func(u expression.UpdateBuilder) expression.UpdateBuilder {
		return u.Add(expression.Name(attr), expression.Value(n))
	}})
}

// Remove deletes attr from the item.
func (w Write) Remove(attr string) Write {
	return w.change(change{attr: attr, apply: func(u expression.UpdateBuilder) expression.UpdateBuilder {
		return u.Remove(expression.Name(attr))
	}})
}

// Guard adds guards: the write (and so the whole commit) applies only when
// every guard holds. When one fails, the first failing guard's policy says
// what that means for the work.
func (w Write) Guard(guards ...Guard) Write {
	return w.with(func(w *Write) { w.guards = append(w.guards, guards...) })
}

// Policy is what a failed guard means for the work.
type Policy struct {
	kind    mutation.VerdictKind
	code    string
	message string
	outcome string
}

func (p Policy) verdict() mutation.Verdict {
	return mutation.Verdict{Kind: p.kind, Code: p.code, Message: p.message, Outcome: p.outcome}
}

// Fail ends the work for good: FAILED_TERMINAL with code and message, and
// nothing of the commit applies.
func Fail(code, message string) Policy {
	return Policy{kind: mutation.Fail, code: code, message: message}
}

// Supersede completes the work with outcome (default SUPERSEDED) and
// applies none of its writes: it is obsolete (a newer version is there
// already, or the item it would create exists).
func Supersede(outcome string) Policy { return Policy{kind: mutation.Supersede, outcome: outcome} }

// Rerun re-runs the handler (it lost an optimistic-concurrency race and
// must read again), a bounded number of times, then fails retryably with
// CONCURRENT_MODIFICATION.
func Rerun() Policy { return Policy{kind: mutation.Retry} }

// Guard is a condition on the item as it is before the commit, with the
// policy for when it fails. Build one with MustExist, CreateOnly,
// NewerVersion, NewerThan, ExpectVersion or Equal, and change its policy
// with Else.
// An attr names a top-level attribute or, as expression.Name reads it, a
// path into one: "meta.owner", "lines[2]".
//
// A guard is judged as DynamoDB evaluates the condition it builds, on the
// item as it was, so the commit's cancellation and the test kit
// (ddbworkertest) name the guard DynamoDB failed.
type Guard struct {
	cond   func(keyAttr string) expression.ConditionBuilder
	holds  func(keyAttr string, old map[string]types.AttributeValue) bool
	policy Policy
	// version is set on a NewerVersion or a NewerThan guard: what a
	// single-write route fences the write with.
	version *versionGuard
	// err is a guard that cannot be built (a NewerThan value DynamoDB
	// cannot compare): the write is invalid.
	err error
}

type versionGuard struct {
	attr string
	v    any // what the write sets attr to: NewerVersion's int64, NewerThan's value
	// n is NewerVersion's version; ordered is set instead for NewerThan,
	// whose value other work may share (two events of one instant).
	n       int64
	ordered types.AttributeValue
}

// Else returns the guard with another policy for when it fails.
func (g Guard) Else(p Policy) Guard {
	g.policy = p
	return g
}

// MustExist holds when the item exists (its first key attribute, by name,
// is there). Default policy: Fail with ITEM_NOT_FOUND.
func MustExist() Guard {
	return Guard{
		cond:   func(k string) expression.ConditionBuilder { return expression.AttributeExists(expression.Name(k)) },
		holds:  func(k string, old map[string]types.AttributeValue) bool { return attribute(old, k) != nil },
		policy: Fail("ITEM_NOT_FOUND", "the item does not exist"),
	}
}

// CreateOnly holds when the item does not exist yet. Default policy:
// Supersede with ALREADY_EXISTS (the effect is there already).
func CreateOnly() Guard {
	return Guard{
		cond:   func(k string) expression.ConditionBuilder { return expression.AttributeNotExists(expression.Name(k)) },
		holds:  func(k string, old map[string]types.AttributeValue) bool { return attribute(old, k) == nil },
		policy: Supersede("ALREADY_EXISTS"),
	}
}

// NewerVersion holds when the item's attr is absent or a number lower than
// v: state never rolls back. Default policy: Supersede (an older version
// arrived late).
func NewerVersion(attr string, v int64) Guard {
	return Guard{
		cond: func(string) expression.ConditionBuilder {
			return expression.AttributeNotExists(expression.Name(attr)).Or(expression.Name(attr).LessThan(expression.Value(v)))
		},
		holds: func(_ string, old map[string]types.AttributeValue) bool {
			got := attribute(old, attr)
			c, ok := compareNumber(got, v)
			return got == nil || ok && c < 0
		},
		policy:  Supersede(""),
		version: &versionGuard{attr: attr, v: v, n: v},
	}
}

// NewerThan holds when the item's attr is absent or lower than v, compared
// as DynamoDB compares with <: numbers by value, strings and binaries byte
// by byte. It orders writes by a comparable attribute the events carry —
// a timestamp, a sequence — without a read and without a re-run: an event
// that arrives after a newer one applied is superseded. Default policy:
// Supersede (an older or equal event arrived late; equal too, so a
// redelivered or concurrent event at the same instant applies once).
//
// v is a number (any Go integer or float) or a string. A string timestamp
// compares correctly only when every writer of attr writes the same
// format, fixed width, in UTC — RFC 3339 with a fixed number of fraction
// digits, as Timestamp formats it: "2025-06-01T12:00:00Z" sorts before
// "2025-06-01T12:00:00.5Z" as a time but after it as a string. A
// time.Time is refused for that reason (the SDK marshals it with as many
// fraction digits as it needs): pass Timestamp(t), or a number such as
// t.UnixMilli(). A stored attribute of another type than v's is never
// lower (DynamoDB's < is false across types): the guard fails.
func NewerThan(attr string, v any) Guard {
	want, err := orderable(v)
	var vg *versionGuard
	if err == nil {
		vg = &versionGuard{attr: attr, v: v, ordered: want}
	}
	return Guard{
		cond: func(string) expression.ConditionBuilder {
			return expression.AttributeNotExists(expression.Name(attr)).Or(expression.Name(attr).LessThan(expression.Value(v)))
		},
		holds: func(_ string, old map[string]types.AttributeValue) bool {
			got := attribute(old, attr)
			c, ok := compareValue(got, want)
			return got == nil || ok && c < 0
		},
		policy:  Supersede(""),
		err:     err,
		version: vg,
	}
}

// TimestampLayout is the layout of Timestamp: RFC 3339 in UTC with nine
// fraction digits, fixed width, so that two timestamps compare as strings
// as they compare as times (NewerThan).
const TimestampLayout = "2006-01-02T15:04:05.000000000Z"

// Timestamp formats t for NewerThan and for the attribute it guards: in
// UTC, with TimestampLayout.
func Timestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// ExpectVersion holds when the item's attr is the number v (optimistic
// concurrency: the version the handler read). Default policy: Rerun.
func ExpectVersion(attr string, v int64) Guard {
	return Guard{
		cond: func(string) expression.ConditionBuilder { return expression.Name(attr).Equal(expression.Value(v)) },
		holds: func(_ string, old map[string]types.AttributeValue) bool {
			c, ok := compareNumber(attribute(old, attr), v)
			return ok && c == 0
		},
		policy: Rerun(),
	}
}

// Equal holds when the item's attr equals v by DynamoDB's rules: the same
// type (a Go slice is a list, not a set, unless v is a set's
// types.AttributeValue) and the same value (numbers by value, sets in any
// order, lists in order, maps member by member). Default policy: Rerun.
func Equal(attr string, v any) Guard {
	want, err := value(v)
	return Guard{
		cond: func(string) expression.ConditionBuilder { return expression.Name(attr).Equal(expression.Value(v)) },
		holds: func(_ string, old map[string]types.AttributeValue) bool {
			return err == nil && sameValue(attribute(old, attr), want)
		},
		policy: Rerun(),
	}
}

// toMutation renders the write as the commit's transaction item, built
// through feature/dynamodb/expression, and the judge of its guards (the
// worker calls it through internal/writes; so does the test kit). The judge
// names the first guard that fails on the item as it was.
//
// A Put or Update with exactly one NewerVersion or NewerThan guard also
// carries what a single-write route fences it with (mutation.Write.Fence).
func (w Write) toMutation() (mutation.Write, error) {
	if w.raw != nil {
		return *w.raw, nil
	}
	m, err := w.render()
	if err != nil {
		return m, err
	}
	m.Fence = w.fence()
	return m, nil
}

func (w Write) render() (mutation.Write, error) {
	if w.err != nil {
		return mutation.Write{}, w.invalid(w.err)
	}
	if w.table == "" || len(w.key) == 0 {
		return mutation.Write{}, w.invalid(errors.New("a write needs a table and a key"))
	}
	key, err := attributevalue.MarshalMap(map[string]any(w.key))
	if err != nil {
		return mutation.Write{}, w.invalid(fmt.Errorf("key: %w", err))
	}
	keyAttr := slices.Sorted(maps.Keys(w.key))[0]
	b := expression.NewBuilder()
	built := false // the builder has an expression: Build refuses an empty one
	if len(w.guards) > 0 {
		var cond expression.ConditionBuilder
		for i, g := range w.guards {
			if g.cond == nil {
				return mutation.Write{}, w.invalid(fmt.Errorf("guard %d is the zero Guard", i))
			}
			if g.err != nil {
				return mutation.Write{}, w.invalid(fmt.Errorf("guard %d: %w", i, g.err))
			}
			if i == 0 {
				cond = g.cond(keyAttr)
			} else {
				cond = cond.And(g.cond(keyAttr))
			}
		}
		b, built = b.WithCondition(cond), true
	}
	switch w.kind {
	case kindUpdate:
		if len(w.changes) == 0 {
			return mutation.Write{}, w.invalid(errors.New("an Update needs at least one change (Set, Add, Remove, SetIfMissing)"))
		}
		var upd expression.UpdateBuilder
		for _, c := range w.changes {
			upd = c.apply(upd)
		}
		b, built = b.WithUpdate(upd), true
	case kindPut, kindDelete:
	case kindCheck:
		if len(w.guards) == 0 {
			return mutation.Write{}, w.invalid(errors.New("a Check needs a guard"))
		}
	default:
		return mutation.Write{}, w.invalid(errors.New("the zero Write: build one with Update, Put, Delete or Check"))
	}
	var ex expression.Expression
	if built {
		if ex, err = b.Build(); err != nil {
			return mutation.Write{}, w.invalid(fmt.Errorf("expression: %w", err))
		}
	}
	var old types.ReturnValuesOnConditionCheckFailure
	if len(w.guards) > 0 {
		old = types.ReturnValuesOnConditionCheckFailureAllOld // the judge reads the item as it was
	}
	table := aws.String(w.table)
	var item types.TransactWriteItem
	switch w.kind {
	case kindUpdate:
		item.Update = &types.Update{TableName: table, Key: key, UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ReturnValuesOnConditionCheckFailure: old}
	case kindPut:
		attrs, err := attributevalue.MarshalMap(map[string]any(w.item))
		if err != nil {
			return mutation.Write{}, w.invalid(fmt.Errorf("item: %w", err))
		}
		maps.Copy(attrs, key)
		item.Put = &types.Put{TableName: table, Item: attrs, ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ReturnValuesOnConditionCheckFailure: old}
	case kindDelete:
		item.Delete = &types.Delete{TableName: table, Key: key, ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ReturnValuesOnConditionCheckFailure: old}
	case kindCheck:
		item.ConditionCheck = &types.ConditionCheck{TableName: table, Key: key, ConditionExpression: ex.Condition(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ReturnValuesOnConditionCheckFailure: old}
	}
	return mutation.Write{Item: item, Judge: judgeOf(w.guards, keyAttr)}, nil
}

// judgeOf is the judge of a write with guards on an item whose first key
// attribute (by name) is keyAttr: the first guard that fails on the item
// as it was decides with its policy.
func judgeOf(guards []Guard, keyAttr string) mutation.Judge {
	return func(old map[string]types.AttributeValue) (mutation.Verdict, bool) {
		for _, g := range guards {
			if !g.holds(keyAttr, old) {
				return g.policy.verdict(), true
			}
		}
		return mutation.Verdict{}, false
	}
}

// fence is what a single-write route needs of w: set for a Put or an
// Update with exactly one version guard (NewerVersion or NewerThan).
func (w Write) fence() *mutation.Fence {
	if w.kind != kindUpdate && w.kind != kindPut {
		return nil
	}
	var vg *versionGuard
	for _, g := range w.guards {
		if g.version != nil {
			if vg != nil {
				return nil // two version guards: which one fences is not clear
			}
			vg = g.version
		}
	}
	if vg == nil || strings.ContainsAny(vg.attr, ".[") {
		return nil // the fence reads a top-level version attribute
	}
	f := &mutation.Fence{Attr: vg.attr, Version: vg.n}
	if vg.ordered != nil {
		f.Value = vg.ordered
		f.Compare = func(have types.AttributeValue) (int, bool) { return compareValue(have, vg.ordered) }
	}
	f.Render = func(marks mutation.Marks) (types.TransactWriteItem, error) {
		s, err := w.stamped(vg, marks.Set)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		if marks.Require.IsSet() {
			s = s.Guard(required(marks.Require, marks.Holds))
		}
		m, err := s.render()
		return m.Item, err
	}
	return f
}

// required is a fenced write's condition that the fence does not name its
// work (mutation.Marks.Require, read on an item by holds). Policy: Fail
// with IDEMPOTENCY_HASH_MISMATCH (the fence's judge, mutation.Fenced,
// decides first: a duplicate when the work is the same).
func required(c expression.ConditionBuilder, holds func(map[string]types.AttributeValue) bool) Guard {
	return Guard{
		cond: func(string) expression.ConditionBuilder { return c },
		holds: func(_ string, old map[string]types.AttributeValue) bool {
			return holds == nil || holds(old)
		},
		policy: Fail(failure.CodeHashMismatch, "the item's fence names this work already"),
	}
}

// stamped is w setting the string attributes of set and its version
// attribute to the version guard's version: a handler may set that
// attribute only to that version, and none of set's.
func (w Write) stamped(vg *versionGuard, set map[string]string) (Write, error) {
	versionSet := false
	check := func(attr string, v any, isSet bool) error {
		if _, ok := set[attr]; ok {
			return fmt.Errorf("the write sets %s, which the fence owns", attr)
		}
		if attr != vg.attr {
			return nil
		}
		if !isSet || !vg.same(v) {
			return fmt.Errorf("the write changes its version attribute %s other than to the guard's version %v", attr, vg.v)
		}
		versionSet = true
		return nil
	}
	switch w.kind {
	case kindUpdate:
		for _, c := range w.changes {
			if err := check(c.attr, c.set, c.set != nil); err != nil {
				return Write{}, err
			}
		}
		out := w
		if !versionSet {
			out = out.Set(vg.attr, vg.v)
		}
		for _, name := range slices.Sorted(maps.Keys(set)) {
			out = out.Set(name, set[name])
		}
		return out, nil
	case kindPut:
		for attr, v := range w.item {
			if err := check(attr, v, true); err != nil {
				return Write{}, err
			}
		}
		item := maps.Clone(w.item)
		if item == nil {
			item = Item{}
		}
		if !versionSet {
			item[vg.attr] = vg.v
		}
		for name, v := range set {
			item[name] = v
		}
		out := w.with(func(*Write) {})
		out.item = item
		return out, nil
	}
	return Write{}, errors.New("only a Put or an Update is fenced")
}

// same reports whether v marshals to the guard's version (NewerVersion's
// number, NewerThan's value, each by DynamoDB's equality).
func (vg *versionGuard) same(v any) bool {
	if vg.ordered == nil {
		return sameNumber(v, vg.n)
	}
	av, err := value(v)
	return err == nil && sameValue(av, vg.ordered)
}

// sameNumber reports whether v marshals to the number n.
func sameNumber(v any, n int64) bool {
	av, err := value(v)
	if err != nil {
		return false
	}
	c, ok := compareNumber(av, n)
	return ok && c == 0
}

func (w Write) invalid(err error) error {
	return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("ddbworker: write to %s: %w", w.table, err))
}
