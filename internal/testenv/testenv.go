package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/emulators"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Main runs the package's tests against emulators and exits.
func Main(m *testing.M) {
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" || os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		env, err := emulators.Start(ctx, emulators.Config{})
		cancel()
		if err != nil {
			// The error is one line that names what to install or run.
			fmt.Fprintln(os.Stderr, "testenv: cannot start the emulators:", err)
			os.Exit(2)
		}
		for _, kv := range env.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		code := m.Run()
		_ = env.Stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// AWSConfig loads the SDK configuration from the environment Main prepared
// and fails the test unless every endpoint is on loopback.
func AWSConfig(t testing.TB) aws.Config {
	t.Helper()
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"} {
		v := os.Getenv(k)
		require.NotEmpty(t, v, "%s is not set: run the tests through testenv.Main", k)
		u, err := url.Parse(v)
		require.NoError(t, err)
		ip := net.ParseIP(u.Hostname())
		require.True(t, u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()), "%s=%s is not a loopback address: tests only talk to local emulators", k, v)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	require.NoError(t, err)
	return cfg
}

// Unique returns prefix plus a random suffix, valid as a table or queue name.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Env is one test's private table and queues.
type Env struct {
	AWS      aws.Config
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	Table    string
	Queues   worker.Queues
}

// Options adjust New.
type Options struct {
	// NoQueue skips queue creation.
	NoQueue bool
	// Queue overrides queue settings (Name is always generated).
	Queue worker.QueueConfig
}

// New creates a table (tables.Ensure) and a queue with its DLQ, all with
// unique names, and deletes them when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	cfg := AWSConfig(t)
	e := &Env{AWS: cfg, DynamoDB: dynamodb.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), Table: Unique("t")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, tables.Ensure(ctx, e.DynamoDB, tables.Config{Name: e.Table}))
	t.Cleanup(func() {
		_, _ = e.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(e.Table)})
	})
	if opts.NoQueue {
		return e
	}
	qc := opts.Queue
	qc.Name = Unique("q")
	if qc.FIFO {
		qc.Name += ".fifo"
	}
	qs, err := worker.CreateQueues(ctx, e.SQS, qc)
	require.NoError(t, err)
	e.Queues = qs
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = e.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	return e
}

// QueueState is what a queue holds, read from fauxqs's non-destructive
// inspection endpoint (exact and immediate, unlike ApproximateNumberOf*).
type QueueState struct {
	Ready, Delayed, InFlight int
}

// Total is every message still in the queue.
func (q QueueState) Total() int { return q.Ready + q.Delayed + q.InFlight }

// InspectQueue reads the state of the queue at queueURL.
func InspectQueue(t testing.TB, queueURL string) QueueState {
	t.Helper()
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	resp, err := http.Get(strings.TrimRight(os.Getenv("AWS_ENDPOINT_URL_SQS"), "/") + "/_fauxqs/queues/" + url.PathEscape(name))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Messages struct {
			Ready    []json.RawMessage `json:"ready"`
			Delayed  []json.RawMessage `json:"delayed"`
			Inflight []json.RawMessage `json:"inflight"`
		} `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return QueueState{Ready: len(body.Messages.Ready), Delayed: len(body.Messages.Delayed), InFlight: len(body.Messages.Inflight)}
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.Fail(t, "condition not met in time", msgAndArgs...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Clock is a fake clock, safe for concurrent use: tests move it instead of
// sleeping. Pass its Now as a component's Config.Now.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock set to the current time, truncated to the
// millisecond (the precision of stored lease expiries).
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Now().Truncate(time.Millisecond).UnixNano())
	return c
}

// Now reads the clock.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
