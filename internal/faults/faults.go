package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// Phase says when a rule fires.
type Phase int

const (
	// BeforeSend fails the attempt before it leaves: the server never sees it.
	BeforeSend Phase = iota + 1
	// AfterApply sends the attempt, lets the server apply it, then loses the
	// response: the caller sees a connection reset (an ambiguous outcome).
	AfterApply
)

// Kind names an injected fault for the tallies.
type Kind string

// Fault kinds.
const (
	KindThrottle     Kind = "throttle"
	KindConflict     Kind = "transaction_conflict"
	KindTimeout      Kind = "timeout"
	KindLostResponse Kind = "lost_response"
	KindServerError  Kind = "server_error"
	KindDelay        Kind = "delay"
	KindSQSError     Kind = "sqs_error"
	KindHook         Kind = "hook"
)

// Rule is one fault.
type Rule struct {
	// Service is "DynamoDB" or "SQS"; empty matches both.
	Service string
	// Operation, e.g. "TransactWriteItems"; empty matches all.
	Operation string
	// Kind of fault; it chooses the error (and Phase for KindLostResponse).
	Kind Kind
	// Times fires the rule on the next Times matching attempts; 0 means
	// every matching attempt with probability Rate.
	Times int
	// Rate is the firing probability when Times is 0.
	Rate float64
	// Delay is slept before sending (KindDelay) — to push work past a
	// visibility timeout or a deadline.
	Delay time.Duration
	// Match, when set, must accept the operation input.
	Match func(input any) bool
	// Err, when set, is the error the rule fails the attempt with (before
	// it is sent), instead of the one Kind chooses.
	Err error
	// Hook, when set, runs just before the attempt is sent, which then goes
	// on normally: a concurrent writer whose change lands between two calls.
	Hook func(ctx context.Context, input any)
}

type rule struct {
	Rule
	left int
}

// Injector holds rules and tallies; its methods are safe for concurrent
// use. Attach it to clients with DynamoDB and SQS.
type Injector struct {
	// OnFire, when set before the injector is installed, is called each
	// time a rule fires (outside the injector's lock).
	OnFire func(kind Kind, service, operation string)

	mu    sync.Mutex
	rules []*rule
	calls map[string]int // per "Service.Operation": API calls (not attempts)
	fired map[Kind]int
	rng   *rand.Rand
}

// New returns an Injector without rules.
func New(seed uint64) *Injector {
	return &Injector{calls: map[string]int{}, fired: map[Kind]int{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Add installs a rule.
func (i *Injector) Add(r Rule) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rules = append(i.rules, &rule{Rule: r, left: r.Times})
}

// Clear removes every rule (tallies stay).
func (i *Injector) Clear() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rules = nil
}

// ResetCalls zeroes the call tallies.
func (i *Injector) ResetCalls() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.calls = map[string]int{}
}

// Calls returns the API calls made per "Service.Operation" (an SDK retry is
// one call).
func (i *Injector) Calls() map[string]int {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[string]int, len(i.calls))
	for k, v := range i.calls {
		out[k] = v
	}
	return out
}

// ServiceCalls sums Calls for one service.
func (i *Injector) ServiceCalls(service string) int {
	n := 0
	for k, v := range i.Calls() {
		if len(k) > len(service) && k[:len(service)+1] == service+"." {
			n += v
		}
	}
	return n
}

// Fired returns how often each kind fired.
func (i *Injector) Fired() map[Kind]int {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[Kind]int, len(i.fired))
	for k, v := range i.fired {
		out[k] = v
	}
	return out
}

// DynamoDB is a dynamodb option func that installs the injector.
func (i *Injector) DynamoDB(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, i.install)
}

// SQS is an sqs option func that installs the injector.
func (i *Injector) SQS(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, i.install)
}

func (i *Injector) install(stack *middleware.Stack) error {
	count := middleware.InitializeMiddlewareFunc("faults.count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		i.mu.Lock()
		i.calls[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
		i.mu.Unlock()
		return next.HandleInitialize(context.WithValue(ctx, inputKey{}, in.Parameters), in)
	})
	if err := stack.Initialize.Add(count, middleware.Before); err != nil {
		return err
	}
	// Inside the retry loop: the SDK retries injected errors the way it
	// retries real ones.
	inject := middleware.FinalizeMiddlewareFunc("faults.inject", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
		r := i.pick(service, op, ctx)
		if r == nil {
			return next.HandleFinalize(ctx, in)
		}
		if i.OnFire != nil {
			i.OnFire(r.Kind, service, op)
		}
		switch {
		case r.Hook != nil:
			r.Hook(ctx, ctx.Value(inputKey{}))
			return next.HandleFinalize(ctx, in)
		case r.Err != nil:
			return middleware.FinalizeOutput{}, middleware.Metadata{}, r.Err
		}
		switch r.Kind {
		case KindDelay:
			select {
			case <-time.After(r.Delay):
			case <-ctx.Done():
				return middleware.FinalizeOutput{}, middleware.Metadata{}, ctx.Err()
			}
			return next.HandleFinalize(ctx, in)
		case KindLostResponse:
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil {
				return out, md, err
			}
			return middleware.FinalizeOutput{}, md, &LostResponseError{Operation: op}
		default:
			return middleware.FinalizeOutput{}, middleware.Metadata{}, errorFor(r.Kind, op, ctx.Value(inputKey{}))
		}
	})
	return stack.Finalize.Insert(inject, "Retry", middleware.After)
}

// inputKey carries the operation input to pick (set by an initialize step).
type inputKey struct{}

func (i *Injector) pick(service, op string, ctx context.Context) *rule {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.rules {
		if (r.Service != "" && r.Service != service) || (r.Operation != "" && r.Operation != op) {
			continue
		}
		if r.Match != nil {
			if in := ctx.Value(inputKey{}); in == nil || !r.Match(in) {
				continue
			}
		}
		if r.Times > 0 {
			if r.left == 0 {
				continue
			}
			r.left--
		} else if i.rng.Float64() >= r.Rate {
			continue
		}
		i.fired[r.Kind]++
		return r
	}
	return nil
}

// LostResponseError is what a caller sees when the server applied the
// request and the response was lost: the SDK treats it as a connection
// reset and retries.
type LostResponseError struct{ Operation string }

func (e *LostResponseError) Error() string {
	return fmt.Sprintf("faults: %s: read: connection reset by peer (injected: response lost after the server applied the request)", e.Operation)
}

// TimeoutError is an injected timeout before the request left.
type TimeoutError struct{ Operation string }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("faults: %s: i/o timeout (injected before send)", e.Operation)
}

// Timeout marks the error as a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// Temporary marks the error as transient.
func (e *TimeoutError) Temporary() bool { return true }

func errorFor(k Kind, op string, input any) error {
	switch k {
	case KindThrottle:
		code := "ThrottlingException"
		if op == "TransactWriteItems" || op == "PutItem" || op == "UpdateItem" {
			code = "ProvisionedThroughputExceededException"
		}
		return &smithy.GenericAPIError{Code: code, Message: "injected: rate of requests exceeds the allowed throughput", Fault: smithy.FaultServer}
	case KindConflict:
		// As AWS reports it: one reason per action, the conflicting one
		// TransactionConflict, the others None.
		n := 1
		if in, ok := input.(*dynamodb.TransactWriteItemsInput); ok && len(in.TransactItems) > 0 {
			n = len(in.TransactItems)
		}
		reasons := make([]types.CancellationReason, n)
		for j := range reasons {
			reasons[j] = types.CancellationReason{Code: aws.String("None")}
		}
		reasons[0] = types.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String("Transaction is ongoing for the item (injected)")}
		return &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict] (injected)"),
			CancellationReasons: reasons,
		}
	case KindTimeout:
		return &TimeoutError{Operation: op}
	case KindServerError:
		return &smithy.GenericAPIError{Code: "InternalServerError", Message: "injected 500", Fault: smithy.FaultServer}
	case KindSQSError:
		return &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.InternalError", Message: "injected SQS failure", Fault: smithy.FaultServer}
	}
	return errors.New("faults: unknown kind " + string(k))
}
