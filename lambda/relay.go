package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
)

// The outbox relay's variables (the daemon's `relay` flags).
const (
	envOutboxShards = "DDBWORKER_OUTBOX_SHARDS"
	envPublishedTTL = "DDBWORKER_PUBLISHED_TTL"
)

// RelayMain runs the outbox relay as a Lambda function on the table's
// DynamoDB Stream (an event source mapping with FunctionResponseTypes
// ReportBatchItemFailures, StartingPosition TRIM_HORIZON, and a filter on
// outbox INSERTs — see docs/outbox.md), and never returns. It reads
// DDBWORKER_TABLE and DDBWORKER_QUEUE_URL (required), DDBWORKER_OUTBOX_SHARDS
// (16), DDBWORKER_PUBLISHED_TTL (168h), DDBWORKER_LOG_LEVEL and the layout's
// DDBWORKER_*_ATTRIBUTE and DDBWORKER_*_INDEX variables; a problem fails the
// init like Main's.
func RelayMain() {
	handle, err := NewRelay(context.Background(), os.LookupEnv)
	if err != nil {
		failInit(err)
	}
	awslambda.Start(handle)
}

// NewRelay reads the configuration through lookupEnv (os.LookupEnv when
// nil), loads the AWS configuration and returns the stream handler
// (relay.Relay.HandleStreamEvent): the first outbox record of a batch that
// could not be published is its batch item failure, by sequence number.
func NewRelay(ctx context.Context, lookupEnv func(string) (string, bool)) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	r := &envReader{lookup: lookupEnv}
	cfg := relay.Config{Table: r.str(envTable, ""), QueueURL: r.str(envQueueURL, "")}
	if cfg.Table == "" {
		r.errs = append(r.errs, envTable+" is required: the table whose stream carries the outbox records")
	}
	if cfg.QueueURL == "" {
		r.errs = append(r.errs, envQueueURL+" is required: the queue of outbox records that name no destination")
	} else if queueID(cfg.QueueURL) == "" {
		r.fail(envQueueURL, cfg.QueueURL, "not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
	}
	for _, v := range layoutVars {
		*v.field(&cfg.Layout) = r.str(v.name, "")
	}
	cfg.Shards = r.integer(envOutboxShards, outbox.DefaultShards, 1, 100)
	cfg.PublishedTTL = r.duration(envPublishedTTL, relay.DefaultPublishedTTL, time.Minute, 0)
	var level slog.Level
	if v := r.str(envLogLevel, "info"); level.UnmarshalText([]byte(v)) != nil {
		r.fail(envLogLevel, v, "must be debug, info, warn or error")
	}
	if len(r.errs) > 0 {
		return nil, errors.New("lambda: invalid environment: " + strings.Join(r.errs, "; "))
	}
	log := slog.New(requestIDHandler{slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level})})
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda: loading the AWS configuration: %w", err)
	}
	iv, log, err := startTracing(ctx, lookupEnv, log)
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	// The outbox records live under the layout the table records. A role
	// granted before the layout was recorded may not read it
	// (dynamodb:DescribeTable, GetItem): then the variables name it, as
	// before, and the log says what to grant.
	layout, err := recordedLayout(ctx, ddb, cfg.Table, cfg.Layout, func(name string) bool { _, ok := r.get(name); return ok })
	switch code := failure.APICode(err); {
	case code == "AccessDeniedException" || code == "AccessDenied":
		log.Warn("cannot read the inbox layout recorded in the table: the DDBWORKER_* layout variables name it; grant dynamodb:DescribeTable and dynamodb:GetItem on the table",
			"table", cfg.Table, "error", err.Error())
	case err != nil:
		return nil, err
	default:
		cfg.Layout = layout
	}
	deps := relay.Deps{DynamoDB: ddb, SQS: sqs.NewFromConfig(awsCfg), Logger: log}
	if iv.traces.On() {
		deps.TracerProvider = iv.traces.Provider // send <queue> spans linked to the records' producers
	}
	rl, err := relay.New(deps, cfg)
	if err != nil {
		return nil, fmt.Errorf("lambda: the DDBWORKER_* configuration: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	log.Info("relay ready", "table", cfg.Table, "queueUrl", cfg.QueueURL)
	handle := streamHandler(rl)
	if !iv.traces.On() {
		return handle, nil
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		// The invocation's span (trigger datasource: a DynamoDB stream)
		// parents the relay's send spans and holds its log lines.
		ctx, span := iv.start(ctx, semconv.FaaSTriggerDatasource)
		resp, err := handle(ctx, ev)
		iv.end(ctx, span, len(resp.BatchItemFailures), log)
		return resp, err
	}, nil
}
