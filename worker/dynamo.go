package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/time/rate"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/tables"
)

// Retries, and who owns them:
//
//   - Within one DynamoDB call, the SDK's standard retryer, configured here
//     for every call the worker makes: Config.CallAttempts attempts (3),
//     backoff capped at callMaxBackoff, no client-side retry quota (the
//     health gate is the circuit breaker; a drained quota fails calls with
//     its own error long after a storm ended), and no retry once the gate
//     has tripped (dbCalls.callOpt). Config.CallTimeout bounds the call,
//     all attempts included.
//   - Across calls, database-wide trouble is the health gate's: it stops
//     receiving, parks what it holds, and probes; nothing else retries
//     while the database is unhealthy.
//   - A hot key range (throttling whose reasons all name a key range) is
//     its key's: the key is parked with its own backoff and probed
//     (hotkey.go); the SDK does not retry it within the call, and it
//     feeds neither the health gate nor the concurrency limit.
//   - Per work item, the visibility backoff: a retryable failure hides the
//     message (business failures count attempts; infrastructure ones do
//     not).
//   - A lost optimistic race (a Retry guard) re-runs the handler within the
//     lease, MaxGuardRetries times.
//
// None of them multiplies another: a failing call costs at most
// CallAttempts requests, and once the detector trips no new work makes any.

// callMaxBackoff caps the SDK's wait between the attempts of one call.
const callMaxBackoff = time.Second

// dbResult classifies a finished DynamoDB call for the health detector, the
// concurrency limit and the metrics.
type dbResult int

const (
	dbOK              dbResult = iota // answered (also: a condition failed, a request refused)
	dbConflict                        // a transaction conflict: contention, not sickness
	dbThrottled                       // throttling
	dbUnavailable                     // 5xx or a transport error
	dbTimeout                         // the call timed out
	dbCancelled                       // the caller gave up (shutdown): says nothing
	dbConditionFailed                 // a condition failed (answered)
	dbRequestRefused                  // validation and other 4xx (answered)
	dbCleanupOK                       // a cleanup answered: says nothing of health
	// dbKeyThrottled: throttling confined to one key range
	// (failure.KeyRangeThrottle): a hot key, which the worker parks
	// (hotkey.go); not the database's sickness — it feeds neither the
	// health gate nor the concurrency limit.
	dbKeyThrottled
	dbResultCount
)

var dbResultNames = [dbResultCount]string{"ok", "conflict", "throttled", "unavailable", "timeout", "cancelled", "condition_failed", "refused", "ok", "throttled_key"}

// unhealthy reports whether r counts against the database's health.
func (r dbResult) unhealthy() bool {
	return r == dbThrottled || r == dbUnavailable || r == dbTimeout
}

// classifyCall reads err of a call made with parent context parent.
func classifyCall(parent context.Context, err error) dbResult {
	if err == nil {
		return dbOK
	}
	if parent.Err() != nil {
		return dbCancelled
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return dbConditionFailed
	}
	if failure.KeyRangeThrottle(err) {
		return dbKeyThrottled
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		result := dbConditionFailed
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				return dbThrottled
			case "TransactionConflict":
				result = dbConflict
			}
		}
		return result
	}
	var tip *types.TransactionInProgressException
	if errors.As(err, &tip) {
		return dbConflict
	}
	f := failure.Classify(err, "")
	switch f.Code {
	case failure.CodeThrottled:
		return dbThrottled
	case failure.CodeTimeout:
		return dbTimeout
	case failure.CodeServiceUnavailable:
		return dbUnavailable
	case failure.CodeReplicatedWriteConflict:
		return dbConflict // another Region's write to the item: contention, not sickness
	}
	return dbRequestRefused
}

// dbCalls is the worker's DynamoDB: every call the gate, the committer, the
// renewer and the prober make goes through it. It gives each call its
// timeout and the worker's retry policy, paces writes to the write budget,
// and reports each outcome to observe.
type dbCalls struct {
	api     DynamoDBAPI
	timeout time.Duration
	opt     func(*dynamodb.Options)
	budget  *rate.Limiter // nil: unpaced
	fair    *fairPacer    // shares budget among tenants (fair.go)
	now     func() time.Time
	// observe is told every finished call: its operation, result, latency
	// and the error.
	observe func(op string, r dbResult, latency time.Duration, err error)
	// paced is told how long a write waited for the budget.
	paced func(time.Duration)
	// spent is told the write units a call cost under a budget: what
	// DynamoDB reported, or the estimate charged when that was larger.
	spent func(units float64)
	// callOpt is opt for the calls made through call: their retries are
	// not sent once sick reports the health gate tripped (gatedRetryer).
	// A call in flight when the gate trips would otherwise go on with its
	// retries, CallAttempts requests for each call in flight, to a
	// database the worker knows is sick — a burst as large as the
	// concurrency limit in the second after the trip, across all the
	// concurrent invocations of a Lambda execution environment. The
	// probe keeps opt: it retries as the calls did when they tripped the
	// gate.
	callOpt func(*dynamodb.Options)
	// sick reports that the health gate has tripped (nil: never).
	sick func() bool
}

func newDBCalls(api DynamoDBAPI, timeout time.Duration, attempts int, maxWCU float64, now func() time.Time,
	observe func(string, dbResult, time.Duration, error)) *dbCalls {
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = callMaxBackoff
		o.RateLimiter = ratelimit.None
		// A hot key range is not retried within the call: its key is
		// parked (hotkey.go), whose probes are the only retries it gets,
		// so that a hot key sees a probe, not CallAttempts requests per
		// message.
		o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			if failure.KeyRangeThrottle(err) {
				return aws.FalseTernary
			}
			return aws.UnknownTernary
		})}, o.Retryables...)
	})
	c := &dbCalls{api: api, timeout: timeout, now: now, observe: observe,
		opt: func(o *dynamodb.Options) { o.Retryer = retryer }}
	whileHealthy := gatedRetryer{sick: c.isSick, RetryerV2: retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = callMaxBackoff
		o.RateLimiter = ratelimit.None
	})}
	c.callOpt = func(o *dynamodb.Options) { o.Retryer = whileHealthy }
	if maxWCU > 0 {
		c.budget = rate.NewLimiter(rate.Limit(maxWCU), max(1, int(math.Ceil(maxWCU))))
		c.fair = newFairPacer(c.budget)
	}
	return c
}

func (c *dbCalls) isSick() bool { return c.sick != nil && c.sick() }

// gatedRetryer is the retryer of the calls made through call: the
// standard one, but a retry is not sent once the health gate has tripped
// (sick), even one decided before — it waited its backoff while the gate
// tripped. The call fails with the error of its last attempt. A cleanup's
// retries (giving a lease back) are sent: the gate's recovery gives back
// the leases let go during the outage before it turns healthy.
type gatedRetryer struct {
	aws.RetryerV2
	sick func() bool
}

type callAttemptsKey struct{}

// callAttempts is one call's attempts so far and its last retried error.
type callAttempts struct {
	mu   sync.Mutex
	n    int
	last error
}

func (r gatedRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if a, ok := ctx.Value(callAttemptsKey{}).(*callAttempts); ok {
		a.mu.Lock()
		a.n++
		n, last := a.n, a.last
		a.mu.Unlock()
		if n > 1 && last != nil && r.sick() && !cleanup(ctx) {
			return nil, fmt.Errorf("worker: not retried, the database is unhealthy: %w", last)
		}
	}
	return r.RetryerV2.GetAttemptToken(ctx)
}

func (r gatedRetryer) GetRetryToken(ctx context.Context, err error) (func(error) error, error) {
	if a, ok := ctx.Value(callAttemptsKey{}).(*callAttempts); ok {
		a.mu.Lock()
		a.last = err
		a.mu.Unlock()
	}
	return r.RetryerV2.GetRetryToken(ctx, err)
}

// call runs one DynamoDB operation under the worker's policy; wcu is the
// write's estimated cost, charged to the budget before it is sent, and
// consumed reads what DynamoDB reports afterwards (nil: nothing reported).
func call[In, Out any](c *dbCalls, ctx context.Context, op string, in In, wcu int,
	do func(context.Context, In, ...func(*dynamodb.Options)) (Out, error), consumed func(Out) float64, optFns []func(*dynamodb.Options)) (Out, error) {
	if err := c.pace(ctx, wcu); err != nil {
		var zero Out
		return zero, err
	}
	callCtx, cancel := context.WithTimeout(context.WithValue(ctx, callAttemptsKey{}, &callAttempts{}), c.timeout)
	defer cancel()
	start := c.now()
	out, err := do(callCtx, in, append(optFns, c.callOpt)...)
	latency := c.now().Sub(start)
	charged := wcu
	if err == nil && c.budget != nil && consumed != nil {
		if used := int(math.Ceil(consumed(out))); used > wcu {
			c.budget.ReserveN(c.now(), min(used-wcu, c.budget.Burst())) // the next writes wait it off
			charged = used
		}
	}
	if c.budget != nil && c.spent != nil && charged > 0 {
		c.spent(float64(charged))
	}
	r := classifyCall(ctx, err)
	if r == dbOK && cleanup(ctx) {
		// A cleanup that answered says nothing of whether work can go on:
		// it must not outweigh the failures that led to it.
		r = dbCleanupOK
	}
	c.observe(op, r, latency, err)
	return out, err
}

type cleanupKey struct{}

// asCleanup marks ctx's calls as cleanups after a failure (giving a lease
// back): their successes are not counted as the database's health.
func asCleanup(ctx context.Context) context.Context {
	return context.WithValue(ctx, cleanupKey{}, true)
}

func cleanup(ctx context.Context) bool { v, _ := ctx.Value(cleanupKey{}).(bool); return v }

// pace waits until the write budget allows wcu more units, in its
// tenant's turn (fairPacer).
func (c *dbCalls) pace(ctx context.Context, wcu int) error {
	if c.budget == nil || wcu <= 0 {
		return nil
	}
	start := c.now()
	err := c.fair.waitN(ctx, tenantFrom(ctx), min(wcu, c.budget.Burst()), c.now)
	if c.paced != nil {
		c.paced(c.now().Sub(start))
	}
	return err
}

func (c *dbCalls) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.budget != nil {
		cp := *in
		cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		in = &cp
	}
	return call(c, ctx, "PutItem", in, putWCU(in.Item), c.api.PutItem, func(o *dynamodb.PutItemOutput) float64 {
		return capacityUnits(o.ConsumedCapacity)
	}, optFns)
}

func (c *dbCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.budget != nil {
		cp := *in
		cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		in = &cp
	}
	return call(c, ctx, "UpdateItem", in, 1, c.api.UpdateItem, func(o *dynamodb.UpdateItemOutput) float64 {
		return capacityUnits(o.ConsumedCapacity)
	}, optFns)
}

func (c *dbCalls) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if c.budget != nil {
		cp := *in
		cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		in = &cp
	}
	return call(c, ctx, "TransactWriteItems", in, transactWCU(in.TransactItems), c.api.TransactWriteItems, func(o *dynamodb.TransactWriteItemsOutput) float64 {
		total := 0.0
		for i := range o.ConsumedCapacity {
			total += capacityUnits(&o.ConsumedCapacity[i])
		}
		return total
	}, optFns)
}

func capacityUnits(c *types.ConsumedCapacity) float64 {
	if c == nil {
		return 0
	}
	if c.WriteCapacityUnits != nil {
		return *c.WriteCapacityUnits
	}
	return aws.ToFloat64(c.CapacityUnits)
}

// putWCU estimates a PutItem's write units from the item's size, as AWS
// charges them: 1 per started KB, plus 1 for the aggregate index entry
// (KEYS_ONLY, written once at the gate).
func putWCU(item map[string]types.AttributeValue) int {
	return int(math.Ceil(float64(max(1, tables.ItemSize(item)))/1024)) + 1
}

// transactWCU estimates a transaction's write units: 2 per started KB of
// each item a Put writes, and 2 per Update, Delete or ConditionCheck (their
// items are not known here; DynamoDB's ReturnConsumedCapacity corrects the
// estimate afterwards).
func transactWCU(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		if it.Put != nil {
			n += 2 * int(math.Ceil(float64(max(1, tables.ItemSize(it.Put.Item)))/1024))
			continue
		}
		n += 2
	}
	return n
}
