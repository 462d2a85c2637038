package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
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
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
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
	conns := s.worker.Concurrency + 4 // a DynamoDB and an SQS call per record in flight
	awsCfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 2*conns, conns
	})
	ddb, q := dynamodb.NewFromConfig(awsCfg), sqs.NewFromConfig(awsCfg)
	s3c := s3.NewFromConfig(awsCfg) // payloads by reference (payloadRef, SQS Extended Client)

	reg := ddbworker.NewRegistry()
	if err := register(reg, Env{Store: s.store, AWS: awsCfg, DynamoDB: ddb, Logger: log, LookupEnv: lookupEnv}); err != nil {
		return nil, fmt.Errorf("lambda: registering the handlers: %w", err)
	}
	cfg := s.worker
	if fn, stream := lookupOr(lookupEnv, "AWS_LAMBDA_FUNCTION_NAME"), lookupOr(lookupEnv, "AWS_LAMBDA_LOG_STREAM_NAME"); fn != "" && stream != "" {
		cfg.Owner = fn + "/" + stream // leaseOwner names the log stream of the environment that holds the lease
	}
	h := &handler{cfg: cfg, deps: worker.Deps{DynamoDB: ddb, SQS: q, S3: s3c, Handlers: reg, Logger: log}, queueURL: s.queueURL,
		log: log, workers: map[string]*worker.Worker{}}
	validate := s.queueURL
	if validate == "" {
		validate = "https://sqs." + awsCfg.Region + ".amazonaws.com/000000000000/validate"
	}
	w, err := h.newWorker(validate)
	if err != nil {
		return nil, fmt.Errorf("lambda: the DDBWORKER_* configuration or the handlers: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	queue := "from the records' eventSourceARN"
	if s.queueURL != "" {
		h.workers[s.queueURL] = w
		queue = s.queueURL
	}
	log.Info("ready", "table", s.store.Table, "queueUrl", queue, "dlqUrl", cfg.DLQURL, "terminalPolicy", string(cfg.TerminalPolicy),
		"concurrency", cfg.Concurrency, "types", reg.Types())
	return h.handle, nil
}

// handler is the function's handler: one worker per queue, for the life of
// the execution environment.
type handler struct {
	cfg      worker.Config // QueueURL set per worker
	deps     worker.Deps
	queueURL string // DDBWORKER_QUEUE_URL, or ""
	log      *slog.Logger

	mu      sync.Mutex
	workers map[string]*worker.Worker // by queue URL
}

func (h *handler) newWorker(queueURL string) (*worker.Worker, error) {
	cfg := h.cfg
	cfg.QueueURL = queueURL
	return worker.New(h.deps, cfg)
}

// handle runs an invocation: the records of each queue (an event source
// mapping's batch holds one queue's) by that queue's worker.
func (h *handler) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
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
		w, err := h.worker(arn)
		var out events.SQSEventResponse
		if err == nil {
			out, err = w.HandleSQSEvent(ctx, events.SQSEvent{Records: records})
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
		resp.BatchItemFailures = append(resp.BatchItemFailures, out.BatchItemFailures...)
	}
	return resp, nil
}

// worker returns the worker of the queue eventSourceARN names, building it
// at the queue's first invocation.
func (h *handler) worker(eventSourceARN string) (*worker.Worker, error) {
	queueURL := worker.QueueURLFromARN(eventSourceARN)
	if h.queueURL != "" && (queueURL == "" || queueID(queueURL) == queueID(h.queueURL)) {
		queueURL = h.queueURL
	}
	if queueURL == "" {
		return nil, fmt.Errorf("eventSourceARN %q is not an SQS queue's and %s is not set: the records' queue is unknown", eventSourceARN, envQueueURL)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.workers[queueURL]; ok {
		return w, nil
	}
	w, err := h.newWorker(queueURL)
	if err != nil {
		return nil, err
	}
	h.workers[queueURL] = w
	h.log.Info("worker built for the queue", "queueUrl", queueURL, "eventSourceArn", eventSourceARN)
	return w, nil
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
