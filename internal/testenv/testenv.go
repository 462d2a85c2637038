package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
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

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// RequireEnv names the environment variable that makes missing emulators a
// failure instead of a skip: `make test` sets it, and so may CI. It is the
// public helper's (emulators.RequireEnv).
const RequireEnv = emulators.RequireEnv

// unavailable is why the emulators could not be started for this test
// binary (nil when they run, or Main was not called).
var unavailable error

// Main runs the package's tests and exits. When AWS_ENDPOINT_URL_DYNAMODB
// and AWS_ENDPOINT_URL_SQS are set (as `make test` does, through
// `ddbworker-dev emulators exec`), the protocol tests use those emulators;
// otherwise Main starts a private pair for the test binary with the public
// helper (emulators.Start: installed into the user's cache on first use).
// When it cannot because a runtime is missing (no Java 17, no Node.js 22,
// no npm: emulators.ErrUnavailable), the pure-logic tests still run and
// every protocol test skips with one line that says so — unless
// DDBWORKER_REQUIRE_EMULATORS is set (1, true), which makes it a failure
// (exit 2). Any other error (npm ci failing, an emulator that does not
// start) is always a failure.
func Main(m *testing.M) {
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" && os.Getenv("AWS_ENDPOINT_URL_SQS") != "" {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	env, err := emulators.Start(ctx, emulators.Config{})
	cancel()
	if err != nil {
		if errors.Is(err, emulators.ErrUnavailable) && !required() {
			unavailable = err
			fmt.Fprintln(os.Stderr, "testenv: this package's protocol tests skip: the emulators are not available (install Java 17 and Node 22, then `make test`): "+err.Error())
			os.Exit(m.Run())
		}
		if errors.Is(err, emulators.ErrUnavailable) {
			// The error is one line that names what to install.
			fmt.Fprintf(os.Stderr, "testenv: cannot start the emulators (%s is set): %v\n", RequireEnv, err)
		} else {
			fmt.Fprintln(os.Stderr, "testenv: cannot start the emulators:", err)
		}
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

// required reports whether DDBWORKER_REQUIRE_EMULATORS asks for the
// emulators: any value but "", "0" and "false".
func required() bool { return emulators.Required() }

func skipLine(reason error) string {
	return "protocol test skipped: the emulators are not available (install Java 17 and Node 22, then `make test`): " + reason.Error()
}

// skipUnavailable skips t when Main could not start the emulators.
func skipUnavailable(t testing.TB) {
	t.Helper()
	if unavailable != nil {
		t.Skip(skipLine(unavailable))
	}
}

// SkipWithoutRuntimes skips t, with the same line as the protocol tests,
// when the emulators' runtimes are missing (emulators.ErrUnavailable): for
// a test that starts emulators of its own instead of using Main's. It
// installs the npm packages when they are missing. Under
// DDBWORKER_REQUIRE_EMULATORS it fails t instead; any other error fails it.
func SkipWithoutRuntimes(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := emulators.Resolve(ctx, emulators.Config{})
	switch {
	case err == nil:
	case errors.Is(err, emulators.ErrUnavailable) && !required():
		t.Skip(skipLine(err))
	case errors.Is(err, emulators.ErrUnavailable):
		t.Fatalf("the emulators are required (%s is set): %v", RequireEnv, err)
	default:
		t.Fatalf("the emulators: %v", err)
	}
}

// Endpoints returns the DynamoDB and SQS endpoints of the emulators Main
// prepared, for a test that must hand them to something other than the SDK
// (a command line, a proxy, a child process). Like AWSConfig, it skips the
// test when the emulators are not available and fails it unless both are
// on loopback.
func Endpoints(t testing.TB) (dynamoDB, sqs string) {
	t.Helper()
	skipUnavailable(t)
	var eps [2]string
	for i, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"} {
		v := os.Getenv(k)
		require.NotEmpty(t, v, "%s is not set: run the tests through testenv.Main", k)
		u, err := url.Parse(v)
		require.NoError(t, err)
		ip := net.ParseIP(u.Hostname())
		require.True(t, u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()), "%s=%s is not a loopback address: tests only talk to local emulators", k, v)
		eps[i] = v
	}
	return eps[0], eps[1]
}

// AWSConfig loads the SDK configuration from the environment Main prepared.
// It skips the test when the emulators are not available (see Main) and
// fails it unless every endpoint is on loopback.
func AWSConfig(t testing.TB) aws.Config {
	t.Helper()
	Endpoints(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	require.NoError(t, err)
	return cfg
}

// Unique returns prefix plus a random suffix, valid as a table or queue name.
func Unique(prefix string) string { return emulators.UniqueName(prefix) }

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
// unique names, and deletes them when the test ends. It skips the test when
// the emulators are not available (see Main).
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
type QueueState = emulators.QueueState

// InspectQueue reads the state of the queue at queueURL. It skips the test
// when the emulators are not available (see Main).
func InspectQueue(t testing.TB, queueURL string) QueueState {
	t.Helper()
	_, sqsEndpoint := Endpoints(t)
	st, err := emulators.Endpoints{SQS: sqsEndpoint}.InspectQueue(context.Background(), queueURL)
	require.NoError(t, err)
	return st
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
