package worker_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// itemConflicts emulates what DynamoDB Local never does (docs: "never
// raised, even with 16 concurrent transactions on one item"): AWS's
// item-level conflict between a transaction and a plain write. A
// TransactWriteItems touching an item while an UpdateItem on it is in
// flight is cancelled with a TransactionConflict reason; an UpdateItem on an
// item a transaction is writing fails with TransactionConflictException.
// Lease renewals (an UpdateItem setting leaseExpiresAt, not status) and
// commits (a transaction writing an inbox item) are delayed so that they
// overlap when nothing keeps them apart. It works per attempt (after the
// SDK's retry step), like the fault injector.
type itemConflicts struct {
	renewDelay, commitDelay time.Duration

	mu        sync.Mutex
	updating  map[string]int // item → UpdateItems in flight
	writing   map[string]int // item → transactions in flight
	conflicts []string
	renewals  atomic.Int32 // renewal attempts
	commits   atomic.Int32 // commit attempts
}

type conflictInputKey struct{}

func (c *itemConflicts) install(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		stash := middleware.InitializeMiddlewareFunc("regress.conflicts.input", func(ctx context.Context, in middleware.InitializeInput,
			next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(context.WithValue(ctx, conflictInputKey{}, in.Parameters), in)
		})
		if err := stack.Initialize.Add(stash, middleware.After); err != nil {
			return err
		}
		act := middleware.FinalizeMiddlewareFunc("regress.conflicts", func(ctx context.Context, in middleware.FinalizeInput,
			next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			switch p := ctx.Value(conflictInputKey{}).(type) {
			case *dynamodb.UpdateItemInput:
				return c.update(ctx, p, func() (middleware.FinalizeOutput, middleware.Metadata, error) { return next.HandleFinalize(ctx, in) })
			case *dynamodb.TransactWriteItemsInput:
				return c.transact(ctx, p, func() (middleware.FinalizeOutput, middleware.Metadata, error) { return next.HandleFinalize(ctx, in) })
			}
			return next.HandleFinalize(ctx, in)
		})
		return stack.Finalize.Insert(act, "Retry", middleware.After)
	})
}

type finalizeFn func() (middleware.FinalizeOutput, middleware.Metadata, error)

// isRenewal reports whether in is a lease renewal: its update expression
// sets leaseExpiresAt and leaves status alone (the fence's condition reads
// status; that does not count).
func isRenewal(in *dynamodb.UpdateItemInput) bool {
	var updated []string
	for _, p := range placeholder.FindAllString(aws.ToString(in.UpdateExpression), -1) {
		updated = append(updated, in.ExpressionAttributeNames[p])
	}
	return slices.Contains(updated, attr.LeaseExpiresAt) && !slices.Contains(updated, attr.Status)
}

var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

func isCommit(in *dynamodb.TransactWriteItemsInput) bool {
	for _, it := range in.TransactItems {
		if it.Update != nil {
			if pk, ok := it.Update.Key[tables.DefaultLayout().PartitionKey].(*ddbtypes.AttributeValueMemberS); ok && len(pk.Value) > 6 && pk.Value[:6] == "IDEMP#" {
				return true
			}
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *itemConflicts) update(ctx context.Context, in *dynamodb.UpdateItemInput, next finalizeFn) (middleware.FinalizeOutput, middleware.Metadata, error) {
	k := itemKey(in.TableName, in.Key)
	renewal := isRenewal(in)
	if renewal {
		c.renewals.Add(1)
	}
	c.mu.Lock()
	if c.writing[k] > 0 {
		c.conflicts = append(c.conflicts, "UpdateItem on "+k+" while a transaction writes it")
		c.mu.Unlock()
		return middleware.FinalizeOutput{}, middleware.Metadata{}, &ddbtypes.TransactionConflictException{
			Message: aws.String("Transaction is ongoing for the item (emulated)")}
	}
	c.updating[k]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.updating[k]--
		c.mu.Unlock()
	}()
	if renewal {
		if err := sleepCtx(ctx, c.renewDelay); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	return next()
}

func (c *itemConflicts) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, next finalizeFn) (middleware.FinalizeOutput, middleware.Metadata, error) {
	keys := transactItemKeys(in)
	commit := isCommit(in)
	if commit {
		c.commits.Add(1)
	}
	c.mu.Lock()
	reasons := make([]ddbtypes.CancellationReason, len(keys))
	conflict := false
	for i, k := range keys {
		reasons[i] = ddbtypes.CancellationReason{Code: aws.String("None")}
		if c.updating[k] > 0 {
			conflict = true
			reasons[i] = ddbtypes.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String("Transaction is ongoing for the item (emulated)")}
			c.conflicts = append(c.conflicts, "TransactWriteItems on "+k+" while an UpdateItem writes it")
		}
	}
	if conflict {
		c.mu.Unlock()
		return middleware.FinalizeOutput{}, middleware.Metadata{}, &ddbtypes.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict] (emulated)"),
			CancellationReasons: reasons,
		}
	}
	for _, k := range keys {
		c.writing[k]++
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, k := range keys {
			c.writing[k]--
		}
		c.mu.Unlock()
	}()
	if commit {
		if err := sleepCtx(ctx, c.commitDelay); err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
	}
	return next()
}

func (c *itemConflicts) Conflicts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.conflicts...)
}

// Old behaviour: the heartbeat renewed the lease (a fenced UpdateItem on
// the inbox item) whenever its timer fired, also while the commit (a
// TransactWriteItems on the same item) was in flight. On AWS one of the two
// then fails with a transaction conflict: the commit is cancelled (a retry,
// the work delayed by a backoff) or the renewal fails — the worker
// conflicting with itself. DynamoDB Local never raises the conflict, so the
// test emulates it and makes the two overlap: the lease is 2s, the
// heartbeat renews at 1s, the handler returns at 1.1s, and renewals and
// commits each take 800ms more. Any overlap is a conflict the middleware
// counts; the test requires none, and the work applied on its first
// attempt without a retry.
func TestRegressHeartbeatNeverConflictsWithCommit(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	conf := &itemConflicts{renewDelay: 800 * time.Millisecond, commitDelay: 800 * time.Millisecond,
		updating: map[string]int{}, writing: map[string]int{}}
	ddb := dynamodb.NewFromConfig(h.env.AWS, h.inj.DynamoDB, conf.install)

	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if err := sleepCtx(ctx, 1100*time.Millisecond); err != nil { // the handler's own work, just past the first renewal
			return ddbworker.Result{}, err
		}
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))
	cfg := h.testConfig()
	cfg.VisibilityTimeout = 2 * time.Second // the heartbeat renews at 1s
	h.start(cfg, worker.Deps{Handlers: reg, DynamoDB: ddb})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-beat", "c1", "intake", effective)))

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Positive(t, conf.renewals.Load(), "precondition: the heartbeat renewed the lease while the handler ran")
	require.Positive(t, conf.commits.Load(), "precondition: the work was committed")
	require.Empty(t, conf.Conflicts(), "the worker's own renewal and commit overlapped on the inbox item; events: %+v", h.allEvents())
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, 1, ev.Attempt)
	require.Empty(t, h.waitEventsNow(func(ev worker.Event) bool {
		return ev.Outcome == worker.OutcomeRetry || ev.Outcome == worker.OutcomeLeaseLost
	}), "no retry: %+v", h.allEvents())
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-beat"))
}

// Old behaviour: the heartbeat's ChangeMessageVisibility ran on a context
// that shutdown did not cancel (bounded only by the SQS call timeout), and
// the handler's end waited for the heartbeat: a visibility call hanging on
// a slow SQS held the drain for up to 10s after the drain timeout had
// cancelled the work. The test hangs exactly that call (10s, the injected
// delay ends early only when its context is cancelled), stops the worker
// once it is in flight, and requires Run to return well before 10s.
func TestRegressHeartbeatVisibilityCancellable(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	const visibility = 2 * time.Second
	inFlight := make(chan struct{})
	var once sync.Once
	// Only the heartbeat's extension (to the full visibility timeout):
	// releases and backoffs set other values.
	h.inj.Add(faults.Rule{Service: "SQS", Operation: "ChangeMessageVisibility", Kind: faults.KindDelay, Delay: 10 * time.Second, Rate: 1,
		Match: func(in any) bool {
			v, ok := in.(*sqs.ChangeMessageVisibilityInput)
			if !ok || v.VisibilityTimeout != int32(visibility/time.Second) {
				return false
			}
			once.Do(func() { close(inFlight) })
			return true
		}})
	started := make(chan struct{}, 1)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done() // runs until cancelled
		return ddbworker.Result{}, ctx.Err()
	})))
	cfg := h.testConfig()
	cfg.VisibilityTimeout = visibility
	cfg.DrainTimeout = 500 * time.Millisecond
	r := h.start(cfg, worker.Deps{Handlers: reg})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-hang", "c1", "intake", effective)))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never started")
	}
	select {
	case <-inFlight:
	case <-time.After(20 * time.Second):
		t.Fatal("the heartbeat never extended the visibility")
	}

	begin := time.Now()
	r.Stop()
	took := time.Since(begin)
	require.Less(t, took, 5*time.Second, fmt.Sprintf("Run took %s to return: the heartbeat's visibility call held the drain", took))
}
