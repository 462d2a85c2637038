package relay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker/metrics"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tables"
)

// DynamoDBAPI is what the relay needs of DynamoDB.
type DynamoDBAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// StreamsAPI is what the relay needs of DynamoDB Streams.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, params *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, params *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, params *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// SQSAPI is what the relay needs of SQS.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Deps are the relay's clients.
type Deps struct {
	// DynamoDB client. Required.
	DynamoDB DynamoDBAPI
	// Streams client: required by Run, unused by Sweep and the Lambda
	// handler.
	Streams StreamsAPI
	// SQS client. Required.
	SQS SQSAPI
	// Logger for JSON logs. Default: discard.
	Logger *slog.Logger
	// Metrics is where the relay reports its figures (the
	// ddbworker_outbox_* and ddbworker_relay_* metrics the daemon serves
	// on /metrics). Default: metrics.Discard.
	Metrics metrics.Provider
	// TracerProvider traces each SendMessageBatch as a send <queue> span
	// linked to the records' producers. Optional: nil, no spans. The
	// records' own trace context travels with their messages either way.
	TracerProvider trace.TracerProvider
}

// The defaults of Config, applied by WithDefaults; the daemon's flags and
// the Lambda adapter read them.
const (
	DefaultName              = "default"
	DefaultLeaseDuration     = 30 * time.Second
	DefaultPollInterval      = time.Second
	DefaultDiscoveryInterval = 10 * time.Second
	DefaultPublishedTTL      = 7 * 24 * time.Hour
	DefaultSendAttempts      = 3
	DefaultDrainTimeout      = 10 * time.Second
	DefaultSweepAge          = 10 * time.Minute
)

// Config configures a Relay.
type Config struct {
	// Table holds the outbox records and the relay's shard leases.
	// Required.
	Table string
	// Layout names the key, attention index and TTL attributes. Default:
	// tables.DefaultLayout().
	Layout tables.Layout
	// Shards is the number of attention index partitions of PENDING
	// records: the producers' outbox.Config.Shards. Default: 16.
	Shards int
	// QueueURL is where records without a destination go. Required.
	QueueURL string
	// StreamARN is the stream to read. Default: the table's latest stream
	// (DescribeTable's LatestStreamArn).
	StreamARN string
	// Name groups the relay instances that share the stream's shards: one
	// lease per shard and name. Default: "default".
	Name string
	// Owner names this instance in leases and logs. Default:
	// <hostname>-<pid>-<random>.
	Owner string
	// LeaseDuration is how long a shard lease lasts without renewal; an
	// instance that stops renewing (crashed, paused) loses its shards to
	// another after it. Renewed every third of it. Default: 30s.
	LeaseDuration time.Duration
	// PollInterval is the wait after an empty GetRecords page. Default: 1s.
	PollInterval time.Duration
	// DiscoveryInterval is how often the stream's shards are listed and
	// free leases taken. Default: 10s.
	DiscoveryInterval time.Duration
	// PublishedTTL is how long PUBLISHED records live (TTL). Default: 168h.
	PublishedTTL time.Duration
	// SendAttempts bounds the attempts of one entry within one publish;
	// a record still failing is retried with its page (Run) or reported
	// (Lambda). Default: 3.
	SendAttempts int
	// DrainTimeout bounds, after Run's context ends, the page in hand
	// (send, mark, checkpoint) before leases are released. Default: 10s.
	DrainTimeout time.Duration
	// SweepAge: Sweep publishes PENDING records created longer ago than
	// this. Default: 10m.
	SweepAge time.Duration
	// SweepInterval: Run also sweeps this often (0: never). Default: 0.
	SweepInterval time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default (the
// Layout's too; what it cannot fix, validate reports).
func (c Config) WithDefaults() Config {
	c.Layout, _ = c.Layout.WithDefaults()
	c.Shards = cmp.Or(c.Shards, outbox.DefaultShards)
	c.Name = cmp.Or(c.Name, DefaultName)
	if c.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, DefaultLeaseDuration)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.DiscoveryInterval = cmp.Or(c.DiscoveryInterval, DefaultDiscoveryInterval)
	c.PublishedTTL = cmp.Or(c.PublishedTTL, DefaultPublishedTTL)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.SweepAge = cmp.Or(c.SweepAge, DefaultSweepAge)
	c.SendAttempts = cmp.Or(c.SendAttempts, DefaultSendAttempts)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if c.Table == "" {
		errs = append(errs, errors.New("relay: Config.Table is required"))
	}
	if c.QueueURL == "" {
		errs = append(errs, errors.New("relay: Config.QueueURL is required"))
	}
	if _, err := c.Layout.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.Shards < 1 || c.Shards > 100 {
		errs = append(errs, fmt.Errorf("relay: Config.Shards %d must be 1..100", c.Shards))
	}
	if strings.Contains(c.Name, "#") {
		errs = append(errs, fmt.Errorf("relay: Config.Name %q must not contain '#'", c.Name))
	}
	for _, d := range []struct {
		v    time.Duration
		name string
	}{{c.LeaseDuration, "LeaseDuration"}, {c.PollInterval, "PollInterval"}, {c.DiscoveryInterval, "DiscoveryInterval"},
		{c.PublishedTTL, "PublishedTTL"}, {c.DrainTimeout, "DrainTimeout"}, {c.SweepAge, "SweepAge"}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("relay: Config.%s must not be negative", d.name))
		}
	}
	if c.SweepInterval < 0 {
		errs = append(errs, errors.New("relay: Config.SweepInterval must not be negative"))
	}
	if c.LeaseDuration < 3*time.Millisecond*100 {
		errs = append(errs, fmt.Errorf("relay: Config.LeaseDuration %s must be at least 300ms", c.LeaseDuration))
	}
	if c.SendAttempts < 1 {
		errs = append(errs, errors.New("relay: Config.SendAttempts must be positive"))
	}
	return errs
}
