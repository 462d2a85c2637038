package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/mutation"
)

// Message is what a handler sees of one delivery.
type Message struct {
	// Envelope is the decoded, validated envelope.
	Envelope *envelope.Envelope
	// SQSMessageID is the SQS message id of this delivery (not the work's
	// identity: that is Envelope.IdempotencyKey).
	SQSMessageID string
	// ReceiveCount is SQS's ApproximateReceiveCount.
	ReceiveCount int
	// Attempt is the business attempt, counted in the inbox (1 first).
	Attempt int
	// Run counts handler runs within this attempt (0 first); it grows when a
	// Retry guard re-runs the handler after an optimistic-concurrency loss.
	Run int
}

// Result is a handler's answer: the domain writes to commit with the inbox
// flip, and what the inbox should record.
type Result struct {
	Writes    []mutation.Write
	Outcome   string // default APPLIED
	ResultRef string
}

// Handler turns a message into domain writes. It must not write by itself:
// everything it wants applied goes into Result.Writes, so the writes commit
// atomically with the inbox flip or not at all. It may read. It returns a
// *failure.Error to choose retryable or terminal with a code; any other
// error is retryable with HANDLER_ERROR.
type Handler interface {
	Handle(ctx context.Context, msg *Message) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, msg *Message) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg *Message) (Result, error) { return f(ctx, msg) }

type route struct {
	handler Handler
	fused   bool
}

// RouteOption adjusts one registration.
type RouteOption func(*route)

// Fused opts a message type into the fused commit: the inbox record is
// written COMPLETED inside the handler's transaction, one DynamoDB round
// trip per fresh message instead of two. For handlers with pure DynamoDB
// effects that finish well within the lease (there is no PROCESSING phase
// and so no heartbeat). Failures fall back to the gated path.
func Fused() RouteOption { return func(r *route) { r.fused = true } }

// Registry maps message types to handlers. Register everything before
// passing it to New; New copies it.
type Registry struct {
	routes map[string]route
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{routes: map[string]route{}} }

// ErrDuplicateRoute reports a second registration of one message type.
var ErrDuplicateRoute = errors.New("worker: message type registered twice")

// Register routes messageType to h.
func (r *Registry) Register(messageType string, h Handler, opts ...RouteOption) error {
	if messageType == "" || h == nil {
		return errors.New("worker: Register needs a message type and a handler")
	}
	if _, ok := r.routes[messageType]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateRoute, messageType)
	}
	rt := route{handler: h}
	for _, o := range opts {
		o(&rt)
	}
	r.routes[messageType] = rt
	return nil
}

// Types lists the registered message types.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.routes))
	for t := range r.routes {
		out = append(out, t)
	}
	return out
}
