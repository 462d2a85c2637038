package worker

import (
	"context"
	"encoding/json"
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
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/adaptive"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/slots"
	"github.com/ddbworker/ddbworker/metrics"
	"github.com/ddbworker/ddbworker/mutation"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/stale"
)

// DynamoDBAPI is what the worker needs of DynamoDB: the gate's PutItem and
// UpdateItem, the commit's TransactWriteItems. The worker sets the retry
// policy of every call it makes (Config.CallAttempts, Config.CallTimeout):
// whatever retryer the client carries, one place retries.
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
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Deps are the worker's collaborators.
type Deps struct {
	// DynamoDB client. Required.
	DynamoDB DynamoDBAPI
	// SQS client. Required.
	SQS SQSAPI
	// Handlers by message type. Required.
	Handlers *ddbworker.Registry
	// S3 fetches payloads by reference (an envelope's payloadRef, an SQS
	// Extended Client message). Optional: without it such a message is
	// retried with a PAYLOAD_ACCESS_DENIED alert until a worker with one
	// takes it. An emulator needs path-style addressing.
	S3 s3payload.GetObjectAPI
	// Logger for JSON logs. Default: discard.
	Logger *slog.Logger
	// Metrics is where the worker reports its figures (the ddbworker_*
	// metrics the daemon serves on /metrics). Default: metrics.Discard.
	Metrics metrics.Provider
	// OnEvent is called after each delivery's disposition. Optional.
	OnEvent func(Event)
	// TracerProvider traces every delivery (see package tracing for the
	// spans and their attributes). Optional: nil means no tracing, and no
	// tracing work at all — no span, no attribute, no allocation. Log with
	// a tracing.LogHandler for the trace and span ids in the log lines.
	TracerProvider trace.TracerProvider
}

// Worker consumes one queue.
type Worker struct {
	cfg       Config
	deps      Deps
	routes    map[string]ddbworker.Route
	modes     map[string]commitMode // each route's commit mode (modeOf)
	adapters  *envelope.Adapters    // the adapted routes', in registration order
	needed    []string              // the attributes the adapters read: every copy keeps them (copies.go)
	decoder   *envelope.Decoder
	db        *dbCalls
	gate      *gate.Gate
	committer *mutation.Committer
	renewer   *stale.Renewer
	policy    stale.Policy
	queue     queueFacts // read when Run starts (under Lambda, at the first invocation)
	owner     string
	fifo      bool
	log       *slog.Logger
	metrics   *instruments
	labels    *labels
	tracer    *tracer // nil: no tracing
	records   *recordSizes
	queueName string // the last segment of Config.QueueURL: the log line's queue and the spans' destination
	limiter   *adaptive.Limiter
	pool      *slots.Pool
	health    *dbHealth
	hot       *hotKeys      // the parked hot keys (hotkey.go)
	capacity  *capacitySums // the write budget's term of ddbworker_database_capacity
	parked    parkingLot
	// tenants holds the messages of tenants at their share of the
	// concurrency; dwellNames names the dwell metric's tenants;
	// tenantFields: a route names a payload field as its tenant (fair.go).
	tenants      *tenants
	dwellNames   *dwellNames
	tenantFields bool
	queueOnce    sync.Once
	fail         func(string)
	fixed        bool // hooks.FixedConcurrency
	ran          sync.Once
	ready        atomic.Bool

	// payloads fetches payloads by S3 reference (nil without Deps.S3);
	// extDecoder decodes an SQS Extended Client message's body fetched
	// from S3: the envelope's limits, but bodies up to Config.Payload's
	// MaxBytes.
	payloads   *s3payload.Fetcher
	extDecoder *envelope.Decoder
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
	if deps.Handlers == nil || len(deps.Handlers.Types()) == 0 {
		errs = append(errs, errors.New("worker: Deps.Handlers must register at least one message type"))
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	w := &Worker{cfg: cfg, deps: deps, fifo: strings.HasSuffix(cfg.QueueURL, ".fifo"), capacity: &capacitySums{maxWCU: cfg.MaxWCU}}
	if w.policy, err = (stale.Policy{Lease: cfg.VisibilityTimeout, Skew: cfg.ClockSkew}).WithDefaults(); err != nil { // stale.Zero == Zero
		errs = append(errs, err)
	}
	w.queue = queueFacts{retention: defaultRetention, maxBytes: maxMessageBytes, dlqMaxBytes: maxMessageBytes}
	if w.decoder, err = envelope.NewDecoder(cfg.Envelope); err != nil {
		errs = append(errs, err)
	} else if lim := w.decoder.Config(); inbox.CheckKeyLimits(lim.MaxKeyBytes, lim.MaxFieldBytes) != nil {
		errs = append(errs, fmt.Errorf("worker: Config.Envelope.MaxKeyBytes %d and MaxFieldBytes %d: %w", lim.MaxKeyBytes, lim.MaxFieldBytes,
			inbox.CheckKeyLimits(lim.MaxKeyBytes, lim.MaxFieldBytes)))
	}
	errs = append(errs, w.initPayloads(deps.S3, cfg.Payload, cfg.Envelope))
	if deps.Handlers != nil {
		errs = append(errs, refuseTransactions(cfg, deps.Handlers))
	}
	if w.limiter, err = adaptive.New(adaptive.Config{Max: max(1, cfg.Concurrency)}); err != nil {
		errs = append(errs, err)
	}
	if w.health, err = newDBHealth(w, cfg.Health); err != nil {
		errs = append(errs, err)
	}
	if deps.DynamoDB != nil && cfg.Store.Table != "" {
		w.db = newDBCalls(deps.DynamoDB, cfg.CallTimeout, cfg.CallAttempts, cfg.MaxWCU, cfg.Now, w.observeCall)
		w.db.spent = func(units float64) { w.capacity.add(cfg.Now(), 0, 0, units) }
		w.db.sick = func() bool { return !w.health.Healthy() }
		if w.gate, err = gate.New(w.db, gate.Config{Store: cfg.Store, Owner: cfg.Owner, Policy: w.policy,
			MaxAttempts: cfg.MaxAttempts, MaxTakeovers: cfg.MaxTakeovers, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
		if w.committer, err = mutation.New(w.db, mutation.Config{Store: cfg.Store, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
		if w.renewer, err = stale.NewRenewer(w.db, stale.RenewerConfig{Store: cfg.Store, Policy: w.policy, Now: cfg.Now}); err != nil {
			errs = append(errs, err)
		}
		if w.gate != nil {
			w.records = newRecordSizes(cfg.Store, w.gate.Owner())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	w.owner = w.gate.Owner()
	w.tracer = newTracer(deps.TracerProvider, cfg.QueueURL)
	w.routes = make(map[string]ddbworker.Route)
	w.modes = make(map[string]commitMode)
	for _, t := range deps.Handlers.Types() {
		rt, _ := deps.Handlers.Lookup(t) // its handler wrapped in the registry's and the route's middleware
		if w.tracer != nil {
			rt.Handler = w.traceHandler(rt.Handler)
		}
		w.routes[t] = rt
		w.modes[t] = w.modeOf(rt)
		w.tenantFields = w.tenantFields || rt.TenantField != ""
	}
	w.tenants = newTenants(cfg.Fair)
	w.dwellNames = newDwellNames(cfg.Fair.NamedTenants)
	w.adapters = deps.Handlers.Adapters()
	w.needed = w.adapters.Attributes()
	w.labels = newLabels(w.routes)
	w.queueName = QueueName(cfg.QueueURL)
	w.log = deps.Logger
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.Discard
	}
	w.metrics = newInstruments(deps.Metrics)
	w.metrics.Concurrency.Set(float64(cfg.Concurrency))
	w.metrics.DatabaseHealthy.Set(1)
	w.hot = newHotKeys(cfg.HotKey, func(n int) { w.metrics.HotKeysParked.Set(float64(n)) })
	w.db.paced = func(d time.Duration) { w.metrics.BudgetWait.Add(d.Seconds()); w.capacity.add(cfg.Now(), 0, d, 0) }
	w.pool = slots.New(cfg.Concurrency)
	w.updateCapacity()
	w.fail = func(string) {}
	return w, nil
}

// observeCall is told the outcome of every DynamoDB call the worker makes:
// it feeds the health detector, the adaptive concurrency limit and the
// metrics.
func (w *Worker) observeCall(op string, r dbResult, latency time.Duration, err error) {
	now := w.cfg.Now()
	w.metrics.DynamoDBCalls.WithLabelValues(op, dbResultNames[r]).Inc()
	w.health.record(now, r, err)
	if w.fixed {
		return
	}
	switch {
	case r.unhealthy():
		w.setLimit(w.limiter.Overloaded(now))
	case r == dbOK || r == dbConditionFailed:
		var commit time.Duration
		if op == "TransactWriteItems" && r == dbOK {
			commit = latency
		}
		w.setLimit(w.limiter.Succeeded(now, commit))
	}
}

// setLimit moves the pool's limit and its gauge, and the capacity gauge.
func (w *Worker) setLimit(n int) {
	defer w.updateCapacity()
	if w.fixed {
		return
	}
	if w.pool.Limit() != n {
		w.pool.SetLimit(n)
		w.metrics.Concurrency.Set(float64(n))
	}
}

// ErrAlreadyRan reports a second call of Run.
var ErrAlreadyRan = errors.New("worker: Run called twice")

// sqsCallTimeout bounds every SQS call but the long poll (which gets its
// wait time on top).
const sqsCallTimeout = 10 * time.Second

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
	w.Prepare(ctx)
	if q := w.queue.visibility; q > 0 && q != w.cfg.VisibilityTimeout {
		// Said once, when Run starts (not under Lambda, where the event
		// source mapping receives with the queue's own).
		w.log.WarnContext(ctx, "the queue's visibility timeout differs from the worker's; the worker sets its own on every receive, but other consumers and redrives use the queue's",
			"queueUrl", w.cfg.QueueURL, "queueVisibilityTimeout", q.String(), "visibilityTimeout", w.cfg.VisibilityTimeout.String())
	}
	hk := hooks.From(ctx)
	if hk.Failpoint != nil {
		w.fail = hk.Failpoint
	}
	w.health.disabled = hk.NoHealthGate
	w.fixed = hk.FixedConcurrency

	// Work outlives ctx by up to DrainTimeout; the deleter outlives the
	// work, so the deletes of work that finished are flushed even when the
	// drain timeout cancels what is still running.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	delCtx, cancelDeletes := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDeletes()
	del := newDeleter(w.deps.SQS, w.cfg.QueueURL, w.cfg.DeleteFlushInterval, w.log, w.metrics, w.fail)
	go del.run(delCtx)

	// The health gate's prober and the parked messages' keeper run until
	// the work is done.
	var background sync.WaitGroup
	bgCtx, stopBackground := context.WithCancel(workCtx)
	background.Go(func() { w.health.run(bgCtx) })
	background.Go(func() { w.keepParked(bgCtx) })
	background.Go(func() { w.keepHeld(bgCtx) })

	// A permanent receive error stops every poller; in-flight work still
	// drains, then Run returns the error.
	pollCtx, stopPolling := context.WithCancelCause(ctx)
	defer stopPolling(nil)
	var work sync.WaitGroup
	var pollers sync.WaitGroup
	w.ready.Store(true)
	for range w.cfg.Pollers {
		pollers.Go(func() { w.poll(pollCtx, workCtx, &work, del, stopPolling) })
	}
	pollers.Wait()
	w.ready.Store(false)
	w.releaseHeld(workCtx, del)

	drained := make(chan struct{})
	go func() { work.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(w.cfg.DrainTimeout):
		w.log.WarnContext(ctx, "drain timeout: cancelling in-flight work; its leases are given back and its messages made visible", "drainTimeout", w.cfg.DrainTimeout.String())
		cancelWork(errShutdown)
		<-drained
	}
	stopBackground()
	background.Wait()
	w.unpark(context.WithoutCancel(ctx), del)

	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	del.close(flushCtx)
	if cause := context.Cause(pollCtx); ctx.Err() == nil && cause != nil {
		return cause
	}
	return nil
}

// queueFacts are what the worker reads of its queues when it starts.
type queueFacts struct {
	// retention is the queue's message retention period (deferral keeps
	// messages within it).
	retention time.Duration
	// maxReceives is its redrive policy's maxReceiveCount (0: none).
	maxReceives int
	// maxBytes is the queue's MaximumMessageSize (a re-send must fit).
	maxBytes int
	// dlqMaxBytes is the DLQ's MaximumMessageSize (a DLQ copy must fit).
	dlqMaxBytes int
	// visibility is the queue's own visibility timeout (0: unread).
	visibility time.Duration
}

// QueueInfo is what the worker read of its queues when it started.
type QueueInfo struct {
	// Retention is the queue's message retention period.
	Retention time.Duration
	// MaxReceiveCount is its redrive policy's (0: none).
	MaxReceiveCount int
	// MaxMessageSize is the queue's MaximumMessageSize (a re-send is sized
	// to fit it).
	MaxMessageSize int
	// DLQMaxMessageSize is the DLQ's MaximumMessageSize (the DLQ copy is
	// sized to fit it).
	DLQMaxMessageSize int
	// OutageCover is the longest database outage a Lambda function on
	// this queue survives without a healthy message reaching the DLQ by
	// the redrive policy (HealthConfig.OutageCover).
	OutageCover time.Duration
}

// Prepare reads what the worker needs of its queues — the retention
// period, the redrive policy, the DLQ's size limit — once (Run and
// HandleSQSEvent call it when nobody did) and reports it. What it cannot
// read keeps SQS's defaults, with a warning logged.
func (w *Worker) Prepare(ctx context.Context) QueueInfo {
	w.queueOnce.Do(func() { w.readQueue(ctx) })
	return QueueInfo{Retention: w.queue.retention, MaxReceiveCount: w.queue.maxReceives, MaxMessageSize: w.queue.maxBytes, DLQMaxMessageSize: w.queue.dlqMaxBytes,
		OutageCover: w.cfg.Health.OutageCover(w.queue.maxReceives, w.fifo)}
}

// defaultRetention is SQS's default retention period, assumed when the
// queue's cannot be read.
const defaultRetention = 4 * 24 * time.Hour

// readQueue reads the queue's retention period, its redrive policy's
// maxReceiveCount and its visibility timeout (Run warns once when it
// differs from the worker's, which sets its own on every receive), its
// MaximumMessageSize (a re-send must fit it) and the DLQ's. What it
// cannot read keeps SQS's defaults.
func (w *Worker) readQueue(ctx context.Context) {
	attrs, err := w.queueAttributes(ctx, w.cfg.QueueURL, types.QueueAttributeNameMessageRetentionPeriod,
		types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameRedrivePolicy, types.QueueAttributeNameMaximumMessageSize)
	if err != nil {
		w.log.WarnContext(ctx, "could not read the queue's attributes; assuming a retention period of 4 days", "error", err.Error())
	} else {
		if s, err := strconv.Atoi(attrs[string(types.QueueAttributeNameMessageRetentionPeriod)]); err == nil && s > 0 {
			w.queue.retention = time.Duration(s) * time.Second
		}
		w.queue.maxReceives = maxReceiveCount(attrs[string(types.QueueAttributeNameRedrivePolicy)])
		if s, err := strconv.Atoi(attrs[string(types.QueueAttributeNameVisibilityTimeout)]); err == nil && s > 0 {
			w.queue.visibility = time.Duration(s) * time.Second
		}
		if n, err := strconv.Atoi(attrs[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && n > 0 {
			w.queue.maxBytes = n
		}
	}
	if w.cfg.DLQURL == "" || w.cfg.TerminalPolicy != PolicyDLQ {
		return
	}
	dlqAttrs, err := w.queueAttributes(ctx, w.cfg.DLQURL, types.QueueAttributeNameMaximumMessageSize)
	if err != nil {
		w.log.WarnContext(ctx, "could not read the DLQ's MaximumMessageSize; assuming 1 MiB (a copy it refuses as too large is left to the redrive policy)", "error", err.Error())
		return
	}
	if n, err := strconv.Atoi(dlqAttrs[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && n > 0 {
		w.queue.dlqMaxBytes = n
	}
}

func (w *Worker) queueAttributes(ctx context.Context, url string, names ...types.QueueAttributeName) (map[string]string, error) {
	callCtx, cancel := context.WithTimeout(ctx, sqsCallTimeout)
	defer cancel()
	out, err := w.deps.SQS.GetQueueAttributes(callCtx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// maxReceiveCount reads a RedrivePolicy attribute (0 when there is none).
func maxReceiveCount(policy string) int {
	if policy == "" {
		return 0
	}
	var p struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return 0
	}
	n, err := p.MaxReceiveCount.Int64()
	if err != nil || n <= 0 {
		return 0
	}
	return int(n)
}

// unpark lets go of the parked messages at shutdown: visible at once while
// the database is healthy (another consumer takes them), otherwise left
// hidden for the rest of their parking visibility, so a worker that starts
// meanwhile does not receive them only to park them again.
func (w *Worker) unpark(ctx context.Context, del *deleter) {
	left := w.parked.take(w.parked.len())
	w.metrics.Parked.Set(0)
	if len(left) == 0 || !w.health.Healthy() {
		return
	}
	h := &daemonHost{w: w, del: del}
	for _, pm := range left {
		w.skip(ctx, pm.d, notStarted{}, h)
	}
}

// Ready reports whether the worker is consuming: Run is polling, the last
// receives succeeded and the database is healthy. It turns false after
// receiveFailuresUnready failed receives in a row, while the database
// health gate holds receiving, when a permanent receive error stopped Run,
// and when Run returns.
func (w *Worker) Ready() bool { return w.ready.Load() && w.health.Healthy() }

// DatabaseHealthy reports whether the database health gate lets the worker
// receive (true before Run).
func (w *Worker) DatabaseHealthy() bool { return w.health.Healthy() }

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

func (w *Worker) poll(ctx, workCtx context.Context, work *sync.WaitGroup, del *deleter, stop context.CancelCauseFunc) {
	receiveFailures := 0
	for ctx.Err() == nil {
		// No receive while the database is unhealthy (the health gate) or
		// while the pool is full (internal/slots).
		if err := w.health.wait(ctx); err != nil {
			return
		}
		if err := w.tenants.room(ctx); err != nil { // fair.go
			return
		}
		n, err := w.pool.AcquireBatch(ctx, min(w.cfg.BatchSize, w.pool.Limit()))
		if err != nil {
			return
		}
		if !w.health.Healthy() {
			w.pool.Release(n)
			continue
		}
		// Parked messages go first: they were received before the pause.
		if parked := w.parked.take(n); len(parked) > 0 {
			w.metrics.Parked.Set(float64(w.parked.len()))
			if len(parked) > n {
				w.pool.Force(len(parked) - n) // a FIFO unit runs whole
			} else {
				w.pool.Release(n - len(parked))
			}
			ds := make([]*delivery, len(parked))
			for i, pm := range parked {
				ds[i] = pm.d
			}
			w.dispatch(ctx, workCtx, ds, work, del)
			continue
		}
		// Shutdown cancels the long poll, so an idle worker stops at once
		// instead of after up to WaitTime. The cost: SQS may already have
		// handed messages to the poll whose client went away; those stay
		// hidden until their visibility timeout ends, and count a receive
		// (ApproximateReceiveCount) — nothing is lost, and no attempt is
		// charged. A poll that returns after shutdown began releases what
		// it got.
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.WaitTime+sqsCallTimeout)
		out, err := w.deps.SQS.ReceiveMessage(callCtx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(w.cfg.QueueURL),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(w.cfg.WaitTime / time.Second),
			VisibilityTimeout:           int32(w.cfg.VisibilityTimeout / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		cancel()
		if err != nil {
			w.pool.Release(n)
			if ctx.Err() != nil {
				return
			}
			receiveFailures++
			w.metrics.ReceiveErrors.Inc()
			if code := failure.APICode(err); permanentReceive(code) {
				w.ready.Store(false)
				rerr := &ReceiveError{QueueURL: w.cfg.QueueURL, Code: code, Err: err}
				w.log.ErrorContext(ctx, "receive failed for good; stopping", "error", rerr.Error())
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
			// Said when receiving starts failing and when the worker turns
			// not ready; the failures in between are debug lines (the
			// receive_errors metric counts every one).
			level := slog.LevelDebug
			if receiveFailures == 1 || receiveFailures == receiveFailuresUnready {
				level = slog.LevelWarn
			}
			w.log.Log(ctx, level, "receive failed", "error", err.Error(), "retryIn", wait.String(), "failuresInARow", receiveFailures)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		receiveFailures = 0
		w.ready.Store(true)
		if unused := n - len(out.Messages); unused > 0 {
			w.pool.Release(unused)
		}
		now := w.cfg.Now()
		ds := make([]*delivery, len(out.Messages))
		for i, m := range out.Messages {
			ds[i] = newDelivery(m, now)
		}
		if ctx.Err() != nil {
			h := &daemonHost{w: w, del: del}
			for _, d := range ds {
				w.skip(workCtx, d, notStarted{}, h)
			}
			w.pool.Release(len(ds))
			return
		}
		if len(ds) == 0 {
			continue
		}
		w.metrics.Received.Add(float64(len(ds)))
		w.dispatch(ctx, workCtx, ds, work, del)
	}
}

// dispatch starts a batch's deliveries: each on its own, or, on a FIFO
// queue, each group in order (runGroup), each group on its own goroutine —
// unless its tenant is at its share of the concurrency: then it is held,
// its slots given back, until its tenant's turn (fair.go).
func (w *Worker) dispatch(ctx, workCtx context.Context, ds []*delivery, work *sync.WaitGroup, del *deleter) {
	groups := w.groups(ds)
	now := w.cfg.Now()
	held := false
	for gi, group := range groups {
		if gi == len(groups)/2 && len(groups) > 1 {
			w.fail(hooks.MidBatch)
		}
		tenant := w.tenantOf(group[0])
		for _, d := range group {
			d.tenant = tenant
		}
		if !w.tenants.admit(tenant, group, w.pool.Limit(), now) {
			w.pool.Release(len(group))
			held = true
			continue
		}
		w.start(ctx, workCtx, tenant, group, work, del)
	}
	if held {
		w.metrics.FairHeld.Set(float64(w.tenants.heldCount()))
		w.startHeld(ctx, workCtx, work, del)
	}
}

// start runs a unit that holds its slots, then starts what was held for
// the slots it frees.
func (w *Worker) start(ctx, workCtx context.Context, tenant string, group []*delivery, work *sync.WaitGroup, del *deleter) {
	work.Go(func() {
		w.runGroup(ctx, workCtx, group, &daemonHost{w: w, del: del})
		w.startHeld(ctx, workCtx, work, del)
	})
}

// releaseHeld lets the held messages go at shutdown, unstarted: visible at
// once, no attempt charged.
func (w *Worker) releaseHeld(ctx context.Context, del *deleter) {
	us := w.tenants.takeAll()
	w.metrics.FairHeld.Set(0)
	h := &daemonHost{w: w, del: del}
	for _, u := range us {
		for _, d := range u.ds {
			w.skip(ctx, d, notStarted{}, h)
		}
	}
}

// runGroup runs the deliveries of one group in order (a standard queue's
// groups hold one). On a FIFO queue the group's waiting messages are kept
// hidden while the ones before them run; after a delivery that stays in
// the queue, or when shutting down, the rest go back in order without
// running, and after one that was parked the rest are parked behind it, as
// one unit.
func (w *Worker) runGroup(ctx, workCtx context.Context, group []*delivery, h *daemonHost) {
	var waiting *groupKeeper
	if len(group) > 1 {
		waiting = w.keepGroupHidden(workCtx, group)
		defer waiting.stop()
	}
	ok := true
	for i, d := range group {
		if waiting != nil {
			waiting.started(i)
		}
		var s settled
		switch {
		case len(h.unit) > 0:
			s = w.skip(workCtx, d, notStarted{park: true}, h)
		case !ok || (w.fifo && ctx.Err() != nil):
			s = w.skip(workCtx, d, notStarted{}, h)
		default:
			s = w.handle(workCtx, d, h)
		}
		w.tenants.done(d.tenant, 1)
		w.pool.Release(1)
		if s == settledKept {
			ok = false
		}
	}
	w.parked.add(h.unit)
	w.metrics.Parked.Set(float64(w.parked.len()))
}

// groups splits ds: by MessageGroupId, in order, on a FIFO queue; one
// each otherwise.
func (w *Worker) groups(ds []*delivery) [][]*delivery {
	var out [][]*delivery
	if !w.fifo {
		for _, d := range ds {
			out = append(out, []*delivery{d})
		}
		return out
	}
	index := map[string]int{}
	for _, d := range ds {
		i, ok := index[d.group]
		if !ok {
			i = len(out)
			index[d.group] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], d)
	}
	return out
}

// daemonHost is the daemon's host of one group's deliveries: deletes go to
// the batching deleter, and a parked message is hidden for ParkVisibility
// and held, with the rest of its group behind it, for the parking lot.
type daemonHost struct {
	w    *Worker
	del  *deleter
	unit []parkedMsg
}

func (h *daemonHost) ack(d *delivery) { h.del.ack(d.m) }

func (h *daemonHost) park(ctx context.Context, d *delivery) time.Duration {
	vis := h.w.cappedHide(h.w.cfg.Health.ParkVisibility, d.receivedAt)
	h.w.changeVisibility(ctx, d.m, vis)
	h.unit = append(h.unit, parkedMsg{d: d, hidden: h.w.cfg.Now().Add(vis)})
	return vis
}

// changeVisibility hides m for d (0: visible at once). It is bounded by
// sqsCallTimeout and outlives a cancelled ctx: a message must not be left
// hidden for the rest of a long visibility because shutdown began.
func (w *Worker) changeVisibility(ctx context.Context, m types.Message, d time.Duration) {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqsCallTimeout)
	defer cancel()
	w.changeVisibilityWithin(callCtx, m, d)
}

// changeVisibilityWithin hides m for d within ctx (the heartbeat's, which
// shutdown cancels).
func (w *Worker) changeVisibilityWithin(ctx context.Context, m types.Message, d time.Duration) {
	_, err := w.deps.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(w.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: visibilitySeconds(d),
	})
	if err != nil && ctx.Err() == nil {
		// Harmless: the message reappears when its current visibility ends.
		w.stageFailed(ctx, err)
		w.log.WarnContext(ctx, "change visibility failed", "sqsMessageId", aws.ToString(m.MessageId), "visibility", d.String(), "error", err.Error())
	}
}

// cappedHide is d, shortened so the message is hidden no longer than 12
// hours after its receipt at receivedAt (capHide).
func (w *Worker) cappedHide(d time.Duration, receivedAt time.Time) time.Duration {
	return capHide(d, w.cfg.Now().Sub(receivedAt))
}

// hideMargin is kept back from SQS's 12-hour visibility limit.
const hideMargin = time.Minute

// capHide is d, shortened so a message received since ago is hidden no
// longer than 12 hours after its receipt (SQS refuses a longer visibility
// rather than cap it), less hideMargin.
func capHide(d, since time.Duration) time.Duration {
	return max(0, min(d, maxVisibility-hideMargin-since))
}
