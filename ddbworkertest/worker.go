package ddbworkertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/judge"
	ddbwrites "github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// DefaultMaxAttempts is the business-attempt limit the kit applies when the
// message's attemptPolicy sets none: the worker's default (--max-attempts).
const DefaultMaxAttempts = failure.DefaultMaxAttempts

// Worker runs a handler on a message the way the worker does — decode,
// route, run (recovering a panic), render the writes, judge the commit
// with the writes' own judges, and settle the run with the worker's own
// judgement (package internal/judge) — in memory, in an ordinary unit
// test. Build one with New or NewRegistry; Before says what the tables
// hold. A Worker is immutable and safe for concurrent use (if its handler
// is).
type Worker struct {
	handler ddbworker.Handler
	reg     *ddbworker.Registry
	items   []Existing
}

// New returns a Worker that runs h on every message, whatever its type.
func New(h ddbworker.Handler) *Worker { return &Worker{handler: h} }

// NewRegistry returns a Worker that looks each message's type up in reg, as
// the worker does: a type reg does not know ends terminal
// UNKNOWN_MESSAGE_TYPE. A raw body (FromBody) is read by reg's body
// adapters as the worker reads it (see ddbworker.Adapt).
func NewRegistry(reg *ddbworker.Registry) *Worker { return &Worker{reg: reg} }

// Existing is an item in a table before the commit.
type Existing struct {
	// Table holds the item.
	Table string
	// Key is the item's key attributes; they are also the names of the
	// table's key for the kit.
	Key ddbworker.Key
	// Item is the item's other attributes (nil: the item has its key only).
	Item ddbworker.Item
}

// Before returns a copy of w whose tables hold items, and nothing else,
// before the commit. Without Before the tables are empty: a MustExist
// guard fails, a CreateOnly guard holds. The handler's own reads through
// a Reader see the same items.
func (w *Worker) Before(items ...Existing) *Worker {
	c := *w
	c.items = slices.Clone(items)
	return &c
}

// Kind is what the worker does with the work.
type Kind int

const (
	// Applied: the commit applies the writes and completes the work with
	// Result.Outcome; the message is deleted.
	Applied Kind = iota + 1
	// Superseded: a guard with the Supersede policy failed; nothing is
	// written and the work completes with Result.Outcome.
	Superseded
	// Rerun: a guard with the Rerun policy failed: the worker runs the
	// handler again (a bounded number of times; then it fails retryable
	// with CONCURRENT_MODIFICATION).
	Rerun
	// Retryable: the attempt failed; the work runs again after a backoff
	// (Result.Failure; an Infrastructure failure does not count as an
	// attempt).
	Retryable
	// Terminal: the work ends FAILED_TERMINAL with Result.Failure and the
	// terminal policy (DLQ by default) applies.
	Terminal
	// Duplicate: on a single-write route, the item's fence names this
	// work: it applied already; nothing is written and the message is
	// deleted.
	Duplicate
)

func (k Kind) String() string {
	switch k {
	case Applied:
		return "applied"
	case Superseded:
		return "superseded"
	case Rerun:
		return "rerun"
	case Retryable:
		return "retryable"
	case Terminal:
		return "terminal"
	case Duplicate:
		return "duplicate"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Failure is the failure the worker records.
type Failure struct {
	// Kind is Retryable or Terminal.
	Kind Kind
	// Code is the failure code: the handler's own, or one the worker
	// assigns (HANDLER_ERROR, HANDLER_PANIC, INVALID_PAYLOAD,
	// INVALID_HANDLER_RESULT, MAX_ATTEMPTS_EXCEEDED, an envelope code…).
	Code string
	// Message is the failure's message.
	Message string
	// Infrastructure is failure.Error.Infrastructure: trouble the worker
	// retries without counting a business attempt (throttling, a 5xx, a
	// timeout, a transaction conflict).
	Infrastructure bool
	// Err is the *failure.Error the worker records; errors.Is and errors.As
	// reach the handler's own error (or the envelope's *envelope.Error)
	// through it.
	Err error
}

func (f *Failure) String() string {
	s := f.Kind.String() + " " + f.Code
	if f.Message != "" {
		s += ": " + f.Message
	}
	if f.Infrastructure {
		s += " (infrastructure: no attempt counted)"
	}
	return s
}

// Result is what became of one message.
type Result struct {
	// Kind is what the worker does with the work.
	Kind Kind
	// Outcome is the outcome the inbox records for completed work: for
	// Applied, the handler's Result.Outcome (default APPLIED); for
	// Superseded, the failed guard's (default SUPERSEDED).
	Outcome string
	// ResultRef is the handler's Result.ResultRef (Applied).
	ResultRef string
	// Failure is the failure recorded (Retryable, Terminal).
	Failure *Failure
	// FailedWrite is the index of the write whose guard failed (the first
	// one: the one the commit's cancellation names), or -1.
	FailedWrite int
	// Writes are the handler's writes, rendered, in order.
	Writes []Write
	// Envelope is the envelope as the decoder (or, for a body an adapted
	// route reads, its adapter) returned it; nil when the body did not
	// decode.
	Envelope *envelope.Envelope
	// Message is what the handler saw; nil when it did not run (the
	// envelope was rejected, or no handler is registered for its type).
	Message *ddbworker.Message
	// Returned is the handler's Result as it returned it.
	Returned ddbworker.Result
	// Err is the handler's error as it returned it; after a panic, the
	// HANDLER_PANIC failure the worker makes of it.
	Err error
	// Panic is the value the handler panicked with, or nil.
	Panic any
}

// String renders r: a headline, then one line per write with what its
// condition made of the item before the commit.
func (r *Result) String() string {
	var b strings.Builder
	guard := ""
	if r.FailedWrite >= 0 {
		guard = fmt.Sprintf(" (the guard of write %d)", r.FailedWrite)
	}
	switch r.Kind {
	case Applied:
		b.WriteString("applied " + r.Outcome)
		if r.ResultRef != "" {
			b.WriteString(" resultRef " + strconv.Quote(r.ResultRef))
		}
	case Superseded:
		b.WriteString("superseded " + r.Outcome + guard)
	case Rerun:
		b.WriteString("rerun" + guard)
	case Duplicate:
		b.WriteString("duplicate" + guard)
	case Retryable, Terminal:
		b.WriteString(r.Failure.String() + guard)
	default:
		b.WriteString(r.Kind.String())
	}
	for _, w := range r.Writes {
		fmt.Fprintf(&b, "\n  %d %s", w.Index, w)
		if w.Err == nil && w.Condition != "" && w.Eval != NotEvaluated {
			b.WriteString("  [" + w.Eval.String() + "]")
		}
	}
	return b.String()
}

// stored is an Existing item, marshalled.
type stored struct {
	table string
	key   map[string]types.AttributeValue
	item  map[string]types.AttributeValue // key included
}

// RequireWork is Work for a test: it runs msg with t's context and fails
// t if the kit cannot run it (see Work).
func (w *Worker) RequireWork(t testing.TB, msg Message) *Result {
	t.Helper()
	r, err := w.Work(t.Context(), msg)
	if err != nil {
		t.Fatalf("ddbworkertest: %v", err)
	}
	return r
}

// Work delivers msg as the worker would and reports what became of it. It
// returns an error only when the kit cannot run the message at all: no
// handler, an option that does not apply, a payload or an Existing item
// that does not marshal, two Existing items at one key. Everything the
// worker would report — a rejected envelope, an unknown type, a failure, a
// panic, an invalid write, a failed guard — is in the Result.
func (w *Worker) Work(ctx context.Context, msg Message) (*Result, error) {
	if w == nil || (w.handler == nil && w.reg == nil) {
		return nil, errors.New("ddbworkertest: the Worker has no handler: build it with New or NewRegistry")
	}
	if msg.err != nil {
		return nil, msg.err
	}
	if msg.attempt < 1 || msg.receiveCount < 0 {
		return nil, fmt.Errorf("ddbworkertest: attempt %d must be at least 1 and receive count %d not negative", msg.attempt, msg.receiveCount)
	}
	items, err := w.store()
	if err != nil {
		return nil, err
	}
	body, err := msg.encode()
	if err != nil {
		return nil, err
	}
	r := &Result{FailedWrite: -1}
	var adapters *envelope.Adapters
	if w.reg != nil {
		adapters = w.reg.Adapters()
	}
	env, err := (*envelope.Decoder)(nil).Read(envelope.Input{Body: body, Attributes: msg.attributes,
		MessageID: DefaultSQSMessageID, SentAt: DefaultOccurredAt}, adapters)
	if err != nil {
		// Refused before it is work, as the worker's admit refuses it: a
		// rejection recorded terminal with the decoder's code.
		r.reject(judge.Undecodable(err))
		return r, nil
	}
	r.Envelope = env
	h := w.handler
	single := false // a single-write route: its write is fenced
	if w.reg != nil {
		rt, ok := w.reg.Lookup(env.MessageType)
		if !ok {
			r.reject(failure.NewTerminal(failure.CodeUnknownMessageType, fmt.Sprintf("no handler for message type %q", env.MessageType)))
			return r, nil
		}
		h, single = rt.Handler, rt.SingleWrite
	}
	r.Message = &ddbworker.Message{Envelope: env, SQSMessageID: DefaultSQSMessageID, ReceiveCount: msg.receiveCount, Attempt: msg.attempt}
	// The handler's own reads through a Reader see the items its commit
	// is judged against.
	r.Returned, r.Panic, r.Err = run(withItems(ctx, items), h, r.Message)

	writes := make([]mutation.Write, len(r.Returned.Writes))
	var invalid error // the first write that does not render, as the worker's commit stage reports it
	r.Writes = make([]Write, len(r.Returned.Writes))
	for i, wr := range r.Returned.Writes {
		r.Writes[i].Index = i
		m, err := ddbwrites.Mutation(wr)
		if err != nil {
			r.Writes[i].Err = err
			if invalid == nil {
				invalid = fmt.Errorf("write %d: %w", i, err)
			}
			continue
		}
		writes[i] = m
		if err := m.Check(); err != nil { // shown invalid; the commit's own check refuses it
			r.Writes[i].Err = failure.Wrap(failure.Terminal, failure.CodeInvalidResult, err)
			continue
		}
		render(&r.Writes[i], m)
	}
	if single && invalid == nil && len(writes) > 0 {
		// As the worker's commit fences it: the one write also sets the
		// fence, and the fence judges an item whose version is not below.
		fenced, err := mutation.Fenced(writes, mutation.Stamp{Key: env.IdempotencyKey, Type: env.MessageType, Hash: env.RequestHash})
		if err != nil {
			invalid = err
		} else {
			writes = writes[:1]
			writes[0] = fenced
			r.Writes = r.Writes[:1]
			render(&r.Writes[0], fenced)
		}
	}
	keys := r.locate(items)
	for i := range r.Writes {
		if old := lookup(items, r.Writes[i].Table, keys[i]); old != nil {
			r.Writes[i].Before = plainMap(old)
		}
	}

	// What the worker's run stage sees: the handler's error, or its
	// commit's. The run is the handler's first (Message.Run 0), which a
	// Rerun guard re-runs under any worker that re-runs at all
	// (worker.Config.MaxGuardRetries, default 3).
	err = r.Err
	if err == nil {
		err = r.commit(writes, items, keys, invalid)
	}
	r.settle(judge.Of(err, r.Returned.Outcome, 0, judge.DefaultMaxReruns), msg.attempt)
	return r, nil
}

// run runs the handler, recovering a panic as the worker does.
func run(ctx context.Context, h ddbworker.Handler, m *ddbworker.Message) (res ddbworker.Result, panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			err = failure.NewRetryable(failure.CodeHandlerPanic, fmt.Sprintf("handler panicked: %v", p))
		}
	}()
	res, err = h.Handle(ctx, m)
	return res, nil, err
}

// commit is what the worker's commit would return for the rendered writes
// on the items before it: a write that does not render, the commit's own
// check (mutation.CheckWrites), DynamoDB's refusal of two writes to one
// item, or — the transaction cancelled by a domain guard — a
// *mutation.GuardError for the first write one of whose guards fails on
// its item, with that write's verdict; nil when the writes apply. Every
// write's guards are evaluated (Write.Eval), in order, by the write's own
// judge.
func (r *Result) commit(writes []mutation.Write, items []stored, keys []map[string]types.AttributeValue, invalid error) error {
	if invalid != nil {
		return invalid
	}
	if err := mutation.CheckWrites(writes); err != nil {
		return err
	}
	if err := duplicates(r.Writes, keys); err != nil {
		return failure.Wrap(failure.Terminal, failure.CodeInvalidTransaction, err)
	}
	var cancelled *mutation.GuardError
	for i, m := range writes {
		w := &r.Writes[i]
		old := lookup(items, w.Table, keys[i])
		switch {
		case !conditional(m.Item):
			w.Eval = Unconditional
		case m.Judge == nil:
			w.Eval = PolicyOnly
		default:
			v, failed := m.Judge(old)
			w.Eval = Holds
			if failed {
				w.Eval = Fails
				if cancelled == nil {
					cancelled = &mutation.GuardError{Index: i, Verdict: v, Old: old}
				}
			}
		}
	}
	if cancelled != nil {
		return cancelled
	}
	return nil
}

// reject records f, a delivery refused before it is work, as the worker
// records a rejection: terminal, with no attempt.
func (r *Result) reject(f *failure.Error) {
	r.Kind = Terminal
	r.Failure = &Failure{Kind: Terminal, Code: f.Code, Message: f.Message, Err: f}
}

// settle is the worker's record stage for the run's judgement j (package
// internal/judge, which the worker's run stage uses): applied, superseded,
// rerun, or a failure — infrastructure trouble as it is (no attempt), a
// business failure of attempt through the attempts policy (the envelope's
// attemptPolicy, or DefaultMaxAttempts), which may make it terminal.
func (r *Result) settle(j judge.Run, attempt int) {
	r.FailedWrite = j.Guard
	switch j.Kind {
	case judge.Applied:
		r.Kind, r.Outcome, r.ResultRef = Applied, j.Outcome, r.Returned.ResultRef
		return
	case judge.Superseded:
		r.Kind, r.Outcome = Superseded, j.Outcome
		return
	case judge.Duplicate:
		r.Kind, r.Outcome = Duplicate, j.Outcome
		return
	case judge.Rerun:
		r.Kind = Rerun
		return
	}
	f := judge.Attempt(j.Failure, judge.Policy(r.Envelope, DefaultMaxAttempts), attempt, time.Now())
	r.Kind = Retryable
	if f.IsTerminal() {
		r.Kind = Terminal
	}
	r.Failure = &Failure{Kind: r.Kind, Code: f.Code, Message: f.Message, Infrastructure: f.Infrastructure(), Err: f}
}

// conditional reports whether a transaction item has a condition.
func conditional(it types.TransactWriteItem) bool {
	switch {
	case it.Put != nil:
		return aws.ToString(it.Put.ConditionExpression) != ""
	case it.Update != nil:
		return aws.ToString(it.Update.ConditionExpression) != ""
	case it.Delete != nil:
		return aws.ToString(it.Delete.ConditionExpression) != ""
	case it.ConditionCheck != nil:
		return aws.ToString(it.ConditionCheck.ConditionExpression) != ""
	}
	return false
}

// store marshals the Existing items.
func (w *Worker) store() ([]stored, error) {
	out := make([]stored, 0, len(w.items))
	for i, e := range w.items {
		where := fmt.Sprintf("ddbworkertest: Existing item %d (%s)", i, e.Table)
		if e.Table == "" || len(e.Key) == 0 {
			return nil, fmt.Errorf("%s: an Existing item needs a table and a key", where)
		}
		key, err := attributevalue.MarshalMap(map[string]any(e.Key))
		if err != nil {
			return nil, fmt.Errorf("%s: key: %w", where, err)
		}
		item, err := attributevalue.MarshalMap(map[string]any(e.Item))
		if err != nil {
			return nil, fmt.Errorf("%s: item: %w", where, err)
		}
		for k, v := range key {
			if x, ok := item[k]; ok && !sameKeyValue(x, v) {
				return nil, fmt.Errorf("%s: the item's %s is %s, its key's %s", where, k, literal(x), literal(v))
			}
			item[k] = v
		}
		for _, o := range out {
			if o.table != e.Table {
				continue
			}
			if !slices.Equal(sortedNames(o.key), sortedNames(key)) {
				return nil, fmt.Errorf("%s: key %s, another item of the table has key %s", where, strings.Join(sortedNames(key), ", "), strings.Join(sortedNames(o.key), ", "))
			}
			if sameKey(o.key, key) {
				return nil, fmt.Errorf("%s: two items at key %s", where, literal(&types.AttributeValueMemberM{Value: key}))
			}
		}
		out = append(out, stored{table: e.Table, key: key, item: item})
	}
	return out, nil
}

// locate returns each valid write's key; a Put's is the attributes of its
// item that are the table's key, when the kit knows the table's key names
// (from an Existing item, or from another write's key), else nil. It also
// fills a Put's Write.Key.
func (r *Result) locate(items []stored) []map[string]types.AttributeValue {
	keys := make([]map[string]types.AttributeValue, len(r.Writes))
	schema := map[string][]string{}
	for _, s := range items {
		schema[s.table] = sortedNames(s.key)
	}
	for i, w := range r.Writes {
		var k map[string]types.AttributeValue
		switch it := w.Mutation.Item; {
		case w.Err != nil:
		case it.Update != nil:
			k = it.Update.Key
		case it.Delete != nil:
			k = it.Delete.Key
		case it.ConditionCheck != nil:
			k = it.ConditionCheck.Key
		}
		if k != nil {
			keys[i] = k
			if _, ok := schema[w.Table]; !ok {
				schema[w.Table] = sortedNames(k)
			}
		}
	}
	for i, w := range r.Writes {
		if w.Err != nil || w.Mutation.Item.Put == nil {
			continue
		}
		names, ok := schema[w.Table]
		if !ok {
			continue
		}
		k := map[string]types.AttributeValue{}
		for _, n := range names {
			v, ok := w.Mutation.Item.Put.Item[n]
			if !ok {
				k = nil
				break
			}
			k[n] = v
		}
		keys[i] = k
		r.Writes[i].Key = plainMap(k)
	}
	return keys
}

// lookup finds the item at key in table (nil: none).
func lookup(items []stored, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if key == nil {
		return nil
	}
	for _, s := range items {
		if s.table == table && sameKey(s.key, key) {
			return s.item
		}
	}
	return nil
}

// duplicates reports two writes to one item: DynamoDB refuses such a
// transaction (ValidationException), which the worker records terminal
// INVALID_TRANSACTION.
func duplicates(writes []Write, keys []map[string]types.AttributeValue) error {
	for i := range writes {
		for j := range i {
			if keys[i] != nil && keys[j] != nil && writes[i].Table == writes[j].Table && sameKey(keys[i], keys[j]) {
				return fmt.Errorf("ValidationException: Transaction request cannot include multiple operations on one item (writes %d and %d: %s %s)",
					j, i, writes[i].Table, literal(&types.AttributeValueMemberM{Value: keys[i]}))
			}
		}
	}
	return nil
}

func sameKey(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !sameKeyValue(v, w) {
			return false
		}
	}
	return true
}

func sortedNames(m map[string]types.AttributeValue) []string {
	return slices.Sorted(maps.Keys(m))
}
