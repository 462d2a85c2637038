package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// sends counts SendMessageBatch entries by body (so by event), through SDK
// middleware on a real SQS client, and can fail chosen entries: a failed
// entry is taken out of the request before it is sent and reported in the
// response's Failed list, as SQS reports a per-entry failure.
type sends struct {
	mu     sync.Mutex
	bodies map[string]int
	calls  int
	// fail says whether an entry (by event id) fails this time.
	fail func(eventID string) bool
}

func newSends() *sends { return &sends{bodies: map[string]int{}} }

func (s *sends) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("countSends", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			p, ok := in.Parameters.(*sqs.SendMessageBatchInput)
			if !ok {
				return next.HandleInitialize(ctx, in)
			}
			cp := *p
			cp.Entries = nil
			var failed []sqstypes.BatchResultErrorEntry
			s.mu.Lock()
			s.calls++
			for _, e := range p.Entries {
				id := eventID(aws.ToString(e.MessageBody))
				if s.fail != nil && s.fail(id) {
					failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: false})
					continue
				}
				cp.Entries = append(cp.Entries, e)
			}
			s.mu.Unlock()
			var out middleware.InitializeOutput
			var md middleware.Metadata
			if len(cp.Entries) == 0 {
				out.Result = &sqs.SendMessageBatchOutput{}
			} else {
				in.Parameters = &cp
				var err error
				out, md, err = next.HandleInitialize(ctx, in)
				if err != nil {
					return out, md, err
				}
				s.mu.Lock()
				for _, ok := range out.Result.(*sqs.SendMessageBatchOutput).Successful {
					for _, e := range cp.Entries {
						if aws.ToString(e.Id) == aws.ToString(ok.Id) {
							s.bodies[eventID(aws.ToString(e.MessageBody))]++
						}
					}
				}
				s.mu.Unlock()
			}
			res := out.Result.(*sqs.SendMessageBatchOutput)
			res.Failed = append(res.Failed, failed...)
			return out, md, nil
		}), middleware.After)
	})
}

func (s *sends) count(eventID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[eventID]
}

func (s *sends) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.bodies {
		n += c
	}
	return n
}

func eventID(body string) string {
	var e struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return e.MessageID
}

// world is one test's table (stream on), queue, outbox writer and clients.
type world struct {
	t       *testing.T
	env     *testenv.Env
	streams *dynamodbstreams.Client
	sqs     *sqs.Client // counting
	sends   *sends
	outbox  *outbox.Writer
	metrics *metricstest.Provider // the last relay's
}

func newWorld(t *testing.T, fifo bool) *world {
	t.Helper()
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{FIFO: fifo, VisibilityTimeout: 5 * time.Second}})
	ctx := context.Background()
	_, err := tables.EnableStream(ctx, env.DynamoDB, env.Table, time.Minute)
	require.NoError(t, err)
	w := &world{t: t, env: env, sends: newSends()}
	w.streams = dynamodbstreams.NewFromConfig(env.AWS, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	})
	w.sqs = sqs.NewFromConfig(env.AWS, w.sends.install)
	w.outbox, err = outbox.New(outbox.Config{Table: env.Table})
	require.NoError(t, err)
	return w
}

// relay returns a relay with test timings.
func (w *world) relay(mod func(*relay.Config)) *relay.Relay {
	w.t.Helper()
	cfg := relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL, LeaseDuration: 3 * time.Second,
		PollInterval: 50 * time.Millisecond, DiscoveryInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	m := metricstest.New()
	w.metrics = m
	r, err := relay.New(relay.Deps{DynamoDB: w.env.DynamoDB, Streams: w.streams, SQS: w.sqs, Metrics: m}, cfg)
	require.NoError(w.t, err)
	return r
}

// run runs r until the test ends.
func (w *world) run(r *relay.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(w.t, err)
			case <-time.After(20 * time.Second):
				w.t.Error("relay did not stop")
			}
		})
	}
	w.t.Cleanup(stop)
	return stop
}

func ptr[T any](v T) *T { return &v }

// event is the envelope of an aggregate's n-th event.
func event(aggregate string, n int) *envelope.Envelope {
	id := fmt.Sprintf("%s-e%03d", aggregate, n)
	return &envelope.Envelope{MessageID: id, SchemaVersion: envelope.SchemaV1, MessageType: "Counted", Producer: "test",
		OccurredAt: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), IdempotencyKey: "k-" + id,
		AggregateType: "Counter", AggregateID: aggregate, AggregateVersion: ptr(int64(n)),
		Payload: []byte(`{"n":` + strconv.Itoa(n) + `}`)}
}

// write commits the aggregate's events 1..n, each in a transaction of its
// own (the producer's state change is left out: package outbox tests it).
func (w *world) write(aggregate string, from, to int) []string {
	w.t.Helper()
	var ids []string
	for n := from; n <= to; n++ {
		put, err := w.outbox.Put(context.Background(), outbox.Event{Envelope: event(aggregate, n)})
		require.NoError(w.t, err)
		_, err = w.env.DynamoDB.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
		require.NoError(w.t, err)
		ids = append(ids, event(aggregate, n).MessageID)
	}
	return ids
}

// statuses reads every outbox record's status by event id.
func (w *world) statuses() map[string]string {
	w.t.Helper()
	out := map[string]string{}
	p := dynamodb.NewScanPaginator(w.env.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(w.t, err)
		for _, it := range page.Items {
			if r, err := outbox.Decode(it, tables.DefaultLayout()); err == nil {
				out[r.EventID] = r.Status
			}
		}
	}
	return out
}

func (w *world) allPublished(ids []string) bool {
	st := w.statuses()
	for _, id := range ids {
		if st[id] != outbox.StatusPublished {
			return false
		}
	}
	return true
}

// drain receives (and deletes) messages until want event ids were seen or
// timeout passes; it returns the event ids in receive order.
func (w *world) drain(want int, timeout time.Duration) []string {
	w.t.Helper()
	var got []string
	seen := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(seen) < want && time.Now().Before(deadline) {
		out, err := w.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.env.Queues.URL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(w.t, err)
		for _, m := range out.Messages {
			id := eventID(aws.ToString(m.Body))
			got = append(got, id)
			seen[id] = true
			_, err := w.env.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(w.env.Queues.URL), ReceiptHandle: m.ReceiptHandle})
			require.NoError(w.t, err)
		}
	}
	return got
}

// inOrder checks that, per aggregate, the first receipts of its events
// come in event order.
func inOrder(t *testing.T, received []string) {
	t.Helper()
	last := map[string]string{}
	seen := map[string]bool{}
	for _, id := range received {
		if seen[id] {
			continue
		}
		seen[id] = true
		agg := id[:len(id)-5]
		require.Less(t, last[agg], id, "aggregate %s: %s arrived after %s", agg, id, last[agg])
		last[agg] = id
	}
}

func receiveAll(queueURL string) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1}
}
