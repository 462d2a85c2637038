package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// harness is one test's table, queues, fault injector and event stream.
type harness struct {
	t      *testing.T
	env    *testenv.Env
	inj    *faults.Injector
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	mu     sync.Mutex
	events []worker.Event
	signal chan struct{}
}

func newHarness(t *testing.T, opts testenv.Options) *harness {
	t.Helper()
	if opts.Queue.VisibilityTimeout == 0 {
		opts.Queue.VisibilityTimeout = 2 * time.Second
	}
	env := testenv.New(t, opts)
	inj := faults.New(1)
	return &harness{
		t: t, env: env, inj: inj,
		ddb:    dynamodb.NewFromConfig(env.AWS, inj.DynamoDB),
		sqs:    sqs.NewFromConfig(env.AWS, inj.SQS),
		signal: make(chan struct{}, 1),
	}
}

// testConfig is fast: 2 s leases, 1 s long polls, 1 s backoff steps. The
// table is this release's own: its records are written v3 (as `tables
// create` records for a new table).
func (h *harness) testConfig() worker.Config {
	return worker.Config{
		Store: inbox.Store{Table: h.env.Table, RequestHashVersion: 3}, QueueURL: h.env.Queues.URL, DLQURL: h.env.Queues.DLQURL,
		Concurrency: 4, WaitTime: time.Second, VisibilityTimeout: 2 * time.Second, ClockSkew: 100 * time.Millisecond,
		Backoff:             worker.Backoff{Base: time.Second, Max: 8 * time.Second, Jitter: 0.5},
		DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 10 * time.Second,
	}
}

// caseHandlers registers the example domain (with application counters).
func (h *harness) caseHandlers(opts ...ddbworker.RouteOption) *ddbworker.Registry {
	reg := ddbworker.NewRegistry()
	require.NoError(h.t, (&caseflow.Handlers{Table: h.env.Table, TrackApplications: true}).Register(reg, opts...))
	return reg
}

// running is a started worker.
type running struct {
	w      *worker.Worker
	cancel context.CancelFunc
	stop   func()
}

// Cancel asks the worker to shut down and returns at once.
func (r *running) Cancel() { r.cancel() }

// Stop shuts the worker down and waits until Run returned.
func (r *running) Stop() { r.stop() }

// start runs a worker until the test ends (or Stop is called), with the
// development hooks hk (at most one).
func (h *harness) start(cfg worker.Config, deps worker.Deps, hk ...hooks.Hooks) *running {
	h.t.Helper()
	if deps.DynamoDB == nil {
		deps.DynamoDB = h.ddb
	}
	if deps.SQS == nil {
		deps.SQS = h.sqs
	}
	if deps.Logger == nil && testing.Verbose() {
		deps.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	next := deps.OnEvent
	deps.OnEvent = func(ev worker.Event) {
		h.note(ev)
		if next != nil {
			next(ev)
		}
	}
	w, err := worker.New(deps, cfg)
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	if len(hk) > 0 {
		ctx = hooks.With(ctx, hk[0])
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(h.t, err)
			case <-time.After(30 * time.Second):
				h.t.Error("worker did not stop within 30s")
			}
		})
	}
	h.t.Cleanup(stop)
	return &running{w: w, cancel: cancel, stop: stop}
}

// note records a worker's event and wakes waitEvents.
func (h *harness) note(ev worker.Event) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// waitEvents blocks until match has accepted n events or the timeout passes.
func (h *harness) waitEvents(n int, timeout time.Duration, match func(worker.Event) bool) []worker.Event {
	h.t.Helper()
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		var got []worker.Event
		for _, ev := range h.events {
			if match(ev) {
				got = append(got, ev)
			}
		}
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-h.signal:
		case <-deadline:
			h.t.Fatalf("waited %s for %d events, have %d: %+v", timeout, n, len(got), h.allEvents())
		}
	}
}

func (h *harness) allEvents() []worker.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]worker.Event(nil), h.events...)
}

func final(ev worker.Event) bool { return ev.Final }

func (h *harness) seedCases(ids ...string) {
	require.NoError(h.t, caseflow.SeedCases(context.Background(), h.env.DynamoDB, h.env.Table, ids))
}

// send enqueues envelopes, one SQS message each, in batches of 10.
func (h *harness) send(envs ...*envelope.Envelope) {
	h.t.Helper()
	bodies := make([]string, len(envs))
	for i, e := range envs {
		b, err := envelope.Encode(e)
		require.NoError(h.t, err)
		bodies[i] = string(b)
	}
	h.sendRaw(bodies...)
}

func (h *harness) sendRaw(bodies ...string) {
	h.t.Helper()
	for start := 0; start < len(bodies); start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
		}
		out, err := h.env.SQS.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(h.env.Queues.URL), Entries: entries})
		require.NoError(h.t, err)
		require.Empty(h.t, out.Failed)
	}
}

func (h *harness) record(key, messageType string) *inbox.Record {
	h.t.Helper()
	out, err := h.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.env.Table), Key: (inbox.Store{}).Key(key, messageType), ConsistentRead: aws.Bool(true)})
	require.NoError(h.t, err)
	if len(out.Item) == 0 {
		return nil
	}
	rec, err := (inbox.Store{}).Decode(out.Item)
	require.NoError(h.t, err)
	return rec
}

func (h *harness) item(key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	h.t.Helper()
	out, err := h.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.env.Table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(h.t, err)
	return out.Item
}

func num(t *testing.T, item map[string]ddbtypes.AttributeValue, attr string) int64 {
	t.Helper()
	v, ok := item[attr].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(t, err)
	return n
}

func str(item map[string]ddbtypes.AttributeValue, attr string) string {
	if v, ok := item[attr].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// applications is how often the work item with key was applied.
func (h *harness) applications(caseID, messageType, key string) int64 {
	return num(h.t, h.item(caseflow.ApplicationKey(caseID, messageType, key)), caseflow.AttrApplications)
}

// dlq drains the DLQ and returns its messages.
func (h *harness) dlq(want int) []types.Message {
	h.t.Helper()
	var got []types.Message
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := h.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.env.Queues.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, VisibilityTimeout: 30})
		require.NoError(h.t, err)
		got = append(got, out.Messages...)
	}
	require.Len(h.t, got, want)
	return got
}

// requireQueueEmpty checks that every message was deleted.
func (h *harness) requireQueueEmpty() {
	h.t.Helper()
	testenv.Eventually(h.t, 5*time.Second, func() bool { return testenv.InspectQueue(h.t, h.env.Queues.URL).Total() == 0 },
		"queue still holds messages: %+v", testenv.InspectQueue(h.t, h.env.Queues.URL))
}

func mustEnv(t *testing.T) func(*envelope.Envelope, error) *envelope.Envelope {
	return func(e *envelope.Envelope, err error) *envelope.Envelope {
		t.Helper()
		require.NoError(t, err)
		return e
	}
}

func jsonBody(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// dynamodbWithAttempts is a client (with the harness's injector) whose SDK
// retryer makes at most attempts attempts.
func dynamodbWithAttempts(h *harness, attempts int) *dynamodb.Client {
	return dynamodb.NewFromConfig(h.env.AWS, h.inj.DynamoDB, func(o *dynamodb.Options) { o.RetryMaxAttempts = attempts })
}

// waitEventsNow returns the events so far that match.
func (h *harness) waitEventsNow(match func(worker.Event) bool) []worker.Event {
	var got []worker.Event
	for _, ev := range h.allEvents() {
		if match(ev) {
			got = append(got, ev)
		}
	}
	return got
}

// proxied starts a proxy in front of DynamoDB Local (whose mode a test
// switches to throttle, fail or hang the whole database) for the test's
// life, and returns it with a client that goes through it, with opts.
func (h *harness) proxied(opts ...func(*dynamodb.Options)) (*ddbproxy.Proxy, *dynamodb.Client) {
	h.t.Helper()
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = proxy.Close() })
	opts = append(opts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
	return proxy, dynamodb.NewFromConfig(h.env.AWS, opts...)
}
