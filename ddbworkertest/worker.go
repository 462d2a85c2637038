package ddbworkertest

import (
	"cmp"
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
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
)

// DefaultMaxAttempts is the business-attempt limit the kit applies when the
// message's attemptPolicy sets none: the worker's default (--max-attempts).
const DefaultMaxAttempts = failure.DefaultMaxAttempts

// Worker runs a handler on a message the way the worker does — decode,
// route, run (recovering a panic), render the writes, judge the commit —
// in memory, in an ordinary unit test. Build one with New or NewRegistry;
// Before says what the tables hold. A Worker is immutable and safe for
// concurrent use (if its handler is).
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
// guard fails, a CreateOnly guard holds.
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
		code := failure.CodeHandlerError
		var ee *envelope.Error
		if errors.As(err, &ee) {
			code = string(ee.Code)
		}
		r.fail(&failure.Error{Kind: failure.Terminal, Code: code, Message: err.Error(), Err: err}, msg.attempt)
		return r, nil
	}
	r.Envelope = env
	h := w.handler
	if w.reg != nil {
		rt, ok := w.reg.Lookup(env.MessageType)
		if !ok {
			r.fail(failure.NewTerminal(failure.CodeUnknownMessageType, fmt.Sprintf("no handler for message type %q", env.MessageType)), msg.attempt)
			return r, nil
		}
		h = rt.Handler
	}
	r.Message = &ddbworker.Message{Envelope: env, SQSMessageID: DefaultSQSMessageID, ReceiveCount: msg.receiveCount, Attempt: msg.attempt}
	r.Returned, r.Panic, r.Err = run(ctx, h, r.Message)

	var invalid error
	r.Writes = make([]Write, len(r.Returned.Writes))
	for i, wr := range r.Returned.Writes {
		r.Writes[i].Index = i
		m, err := wr.Mutation()
		if err == nil {
			err = checkItem(i, m)
		}
		if err != nil {
			r.Writes[i].Err = err
			if invalid == nil {
				invalid = fmt.Errorf("write %d: %w", i, err)
			}
			continue
		}
		render(&r.Writes[i], m)
	}
	keys := r.locate(items)
	for i := range r.Writes {
		if old := lookup(items, r.Writes[i].Table, keys[i]); old != nil {
			r.Writes[i].Before = plainMap(old)
		}
	}

	switch {
	case r.Err != nil:
		r.fail(failure.Classify(r.Err, failure.CodeHandlerError), msg.attempt)
	case invalid != nil:
		r.fail(failure.Classify(invalid, failure.CodeHandlerError), msg.attempt)
	case len(r.Writes) > mutation.MaxWrites:
		r.fail(failure.Wrap(failure.Terminal, failure.CodeInvalidResult,
			fmt.Errorf("%w: %d domain writes, at most %d", mutation.ErrInvalidWrite, len(r.Writes), mutation.MaxWrites)), msg.attempt)
	default:
		if err := duplicates(r.Writes, keys); err != nil {
			r.fail(failure.Wrap(failure.Terminal, failure.CodeInvalidTransaction, err), msg.attempt)
			break
		}
		r.judge(items, keys, msg.attempt)
	}
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

// checkItem is the commit's check of a write built with ddbworker.Raw:
// exactly one action.
func checkItem(i int, m mutation.Write) error {
	n := 0
	for _, set := range []bool{m.Item.Put != nil, m.Item.Update != nil, m.Item.Delete != nil, m.Item.ConditionCheck != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult,
			fmt.Errorf("%w: write %d must set exactly one of Put, Update, Delete, ConditionCheck", mutation.ErrInvalidWrite, i))
	}
	return nil
}

// fail records f as the worker settles it: infrastructure trouble is
// retried without counting the attempt; any other failure goes through the
// attempts policy (the envelope's attemptPolicy, or DefaultMaxAttempts),
// which may make a retryable failure terminal.
func (r *Result) fail(f *failure.Error, attempt int) {
	if !f.Infrastructure() {
		p := failure.Policy{MaxAttempts: DefaultMaxAttempts}
		if r.Envelope != nil && r.Envelope.AttemptPolicy != nil {
			ap := r.Envelope.AttemptPolicy
			if ap.MaxBusinessAttempts > 0 {
				p.MaxAttempts = ap.MaxBusinessAttempts
			}
			p.TerminalAfterCodes = ap.TerminalAfterCodes
			if ap.RetryableUntil != nil {
				p.RetryableUntil = *ap.RetryableUntil
			}
		}
		f = p.After(f, attempt, time.Now())
	}
	r.Kind = Retryable
	if f.IsTerminal() {
		r.Kind = Terminal
	}
	r.Failure = &Failure{Kind: r.Kind, Code: f.Code, Message: f.Message, Infrastructure: f.Infrastructure(), Err: f}
}

// judge decides the commit: the first write whose condition fails on the
// item before it names the verdict through its guard's judge; if none
// fails, the writes apply.
func (r *Result) judge(items []stored, keys []map[string]types.AttributeValue, attempt int) {
	var verdict mutation.Verdict
	for i := range r.Writes {
		w := &r.Writes[i]
		old := lookup(items, w.Table, keys[i])
		expr, names, values := condition(w.Mutation.Item)
		if expr == "" {
			w.Eval = Unconditional
			continue
		}
		t := unknown
		if c, err := parseCondition(expr, names); err == nil {
			t = evaluate(c, old, values)
		}
		var failed bool
		var v mutation.Verdict
		switch t {
		case yes:
			w.Eval = Holds
		case no:
			w.Eval, failed, v = Fails, true, guardVerdict(w.Mutation, old)
		default:
			w.Eval = PolicyOnly
			v = guardVerdict(w.Mutation, old)
			failed = v.Kind != mutation.Retry
		}
		if failed && r.FailedWrite < 0 {
			r.FailedWrite, verdict = i, v
		}
	}
	if r.FailedWrite < 0 {
		r.Kind, r.Outcome, r.ResultRef = Applied, cmp.Or(r.Returned.Outcome, inbox.OutcomeApplied), r.Returned.ResultRef
		return
	}
	switch verdict.Kind {
	case mutation.Supersede:
		r.Kind, r.Outcome = Superseded, cmp.Or(verdict.Outcome, inbox.OutcomeSuperseded)
	case mutation.Fail:
		r.fail(failure.NewTerminal(verdict.Code, cmp.Or(verdict.Message, fmt.Sprintf("domain write %d failed its condition", r.FailedWrite))), attempt)
	default:
		r.Kind = Rerun
	}
}

// guardVerdict is the judge's verdict on the item as it was (nil: none); a
// write without a judge re-runs, as in the commit.
func guardVerdict(m mutation.Write, old map[string]types.AttributeValue) mutation.Verdict {
	if m.Guard == nil {
		return mutation.Verdict{Kind: mutation.Retry}
	}
	return m.Guard(old)
}

func condition(it types.TransactWriteItem) (string, map[string]string, map[string]types.AttributeValue) {
	switch {
	case it.Put != nil:
		return aws.ToString(it.Put.ConditionExpression), it.Put.ExpressionAttributeNames, it.Put.ExpressionAttributeValues
	case it.Update != nil:
		return aws.ToString(it.Update.ConditionExpression), it.Update.ExpressionAttributeNames, it.Update.ExpressionAttributeValues
	case it.Delete != nil:
		return aws.ToString(it.Delete.ConditionExpression), it.Delete.ExpressionAttributeNames, it.Delete.ExpressionAttributeValues
	case it.ConditionCheck != nil:
		return aws.ToString(it.ConditionCheck.ConditionExpression), it.ConditionCheck.ExpressionAttributeNames, it.ConditionCheck.ExpressionAttributeValues
	}
	return "", nil, nil
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
			if x, ok := item[k]; ok && !equal(x, v) {
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
		if !ok || !equal(v, w) {
			return false
		}
	}
	return true
}

func sortedNames(m map[string]types.AttributeValue) []string {
	return slices.Sorted(maps.Keys(m))
}
