package ddbworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/mutation"
)

// Message is what a handler sees of one delivery.
type Message struct {
	// Envelope is the decoded, validated envelope: its fields below are
	// also reachable as methods. For a body an adapted route read (Adapt)
	// it is the envelope its adapter made of it.
	Envelope *envelope.Envelope
	// SQSMessageID is the SQS message id of this delivery (not the work's
	// identity: that is the idempotency key).
	SQSMessageID string
	// ReceiveCount is SQS's ApproximateReceiveCount.
	ReceiveCount int
	// Attempt is the business attempt, counted in the inbox (1 first);
	// infrastructure trouble (throttling, timeouts, a deploy) never counts.
	Attempt int
	// Run counts handler runs within this attempt (0 first); it grows when
	// a guard with the Retry policy re-runs the handler after an
	// optimistic-concurrency loss.
	Run int
	// LeaseToken is the inbox lease that fences this attempt: new on every
	// acquisition, unchanged by renewals, "" on a fused route (no inbox
	// record before the commit). A library that writes outside the
	// handler's Result on the work's behalf fences those writes on it (the
	// effect log does); handlers rarely need it.
	LeaseToken string
}

// Key is the work item's idempotency key.
func (m *Message) Key() string { return m.Envelope.IdempotencyKey }

// Type is the message type.
func (m *Message) Type() string { return m.Envelope.MessageType }

// Aggregate is the aggregate the work is about.
func (m *Message) Aggregate() (aggregateType, aggregateID string) {
	return m.Envelope.AggregateType, m.Envelope.AggregateID
}

// AggregateVersion is the envelope's aggregateVersion, when it has one.
func (m *Message) AggregateVersion() (int64, bool) {
	if m.Envelope.AggregateVersion == nil {
		return 0, false
	}
	return *m.Envelope.AggregateVersion, true
}

// OccurredAt is when the producer says the event happened.
func (m *Message) OccurredAt() time.Time { return m.Envelope.OccurredAt }

// Payload is the payload as the producer sent it (JSON handlers decode its
// canonical form: see JSON); for an adapted body, what its adapter yields
// as payload, written compact with members sorted.
func (m *Message) Payload() json.RawMessage { return m.Envelope.Payload }

// Result is a handler's answer: the writes to commit with the inbox flip,
// and what the inbox records about the work.
type Result struct {
	// Writes commit atomically with the inbox flip (at most 99).
	Writes []Write
	// Outcome is recorded on the COMPLETED record. Default: APPLIED.
	Outcome string
	// ResultRef optionally points at what the work produced.
	ResultRef string
}

// Apply is the Result that commits writes.
func Apply(writes ...Write) Result { return Result{Writes: writes} }

// Handler turns a message into writes. It must not write by itself:
// everything it wants applied goes into Result.Writes. It may read. It
// returns Retryable or Terminal to choose what a failure means; any other
// error is retryable with HANDLER_ERROR (and an AWS SDK error that is
// throttling, a 5xx or a timeout is infrastructure trouble: retried
// without counting a business attempt).
type Handler interface {
	Handle(ctx context.Context, msg *Message) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, msg *Message) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg *Message) (Result, error) { return f(ctx, msg) }

// Validator is a payload that checks itself after decoding. JSON calls it.
type Validator interface {
	Validate() error
}

// ErrPayload is the sentinel of *PayloadError.
var ErrPayload = errors.New("ddbworker: invalid payload")

// PayloadError is a payload that did not decode into the handler's type or
// failed its Validate. JSON returns it as terminal INVALID_PAYLOAD: the same
// bytes will never decode.
type PayloadError struct {
	MessageType string
	Err         error
}

func (e *PayloadError) Error() string {
	return fmt.Sprintf("ddbworker: %s payload: %v", e.MessageType, e.Err)
}

// Unwrap returns ErrPayload and the decoding or validation error.
func (e *PayloadError) Unwrap() []error { return []error{ErrPayload, e.Err} }

// JSON adapts a handler of typed payloads: it decodes the payload into a
// fresh T with encoding/json (unknown fields are ignored, so producers may
// add fields), calls Validate when T or *T is a Validator, and only then
// calls fn. A payload that fails either never reaches fn: it ends terminal
// with CodeInvalidPayload and a *PayloadError.
//
// It decodes the canonical payload (envelope.Envelope.CanonicalPayload),
// the bytes the request hash covers, not the bytes as sent: copies of one
// work item that hash the same decode the same, whichever arrives first.
// So 1234.0 or 1.234e3 decode into an int64 as 1234, while 1234.5 does
// not.
func JSON[T any](fn func(ctx context.Context, msg *Message, payload T) (Result, error)) Handler {
	return HandlerFunc(func(ctx context.Context, msg *Message) (Result, error) {
		var p T
		raw, err := msg.Envelope.CanonicalPayload()
		if err == nil {
			err = json.Unmarshal(raw, &p)
		}
		if err == nil {
			if v, ok := any(&p).(Validator); ok {
				err = v.Validate()
			} else if v, ok := any(p).(Validator); ok {
				err = v.Validate()
			}
		}
		if err != nil {
			return Result{}, failure.Wrap(failure.Terminal, failure.CodeInvalidPayload, &PayloadError{MessageType: msg.Envelope.MessageType, Err: err})
		}
		return fn(ctx, msg, p)
	})
}

// Route is one registration: the handler of a message type, how it
// commits, and how it reads bodies that are not envelopes.
type Route struct {
	// Handler is the route's handler. Lookup returns it wrapped in the
	// registry's middleware and the route's (see Middleware).
	Handler Handler
	// Fused commits the inbox record COMPLETED inside the handler's
	// transaction (see Fused).
	Fused bool
	// SingleWrite commits the handler's one version-guarded write alone,
	// fenced in the domain item (see SingleWrite).
	SingleWrite bool
	// SkipInboxCheck drops the single-write fresh path's inbox check
	// (see SkipInboxCheck).
	SkipInboxCheck bool
	// Adapter, when set, reads the route's bodies that are not ddbworker's
	// envelope (see Adapt); the route takes envelopes of its type too.
	Adapter *envelope.Adapter
	// Middleware wraps this route's handler (With), inside the
	// registry's (Use).
	Middleware []Middleware
	// TenantField names the payload field whose value is the tenant of a
	// message that carries no MessageGroupId (see Tenant).
	TenantField string

	err error // an option's, reported by Register
}

// Middleware wraps a handler with cross-cutting code — a tenant on the
// context, a timer, an authorisation check, a log line — that runs around
// every handler it is registered for, with the handler's context and
// message. It returns the handler that runs in its place; that handler
// calls next.Handle (or does not, and returns its own Result or failure:
// a Terminal or Retryable error means what it means from a handler).
//
// Registered once for every route (Registry.Use) or for one (With).
// Order: the registry's middleware in the order Use added them, the first
// outermost, then the route's in the order With lists them, then the
// handler. So Use(a, b) and With(c) run a → b → c → handler and unwind
// c → b → a.
//
// The worker runs the chain inside the delivery: after the gate claimed
// the work, under its lease and the per-message deadline, and — with
// tracing on — inside the message's consumer span and its handler span
// (trace.SpanFromContext(ctx) is the handler span; attributes set there
// land on it, and a log record written with ctx carries its trace and span
// ids). It runs again on every handler run (a guard's Rerun runs the chain
// again, msg.Run counting). Middleware must not write on its own: the
// handler's writes commit in the Result, with the inbox flip. The test kit
// (ddbworkertest) runs the same chain, because it looks routes up in the
// Registry too.
type Middleware func(next Handler) Handler

// With adds middleware to one registration, inside the registry's (see
// Middleware for the order).
func With(mw ...Middleware) RouteOption {
	return func(r *Route) { r.Middleware = append(r.Middleware, mw...) }
}

// Chain wraps h in mw, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			h = mw[i](h)
		}
	}
	return h
}

// RouteOption adjusts one registration.
type RouteOption func(*Route)

// Tenant names the top-level payload field (a string or a number) that
// says a message's tenant when the message carries no SQS MessageGroupId —
// for producers that cannot set one, such as EventBridge targets or a
// service's own JSON (an adapted route's payload is the adapter's). The
// worker shares its concurrency and its write budget fairly among tenants
// (worker.FairConfig); a message with neither a group id nor the field is
// the default tenant's. The group id wins when both are there: it is what
// SQS's fair queues share by.
func Tenant(field string) RouteOption {
	return func(r *Route) {
		if field == "" {
			r.err = errors.Join(r.err, errors.New("ddbworker: Tenant needs a payload field name"))
		}
		r.TenantField = field
	}
}

// Fused opts a message type into the fused commit: the inbox record is
// written COMPLETED inside the handler's transaction, one DynamoDB round
// trip per fresh message instead of two. For handlers with pure DynamoDB
// effects that finish well within the lease (there is no PROCESSING phase
// and so no heartbeat). Failures fall back to the gated path.
func Fused() RouteOption { return func(r *Route) { r.Fused = true } }

// SingleWrite opts a message type into the single-write commit, for the
// most common handler of a single-table application: its effect is one
// item of its aggregate, guarded by the aggregate's version. The handler
// returns exactly one Put or Update with one NewerVersion guard (the
// message's aggregateVersion, or a per-aggregate sequence) — or one
// NewerThan guard (an event's timestamp: another work's event at the same
// instant is then superseded, not a reused key) — and any other guards; the worker commits it with one conditional UpdateItem or PutItem
// that also records, in the item, which work set that version, named as
// the inbox names work: the idempotency key, message type and request
// hash in the fence of the guard's version attribute, FenceKeyAttr(attr),
// FenceTypeAttr(attr) and FenceHashAttr(attr) (and the version attribute
// itself, which the handler may set only to the guard's version). Each
// version attribute has its own fence, so routes guarding one item by
// different version attributes do not disturb each other. The write's
// condition also requires that the fence does not name the work (its key
// with its type) already, so a work applies at most once whatever version
// its messages carry, while another type's work under the same key is
// other work, as in the inbox. A fresh message costs that one call and no
// inbox record.
//
// When the condition fails, the item as it was decides: a fence naming
// this work and its hash means the work applied already (a duplicate:
// acked, no write); a fence naming this work with another hash is the key
// reused for other work, terminal IDEMPOTENCY_HASH_MISMATCH with the
// alert; and otherwise, by the item's version, the same version set by
// this key's work of another type is the version guard's to judge (its
// policy, superseded by default, as on the gated route), the same version
// set by other work is terminal IDEMPOTENCY_HASH_MISMATCH with the alert,
// and a newer version supersedes the delivery (acked, nothing written). A
// fence written before fences named the type (no FenceTypeAttr) counts as
// naming its key's work of any type: the same hash is a duplicate, another
// is IDEMPOTENCY_HASH_MISMATCH (another type's work or the key reused: it
// cannot tell), so nothing applies twice. Failures are recorded
// in the inbox as on every route, and a redelivery (a receive count above
// one, or a message the DLQ tooling redrove) takes the gated path: the
// gate's lease and attempts, and the fenced write committed with the inbox
// flip.
//
// The fence names only the work of the item's newest version, and no
// inbox record is written for applied work (that is the route's point),
// so what a delivery of older work finds cannot say whether that work
// applied before. Hence, on this route:
//
//   - superseded (the outcome label, the worker_message_superseded log
//     line, and the COMPLETED SUPERSEDED record a redelivery on the gated
//     path writes) means "not applied by this delivery: the item already
//     holds a newer version" — the work may have applied earlier. A late
//     duplicate of work K1@v1 that applied before K2@v2 is reported
//     superseded, not duplicate; the item's state is right either way;
//   - key reuse is detected only against the newest fence: after K1@v1
//     and K2@v2, a message reusing K1 for other work at v3 applies (at v1,
//     it is superseded);
//   - `ddbworker inbox get KEY --item …` can answer "applied" only for
//     the work each fence names; for any other key it cannot tell applied
//     and overtaken from superseded or not applied.
//
// A result with no write at all — the handler decided there is nothing
// to do — is accepted: it completes with no DynamoDB call, reported with
// its outcome (applied, or Result.Outcome when the handler names one, such
// as NOTHING_TO_DO, which the log line shows as its result and the
// outcome metric counts as applied, like any handler's own outcome), with
// no commit time and no inbox record. Nothing remembers it: a duplicate or
// a redelivery runs the handler again and commits what it returns then,
// so return no write only for a decision a later run would make the same
// way (or may revisit).
//
// The fresh path checks, in the same call, that the work has no inbox
// record: the write and a ConditionCheck on the record's key commit in one
// TransactWriteItems (2 write units per started KB of the item, plus 2 for
// the check: 4 for an item of at most 1 KB). A message that comes back
// with nothing to say it was here before — moved back from the DLQ by
// SQS's own redrive, or a producer's resend of work that failed
// terminally or is held under a lease — finds the record and is decided
// from it under the gate, as on every route: it neither applies work the
// inbox recorded as failed nor leaves a record PROCESSING behind an
// application. SkipInboxCheck trades that for a plain UpdateItem or
// PutItem (1 unit).
//
// What else it gives up, and so what it is not for: a result of another
// shape is refused (terminal INVALID_HANDLER_RESULT, at its first
// message). For several writes, or to answer for every key, use Fused or
// the default.
func SingleWrite() RouteOption { return func(r *Route) { r.SingleWrite = true } }

// SkipInboxCheck makes a single-write route's fresh path one plain
// conditional UpdateItem or PutItem — 1 write unit for an item of at most
// 1 KB instead of the transaction's 4 — without checking that the work has
// no inbox record. The worker still sends every message it knows may have
// a record (a redelivery, ddbworker's own re-sends, DLQ copies and `dlq
// redrive`, a message SQS names a DLQ source for) through the gate; what it
// cannot know is a message that comes back unmarked. Use it only where
// none does: nobody runs SQS's own DLQ redrive (StartMessageMoveTask, the
// console's "Start DLQ redrive") on the queue, producers never resend work
// that failed terminally, and `dlq redrive` reports no dropped
// ddbworker.redrivenFrom. Otherwise such a message applies work whose
// record says it failed terminally, or leaves a PROCESSING record that
// the sweeper then reports LEASE_ABANDONED. Only with SingleWrite.
func SkipInboxCheck() RouteOption { return func(r *Route) { r.SkipInboxCheck = true } }

// FenceKeyAttr is the attribute that holds the idempotency key of the work
// that set versionAttr on a single-write route (mutation.FenceKeyPrefix +
// versionAttr).
func FenceKeyAttr(versionAttr string) string { return mutation.FenceKeyAttr(versionAttr) }

// FenceTypeAttr is the attribute that holds the message type of the work
// that set versionAttr on a single-write route (mutation.FenceTypePrefix +
// versionAttr); absent on a fence written before fences named the type.
func FenceTypeAttr(versionAttr string) string { return mutation.FenceTypeAttr(versionAttr) }

// FenceHashAttr is the attribute that holds the request hash of the work
// that set versionAttr on a single-write route (mutation.FenceHashPrefix +
// versionAttr).
func FenceHashAttr(versionAttr string) string { return mutation.FenceHashAttr(versionAttr) }

// ErrRouteOptions reports a registration whose options contradict each
// other.
var ErrRouteOptions = errors.New("ddbworker: route options conflict")

// Registry maps message types to handlers. Register everything before
// giving it to a worker, which copies it.
type Registry struct {
	routes   map[string]Route
	adapters *envelope.Adapters // the adapted routes, in registration order
	use      []Middleware
}

// Use adds middleware that wraps every route's handler — those registered
// before and after it — outside each route's own (see Middleware for the
// order).
func (r *Registry) Use(mw ...Middleware) { r.use = append(r.use, mw...) }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{routes: map[string]Route{}} }

// ErrDuplicateRoute reports a second registration of one message type.
var ErrDuplicateRoute = errors.New("ddbworker: message type registered twice")

// Register routes messageType to h. An adapted route (Adapt) must have a
// valid message type (1..128 characters of [A-Za-z0-9._-]), and is
// refused when an adapted route registered before it would take every
// body it could: the earlier route is asked first (see BodyAdapter).
func (r *Registry) Register(messageType string, h Handler, opts ...RouteOption) error {
	if messageType == "" || h == nil {
		return errors.New("ddbworker: Register needs a message type and a handler")
	}
	if _, ok := r.routes[messageType]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateRoute, messageType)
	}
	rt := Route{Handler: h}
	for _, o := range opts {
		o(&rt)
	}
	if rt.err != nil {
		return fmt.Errorf("ddbworker: Register(%q): %w", messageType, rt.err)
	}
	if rt.Fused && rt.SingleWrite {
		return fmt.Errorf("%w: %s is both Fused and SingleWrite", ErrRouteOptions, messageType)
	}
	if rt.SkipInboxCheck && !rt.SingleWrite {
		return fmt.Errorf("%w: %s has SkipInboxCheck without SingleWrite (only that route's fresh path checks the inbox in its write)", ErrRouteOptions, messageType)
	}
	if rt.Adapter != nil {
		as, err := r.adapters.With(messageType, rt.Adapter)
		if err != nil {
			return fmt.Errorf("ddbworker: Register(%q): %w", messageType, err)
		}
		r.adapters = as
	}
	r.routes[messageType] = rt
	return nil
}

// Adapters lists the adapted routes' adapters in registration order: what
// an engine (the worker, ddbworkertest) reads bodies with
// (envelope.Decoder.Read). Nil when no route is adapted.
func (r *Registry) Adapters() *envelope.Adapters { return r.adapters }

// Types lists the registered message types, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.routes))
	for t := range r.routes {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Lookup returns the route of messageType, its Handler wrapped in the
// registry's middleware and then the route's: the handler that runs.
func (r *Registry) Lookup(messageType string) (Route, bool) {
	rt, ok := r.routes[messageType]
	if !ok {
		return rt, false
	}
	if len(r.use) > 0 || len(rt.Middleware) > 0 {
		rt.Handler = Chain(Chain(rt.Handler, rt.Middleware...), r.use...)
	}
	return rt, true
}

// Codes the worker assigns that a handler may want to compare against or
// return itself.
const (
	CodeInvalidPayload = failure.CodeInvalidPayload
	CodeHandlerError   = failure.CodeHandlerError
)

// Retryable is a failure that may heal: the worker records it, backs off and
// runs the work again, counting a business attempt (the message's
// attemptPolicy, or the worker's default, bounds them).
func Retryable(code, message string) error { return failure.NewRetryable(code, message) }

// Terminal is a failure that will not heal: the work ends FAILED_TERMINAL
// with code and the terminal policy (DLQ by default) applies.
func Terminal(code, message string) error { return failure.NewTerminal(code, message) }

// IsTerminal reports whether err is (or wraps) a terminal failure.
func IsTerminal(err error) bool { return errors.Is(err, failure.ErrTerminal) }
