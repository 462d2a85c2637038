package lambda

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/prommetrics"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Registry is ddbworker.Registry, so that a Lambda main imports only this
// package and its domain's.
type Registry = ddbworker.Registry

// Env is what the register function sees of the function's configuration.
type Env struct {
	// Store is the inbox store (DDBWORKER_TABLE and the layout, TTL and
	// index variables): Store.Table is the table the handlers usually
	// write their items to as well.
	Store inbox.Store
	// AWS is the SDK configuration the clients use (the SDK's own
	// environment: AWS_REGION, credentials, AWS_ENDPOINT_URL_*).
	AWS aws.Config
	// DynamoDB is the worker's client (handlers may read with it).
	DynamoDB *dynamodb.Client
	// Logger is the function's JSON logger (stdout, DDBWORKER_LOG_LEVEL).
	Logger *slog.Logger
	// LookupEnv reads the environment the configuration came from, for the
	// service's own settings.
	LookupEnv func(key string) (string, bool)
	// TracerProvider is the function's trace export (the OTEL_* variables),
	// for the service's own spans; nil when tracing is off.
	TracerProvider trace.TracerProvider
}

// Main runs a Lambda function that handles SQS events with the handlers
// register registers, and never returns. It reads the configuration from
// the environment, builds the clients and the worker once per execution
// environment and starts the Lambda runtime loop. A configuration problem
// (or an error from register) fails the function's init: it is logged as
// one JSON line, reported to the Runtime API as the init error and the
// process exits 1, before any record is touched.
func Main(register func(reg *ddbworker.Registry, env Env) error) {
	handle, err := New(context.Background(), register, os.LookupEnv)
	if err != nil {
		failInit(err)
	}
	awslambda.Start(handle)
}

// New reads the configuration through lookupEnv (os.LookupEnv when nil),
// loads the AWS configuration from the process's environment, calls
// register and returns the handler of an SQS event source mapping with
// ReportBatchItemFailures: each record runs gate → handle → commit
// (worker.HandleSQSEvent) and the response lists the records that must
// come back. The handler is safe for concurrent invocations and keeps its
// workers — their adaptive concurrency limit and database health gate —
// for the life of the execution environment.
//
// With DDBWORKER_QUEUE_URL set, New builds the worker of that queue.
// Without it, the worker of a queue is built at its first invocation from
// the records' eventSourceARN (worker.QueueURLFromARN): a function with
// several SQS event source mappings gets one worker per queue. Either way
// New builds one worker to validate the configuration, so every problem
// surfaces here, not at the first record.
func New(ctx context.Context, register func(reg *ddbworker.Registry, env Env) error, lookupEnv func(string) (string, bool)) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if register == nil {
		return nil, errors.New("lambda: New needs a register function: the service registers its handlers there")
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	s, err := readSettings(lookupEnv)
	if err != nil {
		return nil, err
	}
	log := slog.New(requestIDHandler{slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.logLevel})})
	for _, name := range slices.Sorted(maps.Keys(notUnderLambda)) {
		if v, ok := lookupEnv(name); ok && v != "" {
			log.Warn(name+" is not used under Lambda: "+notUnderLambda[name], "variable", name)
		}
	}

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda: loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("lambda: AWS_REGION is not set (Lambda sets it; set it when running elsewhere)")
	}
	iv, log, err := startTracing(ctx, lookupEnv, log)
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	// The connections the environment keeps: a DynamoDB and an SQS call
	// per record in flight (the worker's limit, which every invocation
	// shares), and, with concurrent invocations (Lambda Managed Instances),
	// one SQS call per invocation outside that limit (parking a batch, or
	// handing back records it could not start, one at a time).
	concurrent := maxConcurrency(lookupEnv)
	conns := s.worker.Concurrency + 4
	if concurrent > 1 {
		conns += concurrent
	}
	awsCfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 2*conns, conns
	})
	ddb, q := dynamodb.NewFromConfig(awsCfg), sqs.NewFromConfig(awsCfg)
	s3c := s3.NewFromConfig(awsCfg) // payloads by reference (payloadRef, SQS Extended Client)

	reg := ddbworker.NewRegistry()
	cfg := s.worker
	if fn, stream := lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_NAME"), lookupOr(lookupEnv, "AWS_LAMBDA_LOG_STREAM_NAME"); fn != "" && stream != "" {
		// leaseOwner names the log stream of the environment and, after it,
		// the invocation that holds the lease (invocation): concurrent
		// invocations of one environment write to one log stream.
		cfg.Owner = fn + "/" + stream
	}
	h := &handler{cfg: cfg, deps: worker.Deps{DynamoDB: ddb, SQS: q, S3: s3c, Handlers: reg, Logger: log}, queueURL: s.queueURL,
		log: log, workers: map[string]*worker.Worker{}, minCover: s.minOutageCover, ddb: ddb, invocations: iv}
	if iv.traces.On() {
		h.deps.TracerProvider = iv.traces.Provider
	}
	h.owner, h.given, h.keyGiven = "lambda", s.given, s.keyGiven
	if fn := lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		h.owner = fn
	}
	// The table, with the settings and layout it records, is read before
	// the handlers are registered, so that they see the store the worker
	// writes with (an effects log writes under its layout). Its failure
	// is reported after the configuration's problems; a cold start in a
	// database outage must not fail the init (every invocation would fail
	// and count a receive): the check is left to the invocations, which
	// park their records until it passes.
	checkErr := h.checkStore(ctx)
	env := Env{Store: h.cfg.Store, AWS: awsCfg, DynamoDB: ddb, Logger: log, LookupEnv: lookupEnv}
	if iv.traces.On() {
		env.TracerProvider = iv.traces.Provider
	}
	h.registered = env.Store.Layout
	if err := register(reg, env); err != nil {
		return nil, fmt.Errorf("lambda: registering the handlers: %w", err)
	}
	validate := s.queueURL
	if validate == "" {
		validate = "https://sqs." + awsCfg.Region + ".amazonaws.com/000000000000/validate"
	}
	// Configuration problems first, all at once.
	if _, err := h.newWorker(validate); err != nil {
		return nil, fmt.Errorf("lambda: the DDBWORKER_* configuration or the handlers: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	// From here on every queue's workers count into the queue's metrics,
	// written as EMF lines after each invocation (metrics.go).
	if h.metrics, err = newInvocationMetrics(os.Stdout, s.metricsNamespace, lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_NAME"), log); err != nil {
		return nil, fmt.Errorf("lambda: %s: %w", envMetricsNamespace, err)
	}
	if checkErr != nil && !transient(checkErr) {
		return nil, checkErr
	} else if checkErr != nil {
		log.Warn("could not read the inbox table at cold start; the invocations park their records until it answers", "table", s.store.Table,
			"error", checkErr.Error())
	}
	queue := "from the records' eventSourceARN"
	if s.queueURL != "" {
		queue = s.queueURL
		if _, err := h.worker(ctx, ""); err != nil && !transient(err) {
			return nil, err
		}
	}
	s.store = h.cfg.Store
	log.Info("ready", "table", s.store.Table, "queueUrl", queue, "dlqUrl", cfg.DLQURL, "terminalPolicy", string(cfg.TerminalPolicy),
		"concurrency", cfg.Concurrency, "maxConcurrentInvocations", concurrent, "types", reg.Types())
	return h.metrics.wrap(h.handle), nil
}

// handler is the function's handler: one worker per queue, for the life of
// the execution environment.
type handler struct {
	cfg      worker.Config // QueueURL set per worker
	deps     worker.Deps
	queueURL string // DDBWORKER_QUEUE_URL, or ""
	log      *slog.Logger

	// minCover is the shortest database outage the queue's redrive policy
	// must let the function survive without a warning.
	minCover time.Duration
	// invocations traces each invocation (its zero value: off).
	invocations invocations
	// owner records the settings (the function's name); given reports the
	// store settings the environment sets explicitly.
	owner    string
	given    func(inbox.Setting) bool
	keyGiven map[string]bool
	// registered is the layout the handlers were registered with: the
	// table's, unless the cold start could not read it.
	registered tables.Layout
	ddb        *dynamodb.Client
	// metrics are the queues' worker metrics, written as EMF after each
	// invocation (nil while New validates the configuration).
	metrics *invocationMetrics

	mu sync.Mutex
	// checked: the table's recorded settings are in cfg.Store and the
	// table fits (checkStore passed); until then, when the check may be
	// tried again and how it failed.
	checked      bool
	nextCheck    time.Time
	lastCheck    error
	failedChecks int
	workers      map[string]*worker.Worker // by queue URL
}

// onceOnly makes each call of the table check one request: while the
// database is in trouble the check is a probe, not a retry loop.
type onceOnly struct{ *dynamodb.Client }

func (c onceOnly) one(optFns []func(*dynamodb.Options)) []func(*dynamodb.Options) {
	return append(optFns, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
}

func (c onceOnly) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.Client.GetItem(ctx, in, c.one(optFns)...)
}

func (c onceOnly) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.Client.DescribeTable(ctx, in, c.one(optFns)...)
}

func (c onceOnly) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return c.Client.DescribeTimeToLive(ctx, in, c.one(optFns)...)
}

// transient reports whether err of the table check may heal by waiting
// (throttling, 5xx, timeouts), as opposed to a missing or unfit table, a
// setting that contradicts the record, or a permission.
func transient(err error) bool {
	f := failure.Classify(err, "")
	return f.Infrastructure() || errors.Is(err, context.DeadlineExceeded)
}

// checkQueue reads what the worker needs of its queue (worker.Prepare) and
// warns when the redrive policy would move healthy messages to the DLQ in
// a database outage shorter than minCover: an event source mapping keeps
// polling through an outage, and each poll counts a receive. Only a FIFO
// queue's can: a standard queue's record parked on its last receive is
// re-sent (worker.HealthConfig.OutageCover).
func (h *handler) checkQueue(ctx context.Context, w *worker.Worker, queueURL string) {
	info := w.Prepare(ctx)
	if info.MaxReceiveCount > 0 && info.OutageCover < h.minCover {
		h.log.WarnContext(ctx, "the FIFO queue's redrive policy dead-letters healthy messages in a DynamoDB outage shorter than "+h.minCover.String()+
			": raise its maxReceiveCount or DDBWORKER_PARK_MAX_VISIBILITY", "queueUrl", queueURL, "maxReceiveCount", info.MaxReceiveCount,
			"outageCover", info.OutageCover.String(), "minOutageCover", h.minCover.String())
	}
}

// checkStore runs the check of the inbox table (storeOf) until it passes.
// After a transient failure it tries again on the health probes'
// schedule, with one request at most (a probe of the database): until
// then it returns the last failure at once.
func (h *handler) checkStore(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checked {
		return nil
	}
	if now := time.Now(); now.Before(h.nextCheck) {
		return h.lastCheck
	}
	s, consistency, err := storeOf(ctx, h.ddb, h.cfg.Store, h.given, h.keyGiven, h.owner, h.log)
	if err != nil {
		h.failedChecks++
		// The probes' schedule as configured (DDBWORKER_PROBE_MAX_INTERVAL):
		// the parked records' hides count on a check within its longest wait.
		first := cmp.Or(h.cfg.Health.ProbeInterval, worker.DefaultProbeInterval)
		wait := min(cmp.Or(h.cfg.Health.ProbeMaxInterval, worker.DefaultProbeMaxInterval), first*time.Duration(1<<min(h.failedChecks-1, 4)))
		h.nextCheck, h.lastCheck = time.Now().Add(wait), err
		return err
	}
	h.cfg.Store, h.cfg.MultiRegionConsistency, h.checked = s, consistency, true
	clear(h.workers) // built to park, with the environment's settings
	if h.registered != (tables.Layout{}) && h.registered != s.Layout {
		h.log.WarnContext(ctx, "the handlers were registered with the environment's inbox layout (the cold start could not read the table's), which differs from the one the table records: a handler that writes under the layout (an effects log) uses the environment's until the next cold start; set the DDBWORKER_* layout variables as recorded",
			"table", s.Table, "recorded", fmt.Sprintf("%+v", s.Layout), "registered", fmt.Sprintf("%+v", h.registered))
	}
	return nil
}

// storeOf is the check of the inbox table, at cold start (or, after a
// cold start in an outage, at the first invocation that reaches the
// table): the table's key attributes come from its key schema, then the
// store settings and layout the table records (by `tables create`,
// `tables adopt` or a daemon's first `run`) replace the environment's
// defaults, and a variable given explicitly with another value is an
// error naming it — so a function never writes records with other shards,
// TTLs or index names than the operator commands read; a table that
// records none gets the function's. Then the table must exist and fit the
// layout (keys, indexes, TTL attribute).
func storeOf(ctx context.Context, ddb *dynamodb.Client, s inbox.Store, given func(inbox.Setting) bool, keyGiven map[string]bool, owner string,
	log *slog.Logger) (inbox.Store, ddbtypes.MultiRegionConsistency, error) {
	var err error
	// The table's description also says its consistency mode: on an MRSC
	// global table the worker refuses the routes that need transactions.
	var consistency ddbtypes.MultiRegionConsistency
	if s.Layout, consistency, err = tableKey(ctx, ddb, s.Table, s.Layout, keyGiven); err != nil {
		return s, "", err
	}
	rec, ok, err := inbox.ReadRecorded(ctx, onceOnly{ddb}, s)
	if err != nil {
		return s, "", fmt.Errorf("lambda: %w", err)
	}
	if ok {
		merged, mismatches := rec.Merge(s, given)
		if len(mismatches) > 0 {
			var problems []string
			for _, m := range mismatches {
				problems = append(problems, fmt.Sprintf("%s is %s but table %s records %s", settingVars[m], m.Value(s), s.Table, m.Value(rec.Store)))
			}
			return s, "", fmt.Errorf("lambda: the inbox settings differ from the ones recorded in the table, which every worker and operator command must share: %s; leave the variables unset to use the recorded ones",
				strings.Join(problems, "; "))
		}
		s = merged
	} else if _, err := inbox.RecordSettingsIfMissing(ctx, ddb, s, owner); err != nil {
		return s, "", fmt.Errorf("lambda: recording the inbox settings in table %s: %w", s.Table, err)
	} else {
		log.InfoContext(ctx, "the table recorded no inbox settings: recorded the function's", "table", s.Table)
	}
	if err := tables.Verify(ctx, onceOnly{ddb}, s.Table, s.Layout); err != nil {
		return s, "", fmt.Errorf("lambda: table %s (%s): %w", s.Table, envTable, err)
	}
	return s, consistency, nil
}

// tableKey is l with the table's key attributes, as its key schema names
// them (the settings item is stored under them); a variable given
// explicitly (keyGiven) with another name is an error naming it.
func tableKey(ctx context.Context, ddb *dynamodb.Client, table string, l tables.Layout, keyGiven map[string]bool) (tables.Layout, ddbtypes.MultiRegionConsistency, error) {
	desc, err := onceOnly{ddb}.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return l, "", fmt.Errorf("lambda: table %s (%s): %w", table, envTable, err)
	}
	consistency := desc.Table.MultiRegionConsistency
	pk, sk, ok := tables.KeyAttributes(desc.Table)
	if !ok {
		return l, consistency, nil // no inbox fits it: the table check says why
	}
	var problems []string
	for _, k := range []struct {
		name       string
		field      *string
		tableValue string
	}{{envPKAttribute, &l.PartitionKey, pk}, {envSKAttribute, &l.SortKey, sk}} {
		switch {
		case !keyGiven[k.name]:
			*k.field = k.tableValue
		case *k.field != k.tableValue:
			problems = append(problems, fmt.Sprintf("%s is %s but table %s's key is (%s, %s)", k.name, *k.field, table, pk, sk))
		}
	}
	if len(problems) > 0 {
		return l, consistency, fmt.Errorf("lambda: %s; leave the variable unset, the table's key schema names it", strings.Join(problems, "; "))
	}
	return l, consistency, nil
}

// recordedLayout is l with the layout the table records in place of the
// names the environment does not set (given: the variables it sets); one
// it sets with another name is an error naming it. A table that records
// no layout leaves l as it is.
func recordedLayout(ctx context.Context, ddb *dynamodb.Client, table string, l tables.Layout, given func(name string) bool) (tables.Layout, error) {
	keyGiven := map[string]bool{envPKAttribute: given(envPKAttribute), envSKAttribute: given(envSKAttribute)}
	l, _, err := tableKey(ctx, ddb, table, l, keyGiven)
	if err != nil {
		return l, err
	}
	s := inbox.Store{Table: table, Layout: l}
	rec, ok, err := inbox.ReadRecorded(ctx, onceOnly{ddb}, s)
	if err != nil || !ok {
		return l, err
	}
	merged, mismatches := rec.Merge(s, func(setting inbox.Setting) bool { return setting.IsLayout() && given(settingVars[setting]) })
	var problems []string
	for _, m := range mismatches {
		problems = append(problems, fmt.Sprintf("%s is %s but table %s records %s", settingVars[m], m.Value(s), table, m.Value(rec.Store)))
	}
	if len(problems) > 0 {
		return l, fmt.Errorf("lambda: the inbox layout differs from the one recorded in the table: %s; leave the variables unset to use the recorded one",
			strings.Join(problems, "; "))
	}
	return merged.Layout, nil
}

func (h *handler) newWorker(queueURL string) (*worker.Worker, error) {
	cfg := h.cfg
	cfg.QueueURL = queueURL
	deps := h.deps
	if h.metrics != nil {
		var err error
		if deps.Metrics, err = h.metrics.forQueue(queueURL); err != nil {
			return nil, err
		}
	}
	w, err := worker.New(deps, cfg)
	if err != nil {
		return nil, err
	}
	if p, ok := deps.Metrics.(*prommetrics.Provider); ok && p.Err() != nil {
		return nil, p.Err()
	}
	return w, nil
}

// handle runs an invocation inside its span (tracing on), which is
// flushed before it answers.
func (h *handler) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	ctx, span := h.invocations.start(ctx, semconv.FaaSTriggerPubSub)
	resp, err := h.records(ctx, ev)
	h.invocations.end(ctx, span, len(resp.BatchItemFailures), h.log)
	return resp, err
}

// records runs an invocation's records: those of each queue (an event
// source mapping's batch holds one queue's) by that queue's worker.
func (h *handler) records(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var arns []string
	byARN := map[string][]events.SQSMessage{}
	for _, r := range ev.Records {
		if _, ok := byARN[r.EventSourceARN]; !ok {
			arns = append(arns, r.EventSourceARN)
		}
		byARN[r.EventSourceARN] = append(byARN[r.EventSourceARN], r)
	}
	for _, arn := range arns {
		records := byARN[arn]
		w, err := h.worker(ctx, arn)
		var failed []string
		switch {
		case transient(err) && w != nil:
			// The table cannot be checked yet: the records wait, touching
			// no table, as in an outage.
			failed = w.ParkSQSEvent(ctx, sqsMessages(records))
			err = nil
		case err == nil:
			failed, err = w.HandleSQSEvent(invocation(ctx), sqsMessages(records))
		}
		if err != nil {
			// Nothing was settled: every record comes back after the
			// queue's visibility timeout.
			h.log.ErrorContext(ctx, "records not handled; reported as failures", "eventSourceArn", arn, "records", len(records), "error", err.Error())
			for _, r := range records {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, sqsFailures(failed)...)
	}
	return resp, nil
}

// worker returns the worker of the queue eventSourceARN names ("": the
// configured queue's), built once the table is checked, at the queue's
// first invocation. While the table cannot be checked (a transient error)
// it returns that error with a worker that may only park the records. ctx
// is the invocation's (or the init's): its lines carry the invocation's
// request and trace ids; its end does not cut the table and queue checks
// short.
func (h *handler) worker(ctx context.Context, eventSourceARN string) (*worker.Worker, error) {
	queueURL := worker.QueueURLFromARN(eventSourceARN)
	if h.queueURL != "" && (queueURL == "" || queueID(queueURL) == queueID(h.queueURL)) {
		queueURL = h.queueURL
	}
	if queueURL == "" {
		return nil, fmt.Errorf("eventSourceARN %q is not an SQS queue's and %s is not set: the records' queue is unknown", eventSourceARN, envQueueURL)
	}
	checkCtx := context.WithoutCancel(ctx)
	checkErr := h.checkStore(checkCtx)
	if checkErr != nil && !transient(checkErr) {
		return nil, checkErr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.workers[queueURL]
	if !ok {
		// Until the check passes, with the environment's settings: it only
		// parks (checkStore drops it when the check passes).
		var err error
		if w, err = h.newWorker(queueURL); err != nil {
			return nil, fmt.Errorf("lambda: the recorded inbox settings: %w", err)
		}
		h.workers[queueURL] = w
		h.log.InfoContext(ctx, "worker built for the queue", "queueUrl", queueURL, "eventSourceArn", eventSourceARN, "attentionShards", h.cfg.Store.AttentionShards,
			"tableChecked", checkErr == nil)
		h.checkQueue(checkCtx, w, queueURL)
	}
	return w, checkErr
}

// invocation is ctx naming the invocation it carries (its request id)
// for the leases its records take (worker.WithInvocation): under Lambda
// Managed Instances one execution environment runs several invocations at
// once, each holding its leases under its own name.
func invocation(ctx context.Context) context.Context {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return worker.WithInvocation(ctx, lc.AwsRequestID)
	}
	return ctx
}

// maxConcurrency is how many invocations the execution environment runs at
// once, as lambdacontext.MaxConcurrency reads it (AWS_LAMBDA_MAX_CONCURRENCY,
// which Lambda Managed Instances set; 1 otherwise), through lookupEnv.
func maxConcurrency(lookupEnv func(string) (string, bool)) int {
	n, err := strconv.Atoi(lookupOr(lookupEnv, "AWS_LAMBDA_MAX_CONCURRENCY"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// requestIDHandler adds the invocation's awsRequestId to every log line
// logged with its context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("awsRequestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// failInit ends the process for a failed init: the error as one JSON log
// line, then as the init error of the Runtime API, so the invocation that
// started this environment fails with it.
func failInit(err error) {
	slog.New(slog.NewJSONHandler(os.Stdout, nil)).Error("init failed", "error", err.Error())
	if api := os.Getenv("AWS_LAMBDA_RUNTIME_API"); api != "" {
		body, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "ddbworker.InitError"})
		req, rerr := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
		if rerr == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Lambda-Runtime-Function-Error-Type", "ddbworker.InitError")
			if resp, perr := (&http.Client{Timeout: 2 * time.Second}).Do(req); perr == nil {
				_ = resp.Body.Close()
			}
		}
	}
	os.Exit(1)
}

func lookupOr(lookup func(string) (string, bool), name string) string {
	v, _ := lookup(name)
	return strings.TrimSpace(v)
}
