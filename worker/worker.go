package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/semaphore"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/internal/slots"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/stale"
)

// DynamoDBAPI is what the worker needs of DynamoDB: the gate's PutItem and
// UpdateItem, the commit's TransactWriteItems.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// SQSAPI is what the worker needs of SQS.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, params *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// TerminalPolicy says what happens to a message whose work failed for good.
type TerminalPolicy string

const (
	// PolicyDLQ sends a copy with the failure as message attributes to the
	// DLQ, then deletes the message. The default.
	PolicyDLQ TerminalPolicy = "dlq"
	// PolicyQuarantine records the failure in the inbox only and deletes.
	PolicyQuarantine TerminalPolicy = "quarantine"
	// PolicyRedrive leaves the message to the queue's redrive policy.
	PolicyRedrive TerminalPolicy = "redrive"
)

// Named failpoints: places where a chaos harness may crash the process.
const (
	FailpointAfterGate    = "after-gate"
	FailpointAfterCommit  = "after-commit"
	FailpointBeforeDelete = "before-delete"
	FailpointMidBatch     = "mid-batch"
)

// Zero sets a Config field whose zero value means "the default" to an
// explicit zero: ClockSkew, MaxGuardRetries, DeleteFlushInterval,
// DrainTimeout and Backoff.Jitter (e.g. Config{ClockSkew: worker.Zero}).
// It is the same value as stale.Zero.
const Zero = -1

// Config configures a Worker.
type Config struct {
	// Table is the inbox (and, usually, domain) table. Required.
	Table string
	// QueueURL is the work queue. Required. A URL ending in ".fifo" turns
	// on FIFO group order.
	QueueURL string
	// DLQURL receives terminal messages under PolicyDLQ. Required then.
	DLQURL string
	// Concurrency caps messages in flight. Default: 16.
	Concurrency int
	// BatchSize is the most messages one receive asks for (1..10). A poller
	// receives once half of that is free, waiting briefly for the rest.
	// Default: min(10, Concurrency).
	BatchSize int
	// Pollers is the number of concurrent long polls. Default:
	// ceil(Concurrency / (4·BatchSize)).
	Pollers int
	// WaitTime is the long-poll wait. Default: 20s.
	WaitTime time.Duration
	// VisibilityTimeout is set on every receive and is the lease length.
	// Default: 30s.
	VisibilityTimeout time.Duration
	// ClockSkew is the lease's clock-skew margin. Default: 2s; Zero for
	// none (only when every worker's clock is exact).
	ClockSkew time.Duration
	// MessageTimeout is the per-message deadline for handler and commit;
	// leases are renewed (heartbeat) until it. Default: 2m.
	MessageTimeout time.Duration
	// MaxAttempts is the business-attempt limit unless a message's
	// attemptPolicy sets one. Default: 5.
	MaxAttempts int
	// MaxGuardRetries bounds handler re-runs after a Retry guard. Default:
	// 3; Zero never re-runs (a lost optimistic race fails retryably).
	MaxGuardRetries int
	// Backoff spaces retries by visibility. Default: see Backoff.
	Backoff Backoff
	// TerminalPolicy for failed-for-good work. Default: PolicyDLQ.
	TerminalPolicy TerminalPolicy
	// DeleteFlushInterval is the longest a delete waits for its batch of 10
	// to fill. Waiting is safe (the work is committed) and keeps SQS calls
	// per message low. Default: 250ms; 20ms on a FIFO queue, where a pending
	// delete holds back the rest of its group. Zero sends every delete at
	// once (more SQS calls).
	DeleteFlushInterval time.Duration
	// DrainTimeout bounds graceful shutdown: in-flight work gets this long
	// to finish after Run's context ends. Default: 30s; Zero cancels
	// in-flight work at once (its leases and visibility then expire).
	DrainTimeout time.Duration
	// TTL per inbox status. Default: stale.TTL{} with its defaults.
	TTL stale.TTL
	// AttentionShards spreads the attention index. Default: 16.
	AttentionShards int
	// IndexProcessing puts PROCESSING records in the attention index for
	// the sweeper (costs index writes). Default: false.
	IndexProcessing bool
	// Owner names this worker in leases. Default: hostname/pid.
	Owner string
	// Envelope limits. Default: envelope.Config{} with its defaults.
	Envelope envelope.Config
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Deps are the worker's collaborators.
type Deps struct {
	// DynamoDB client. Required.
	DynamoDB DynamoDBAPI
	// SQS client. Required.
	SQS SQSAPI
	// Handlers by message type. Required.
	Handlers *Registry
	// Logger for JSON logs. Default: discard.
	Logger *slog.Logger
	// Metrics collectors. Default: NewMetrics(nil).
	Metrics *Metrics
	// OnEvent is called after each delivery's disposition. Optional.
	OnEvent func(Event)
	// Failpoint is called at each named failpoint. Optional (tests, chaos).
	Failpoint func(name string)
}

// Worker consumes one queue.
type Worker struct {
	cfg       Config
	deps      Deps
	routes    map[string]route
	decoder   *envelope.Decoder
	gate      *gate.Gate
	committer *mutation.Committer
	renewer   *stale.Renewer
	policy    stale.Policy
	fifo      bool
	log       *slog.Logger
	metrics   *Metrics
	fail      func(string)
	ran       sync.Once
	ready     atomic.Bool
}

// New validates deps and cfg and returns a Worker; every problem is
// reported, joined.
func New(deps Deps, cfg Config) (*Worker, error) {
	var errs []error
	if deps.DynamoDB == nil {
		errs = append(errs, errors.New("worker: Deps.DynamoDB is required"))
	}
	if deps.SQS == nil {
		errs = append(errs, errors.New("worker: Deps.SQS is required"))
	}
	if deps.Handlers == nil || len(deps.Handlers.routes) == 0 {
		errs = append(errs, errors.New("worker: Deps.Handlers must register at least one message type"))
	}
	if cfg.Table == "" {
		errs = append(errs, errors.New("worker: Config.Table is required"))
	}
	if cfg.QueueURL == "" {
		errs = append(errs, errors.New("worker: Config.QueueURL is required"))
	}
	if cfg.TerminalPolicy == "" {
		cfg.TerminalPolicy = PolicyDLQ
	}
	switch cfg.TerminalPolicy {
	case PolicyDLQ:
		if cfg.DLQURL == "" {
			errs = append(errs, errors.New("worker: Config.DLQURL is required with the dlq terminal policy"))
		}
	case PolicyQuarantine, PolicyRedrive:
	default:
		errs = append(errs, fmt.Errorf("worker: Config.TerminalPolicy %q must be dlq, quarantine or redrive", cfg.TerminalPolicy))
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > 10000 {
		errs = append(errs, fmt.Errorf("worker: Config.Concurrency %d must be within 1..10000", cfg.Concurrency))
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = min(10, max(cfg.Concurrency, 1))
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 10 || cfg.BatchSize > max(cfg.Concurrency, 1) {
		errs = append(errs, fmt.Errorf("worker: Config.BatchSize %d must be within 1..min(10, Concurrency)", cfg.BatchSize))
	}
	if cfg.Pollers == 0 && cfg.BatchSize > 0 {
		cfg.Pollers = slots.Pollers(cfg.Concurrency, cfg.BatchSize)
	}
	if cfg.Pollers < 1 {
		errs = append(errs, fmt.Errorf("worker: Config.Pollers %d must be at least 1", cfg.Pollers))
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 20 * time.Second
	}
	if cfg.WaitTime < 0 || cfg.WaitTime > 20*time.Second {
		errs = append(errs, fmt.Errorf("worker: Config.WaitTime %s must be within 0..20s", cfg.WaitTime))
	}
	if cfg.VisibilityTimeout == 0 {
		cfg.VisibilityTimeout = 30 * time.Second
	}
	if cfg.VisibilityTimeout < time.Second || cfg.VisibilityTimeout > maxVisibility || cfg.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("worker: Config.VisibilityTimeout %s must be whole seconds within 1s..12h", cfg.VisibilityTimeout))
	}
	if cfg.MessageTimeout == 0 {
		cfg.MessageTimeout = 2 * time.Minute
	}
	if cfg.MessageTimeout < 0 {
		errs = append(errs, errors.New("worker: Config.MessageTimeout must not be negative"))
	}
	cfg.MaxGuardRetries = withDefault(cfg.MaxGuardRetries, 3)
	if cfg.MaxGuardRetries < 0 {
		errs = append(errs, errors.New("worker: Config.MaxGuardRetries must not be negative"))
	}
	var err error
	if cfg.Backoff, err = cfg.Backoff.withDefaults(); err != nil {
		errs = append(errs, err)
	}
	flush := 250 * time.Millisecond
	if strings.HasSuffix(cfg.QueueURL, ".fifo") {
		flush = 20 * time.Millisecond
	}
	cfg.DeleteFlushInterval = withDefault(cfg.DeleteFlushInterval, flush)
	cfg.DrainTimeout = withDefault(cfg.DrainTimeout, 30*time.Second)
	if cfg.DeleteFlushInterval < 0 || cfg.DrainTimeout < 0 {
		errs = append(errs, errors.New("worker: Config.DeleteFlushInterval and DrainTimeout must not be negative"))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Worker{cfg: cfg, deps: deps, fifo: strings.HasSuffix(cfg.QueueURL, ".fifo")}
	if w.policy, err = (stale.Policy{Lease: cfg.VisibilityTimeout, Skew: cfg.ClockSkew}).WithDefaults(); err != nil { // stale.Zero == Zero
		errs = append(errs, err)
	}
	if w.decoder, err = envelope.NewDecoder(cfg.Envelope); err != nil {
		errs = append(errs, err)
	}
	if deps.DynamoDB != nil && cfg.Table != "" {
		if w.gate, err = gate.New(deps.DynamoDB, gate.Config{Table: cfg.Table, Owner: cfg.Owner, Policy: w.policy, TTL: cfg.TTL,
			MaxAttempts: cfg.MaxAttempts, AttentionShards: cfg.AttentionShards, IndexProcessing: cfg.IndexProcessing, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
		if w.committer, err = mutation.New(deps.DynamoDB, mutation.Config{Table: cfg.Table, TTL: cfg.TTL, AttentionShards: cfg.AttentionShards, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
		if w.renewer, err = stale.NewRenewer(deps.DynamoDB, stale.RenewerConfig{Table: cfg.Table, Policy: w.policy, IndexProcessing: cfg.IndexProcessing, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	w.routes = make(map[string]route, len(deps.Handlers.routes))
	for k, v := range deps.Handlers.routes {
		w.routes[k] = v
	}
	w.log = deps.Logger
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.metrics = deps.Metrics
	if w.metrics == nil {
		w.metrics, _ = NewMetrics(nil)
	}
	w.metrics.Concurrency.Set(float64(cfg.Concurrency))
	w.fail = deps.Failpoint
	if w.fail == nil {
		w.fail = func(string) {}
	}
	return w, nil
}

// withDefault returns def for 0, 0 for Zero, and v otherwise.
func withDefault[T int | float64 | time.Duration](v, def T) T {
	switch v {
	case 0:
		return def
	case Zero:
		return 0
	}
	return v
}

// ErrAlreadyRan reports a second call of Run.
var ErrAlreadyRan = errors.New("worker: Run called twice")

// Run consumes the queue until ctx ends, then shuts down gracefully: it
// stops receiving, lets in-flight work finish for up to DrainTimeout,
// releases received messages it did not start (visibility 0), flushes the
// pending deletes and returns. It returns nil after a graceful stop.
func (w *Worker) Run(ctx context.Context) error {
	first := false
	w.ran.Do(func() { first = true })
	if !first {
		return ErrAlreadyRan
	}
	// Work outlives ctx by up to DrainTimeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	del := newDeleter(w.deps.SQS, w.cfg.QueueURL, w.cfg.DeleteFlushInterval, w.log, w.metrics, w.fail)
	go del.run(workCtx)

	// A permanent receive error stops every poller; in-flight work still
	// drains, then Run returns the error.
	pollCtx, stopPolling := context.WithCancelCause(ctx)
	defer stopPolling(nil)
	pool := semaphore.NewWeighted(int64(w.cfg.Concurrency))
	var work sync.WaitGroup
	var pollers sync.WaitGroup
	w.ready.Store(true)
	for range w.cfg.Pollers {
		pollers.Go(func() { w.poll(pollCtx, workCtx, pool, &work, del, stopPolling) })
	}
	pollers.Wait()
	w.ready.Store(false)

	drained := make(chan struct{})
	go func() { work.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(w.cfg.DrainTimeout):
		w.log.Warn("drain timeout: cancelling in-flight work; its leases and visibility will expire", "drainTimeout", w.cfg.DrainTimeout.String())
		cancelWork()
		<-drained
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	del.close(flushCtx)
	if cause := context.Cause(pollCtx); ctx.Err() == nil && cause != nil {
		return cause
	}
	return nil
}

// Ready reports whether the worker is consuming: Run is polling and the
// last receives succeeded. It turns false after receiveFailuresUnready
// failed receives in a row, when a permanent receive error stopped Run,
// and when Run returns.
func (w *Worker) Ready() bool { return w.ready.Load() }

// receiveFailuresUnready is how many failed receives in a row make the
// worker not ready (one is a blip; SQS or the network is down after three).
const receiveFailuresUnready = 3

// ErrQueueUnusable is the sentinel of *ReceiveError.
var ErrQueueUnusable = errors.New("worker: queue unusable")

// ReceiveError is a receive failure that waiting will not heal: access
// denied, a queue that does not exist, bad credentials, a KMS key the
// worker may not use. Run returns it after draining in-flight work.
type ReceiveError struct {
	QueueURL string
	Code     string
	Err      error
}

func (e *ReceiveError) Error() string {
	return fmt.Sprintf("worker: receive from %s failed for good (%s): %v", e.QueueURL, e.Code, e.Err)
}

// Unwrap returns ErrQueueUnusable and the SDK's error.
func (e *ReceiveError) Unwrap() []error { return []error{ErrQueueUnusable, e.Err} }

// permanentReceive reports whether an SQS error code (without the
// "AWS.SimpleQueueService." prefix) is one that retrying cannot fix.
func permanentReceive(code string) bool {
	switch code {
	case "AccessDenied", "AccessDeniedException",
		"QueueDoesNotExist", "NonExistentQueue", "InvalidAddress",
		"InvalidClientTokenId", "UnrecognizedClientException", "InvalidSecurity",
		"SignatureDoesNotMatch", "MissingAuthenticationToken",
		"KmsAccessDenied", "KmsDisabled", "KmsNotFound", "KmsInvalidState", "KmsInvalidKeyUsage":
		return true
	}
	return false
}

func (w *Worker) poll(ctx, workCtx context.Context, pool *semaphore.Weighted, work *sync.WaitGroup, del *deleter, stop context.CancelCauseFunc) {
	receiveFailures := 0
	for ctx.Err() == nil {
		// No receive while the pool is full (internal/slots).
		n, err := slots.AcquireBatch(ctx, pool, int64(w.cfg.BatchSize))
		if err != nil {
			return
		}
		out, err := w.deps.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(w.cfg.QueueURL),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(w.cfg.WaitTime / time.Second),
			VisibilityTimeout:           int32(w.cfg.VisibilityTimeout / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			pool.Release(n)
			if ctx.Err() != nil {
				return
			}
			receiveFailures++
			w.metrics.ReceiveErrors.Inc()
			if code := failure.APICode(err); permanentReceive(code) {
				w.ready.Store(false)
				rerr := &ReceiveError{QueueURL: w.cfg.QueueURL, Code: code, Err: err}
				w.log.Error("receive failed for good; stopping", "error", rerr.Error())
				stop(rerr)
				return
			}
			if failure.IsThrottle(err) {
				w.metrics.Throttles.Inc()
			}
			if receiveFailures >= receiveFailuresUnready {
				w.ready.Store(false)
			}
			wait := w.cfg.Backoff.delay(min(receiveFailures, 6))
			w.log.Warn("receive failed", "error", err.Error(), "retryIn", wait.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		receiveFailures = 0
		w.ready.Store(true)
		msgs := out.Messages
		if unused := n - int64(len(msgs)); unused > 0 {
			pool.Release(unused)
		}
		if len(msgs) == 0 {
			continue
		}
		w.metrics.Received.Add(float64(len(msgs)))
		w.dispatch(ctx, workCtx, msgs, pool, work, del)
	}
}

// dispatch starts the batch's messages: each on its own, or, on a FIFO
// queue, each group in order, stopping a group at its first failure.
func (w *Worker) dispatch(ctx, workCtx context.Context, msgs []types.Message, pool *semaphore.Weighted, work *sync.WaitGroup, del *deleter) {
	groups := [][]types.Message{}
	if w.fifo {
		index := map[string]int{}
		for _, m := range msgs {
			g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			i, ok := index[g]
			if !ok {
				i = len(groups)
				index[g] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], m)
		}
	} else {
		for _, m := range msgs {
			groups = append(groups, []types.Message{m})
		}
	}
	for gi, group := range groups {
		if gi == len(groups)/2 && len(groups) > 1 {
			w.fail(FailpointMidBatch)
		}
		work.Go(func() {
			ok := true
			for _, m := range group {
				func() {
					defer pool.Release(1)
					// After a failure in its group, or when shutting down, a
					// FIFO message is not started: it goes back in order.
					if !ok || (w.fifo && ctx.Err() != nil) {
						w.release(workCtx, m)
						return
					}
					ok = w.process(workCtx, m, del)
				}()
			}
		})
	}
}

// release makes a received message visible again at once (it was not
// started) so another consumer takes it without waiting for the timeout.
func (w *Worker) release(ctx context.Context, m types.Message) {
	w.changeVisibility(ctx, m, 0)
	w.emit(Event{SQSMessageID: aws.ToString(m.MessageId), Outcome: OutcomeReleased})
	w.metrics.Outcomes.WithLabelValues("", OutcomeReleased).Inc()
}

func (w *Worker) changeVisibility(ctx context.Context, m types.Message, d time.Duration) {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := w.deps.SQS.ChangeMessageVisibility(callCtx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(w.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: visibilitySeconds(d),
	})
	if err != nil {
		// Harmless: the message reappears when its current visibility ends.
		w.log.Warn("change visibility failed", "sqsMessageId", aws.ToString(m.MessageId), "visibility", d.String(), "error", err.Error())
	}
}

func (w *Worker) emit(ev Event) {
	if w.deps.OnEvent != nil {
		w.deps.OnEvent(ev)
	}
}

func receiveCount(m types.Message) int {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return n
}

func sentAt(m types.Message) time.Time {
	ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
