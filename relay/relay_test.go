package relay_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/tables"
)

func TestNewValidates(t *testing.T) {
	_, err := relay.New(relay.Deps{}, relay.Config{Name: "a#b", LeaseDuration: time.Millisecond, SendAttempts: -1, PollInterval: -time.Second})
	require.Error(t, err)
	for _, want := range []string{"Deps.DynamoDB is required", "Deps.SQS is required", "Config.Table is required", "Config.QueueURL is required",
		"Config.Name \"a#b\"", "Config.LeaseDuration 1ms", "Config.SendAttempts must be positive", "Config.PollInterval must not be negative"} {
		require.ErrorContains(t, err, want)
	}
}

func TestDeduplicationAndGroupIDs(t *testing.T) {
	tests := []struct {
		in   string
		kept bool // the id itself, else its SHA-256 in hex
	}{
		{"9b1f6c1e-4c1d", true},
		{strings.Repeat("a", 128), true},
		{"with space", false},
		{"Zürich-1", false},
		{strings.Repeat("a", 129), false},
		{"", false},
	}
	for _, tt := range tests {
		for _, f := range []func(string) string{relay.DeduplicationID, relay.GroupID} {
			got := f(tt.in)
			if tt.kept {
				require.Equal(t, tt.in, got)
				continue
			}
			require.Regexp(t, "^[0-9a-f]{64}$", got)
			require.Equal(t, got, f(tt.in), "stable")
		}
	}
}

// Records written by transactions reach a FIFO queue, in order per
// aggregate, each sent once; they end PUBLISHED with a TTL and out of the
// PENDING index; the shard's checkpoint is stored.
func TestRelayPublishesFromTheStreamInOrder(t *testing.T) {
	w := newWorld(t, true)
	var ids []string
	ids = append(ids, w.write("a", 1, 12)...)
	ids = append(ids, w.write("b", 1, 5)...)
	w.run(w.relay(nil))
	m := w.metrics
	ids = append(ids, w.write("c", 1, 4)...)
	ids = append(ids, w.write("a", 13, 15)...)
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(ids) }, "every record PUBLISHED")
	got := w.drain(len(ids), 20*time.Second)
	require.ElementsMatch(t, ids, got, "each record once on the queue")
	inOrder(t, got)
	for _, id := range ids {
		require.Equal(t, 1, w.sends.count(id), id)
	}
	require.Equal(t, float64(len(ids)), m.Value("ddbworker_outbox_published_total"))
	require.Equal(t, float64(1), m.Value("ddbworker_relay_shards"), "one shard leased")
	require.Empty(t, m.Series("ddbworker_outbox_failures_total"), "no failed step")

	// A published record has its TTL and left the PENDING index.
	it, err := w.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "OUTBOX#Counter#a"},
			"SK": &types.AttributeValueMemberS{Value: "EVENT#V00000000000000000001#a-e001"}}})
	require.NoError(t, err)
	require.Contains(t, it.Item, "ttl")
	require.Contains(t, it.Item, attr.OutboxPublishedAt)
	require.NotContains(t, it.Item, "GSI2PK")
	// A lease item holds the checkpoint.
	out, err := w.env.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(w.env.Table),
		FilterExpression: aws.String("begins_with(PK, :p)"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "RELAY#default#"}}})
	require.NoError(t, err)
	require.NotEmpty(t, out.Items)
	require.Contains(t, out.Items[0], attr.RelayCheckpoint)
}

// Two relay instances on one stream: one holds the shard's lease, and
// every record is sent exactly once (counted on the SQS client).
func TestTwoRelaysPublishEachRecordOnce(t *testing.T) {
	w := newWorld(t, false)
	w.run(w.relay(func(c *relay.Config) { c.Owner = "one" }))
	w.run(w.relay(func(c *relay.Config) { c.Owner = "two" }))
	var ids []string
	for _, agg := range []string{"p", "q", "r", "s"} {
		ids = append(ids, w.write(agg, 1, 10)...)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(ids) }, "every record PUBLISHED")
	// Let both relays poll a while longer: nothing more is sent.
	calls := w.sends.calls
	deadline := time.Now().Add(time.Second)
	testenv.Eventually(t, 2*time.Second, func() bool { return time.Now().After(deadline) })
	require.Equal(t, len(ids), w.sends.total())
	for _, id := range ids {
		require.Equal(t, 1, w.sends.count(id), id)
	}
	require.Equal(t, calls, w.sends.calls, "no sends after the records were published")
}

// A stopped relay releases its lease, and the next instance continues from
// the checkpoint: nothing is sent twice.
func TestRelayResumesFromTheCheckpoint(t *testing.T) {
	w := newWorld(t, true)
	first := w.write("a", 1, 5)
	stop := w.run(w.relay(func(c *relay.Config) { c.Owner = "one" }))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(first) })
	stop()
	second := w.write("a", 6, 9)
	w.run(w.relay(func(c *relay.Config) { c.Owner = "two" }))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(second) })
	for _, id := range append(first, second...) {
		require.Equal(t, 1, w.sends.count(id), id)
	}
	inOrder(t, w.drain(9, 20*time.Second))
}

// Per-entry send failures are retried; on a FIFO queue an aggregate whose
// record keeps failing stops at it (the others go on) until it succeeds,
// and order holds.
func TestPublishRetriesEntriesAndStopsTheGroup(t *testing.T) {
	w := newWorld(t, true)
	var mu sync.Mutex
	failing := map[string]int{"a-e002": 1, "b-e003": 100} // b-e003 fails until released
	w.sends.fail = func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if failing[id] > 0 {
			failing[id]--
			return true
		}
		return false
	}
	ids := append(w.write("a", 1, 4), w.write("b", 1, 5)...)
	r := w.relay(nil)
	recs := w.pendingRecords()
	errs := r.Publish(context.Background(), recs)
	byID := map[string]error{}
	for i, err := range errs {
		byID[recs[i].EventID] = err
	}
	for _, id := range []string{"a-e001", "a-e002", "a-e003", "a-e004", "b-e001", "b-e002"} {
		require.NoError(t, byID[id], id)
	}
	require.ErrorIs(t, byID["b-e003"], relay.ErrPublish)
	var pe *relay.PublishError
	require.ErrorAs(t, byID["b-e003"], &pe)
	require.Equal(t, "send", pe.Step)
	require.ErrorIs(t, byID["b-e004"], relay.ErrBlocked)
	require.ErrorIs(t, byID["b-e005"], relay.ErrBlocked)
	require.Equal(t, 0, w.sends.count("b-e004"), "not sent past its aggregate's failure")
	st := w.statuses()
	require.Equal(t, outbox.StatusPending, st["b-e003"])
	require.Equal(t, outbox.StatusPending, st["b-e005"])
	require.Equal(t, outbox.StatusPublished, st["a-e002"])

	// Released: the next publish sends the rest and skips the published.
	mu.Lock()
	failing["b-e003"] = 0
	mu.Unlock()
	for _, err := range r.Publish(context.Background(), recs) {
		require.NoError(t, err)
	}
	require.True(t, w.allPublished(ids))
	for _, id := range ids {
		require.Equal(t, 1, w.sends.count(id), id)
	}
	inOrder(t, w.drain(len(ids), 20*time.Second))
}

// The Lambda handler, on events built from the real stream's records:
// the first record not published is the batch's one failure, by sequence
// number; a retry from it publishes the rest and skips the published.
func TestHandleStreamEventReportsTheFirstFailure(t *testing.T) {
	w := newWorld(t, true)
	var mu sync.Mutex
	failB2 := true
	w.sends.fail = func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return failB2 && id == "b-e002"
	}
	ids := append(w.write("a", 1, 3), w.write("b", 1, 3)...)
	// A non-outbox item in the stream is ignored.
	_, err := w.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(w.env.Table),
		Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "ORDER#1"}, "SK": &types.AttributeValueMemberS{Value: "ORDER"}}})
	require.NoError(t, err)
	ev, seqs := w.streamEvent()
	require.Len(t, ev, 7)
	r := w.relay(nil)
	resp, err := r.HandleStreamEvent(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, []string{seqs["b-e002"]}, resp)
	st := w.statuses()
	require.Equal(t, outbox.StatusPending, st["b-e002"])
	require.Equal(t, outbox.StatusPending, st["b-e003"])
	require.Equal(t, outbox.StatusPublished, st["a-e003"])

	// The mapping retries from the failed record (here: the whole batch
	// again, which is what a retry without bisecting sends).
	mu.Lock()
	failB2 = false
	mu.Unlock()
	resp, err = r.HandleStreamEvent(context.Background(), ev)
	require.NoError(t, err)
	require.Empty(t, resp)
	require.True(t, w.allPublished(ids))
	for _, id := range ids {
		require.Equal(t, 1, w.sends.count(id), id)
	}
}

// The sweep publishes PENDING records older than SweepAge that no stream
// reader delivered, and leaves younger ones.
func TestSweepPublishesOldPendingRecords(t *testing.T) {
	w := newWorld(t, true)
	old := append(w.write("a", 1, 3), w.write("b", 1, 2)...)
	now := time.Now().Add(time.Hour)
	r := w.relay(func(c *relay.Config) { c.SweepAge = 30 * time.Minute; c.Now = func() time.Time { return now } })
	res, err := r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, relay.SweepResult{Found: 5, Published: 5}, res)
	require.True(t, w.allPublished(old))

	// Records created "now" on the relay's clock are not due.
	var err2 error
	w.outbox, err2 = outbox.New(outbox.Config{Table: w.env.Table, Now: func() time.Time { return now }})
	require.NoError(t, err2)
	young := w.write("c", 1, 2)
	res, err = r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, relay.SweepResult{}, res, "published records left the index; young ones are not due")
	st := w.statuses()
	for _, id := range young {
		require.Equal(t, outbox.StatusPending, st[id])
	}
	inOrder(t, w.drain(5, 20*time.Second))
}

func TestRunNeedsAStream(t *testing.T) {
	env := testenv.New(t, testenv.Options{NoQueue: true})
	r, err := relay.New(relay.Deps{DynamoDB: env.DynamoDB, SQS: noSQS{}, Streams: &dynamodbstreams.Client{}}, relay.Config{Table: env.Table, QueueURL: "http://q"})
	require.NoError(t, err)
	require.ErrorIs(t, r.Run(context.Background()), relay.ErrNoStream)
}

type noSQS struct{ relay.SQSAPI }

// pendingRecords reads every PENDING outbox record, in key order.
func (w *world) pendingRecords() []outbox.Record {
	w.t.Helper()
	out, err := w.env.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true)})
	require.NoError(w.t, err)
	var recs []outbox.Record
	for _, it := range out.Items {
		if r, err := outbox.Decode(it, tables.DefaultLayout()); err == nil && r.Status == outbox.StatusPending {
			recs = append(recs, r)
		}
	}
	return recs
}

// streamEvent reads the table's stream from TRIM_HORIZON (every shard):
// the records of the Lambda event the mapping would deliver (package
// lambda hands the relay the runtime's records as the Streams API's), and
// the outbox records' sequence numbers by event id.
func (w *world) streamEvent() ([]streamtypes.Record, map[string]string) {
	w.t.Helper()
	ctx := context.Background()
	desc, err := w.env.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(w.env.Table)})
	require.NoError(w.t, err)
	arn := desc.Table.LatestStreamArn
	ds, err := w.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	require.NoError(w.t, err)
	var ev []streamtypes.Record
	seqs := map[string]string{}
	for _, sh := range ds.StreamDescription.Shards {
		it, err := w.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		require.NoError(w.t, err)
		out, err := w.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		require.NoError(w.t, err)
		for _, rec := range out.Records {
			ev = append(ev, rec)
			if id, ok := rec.Dynamodb.NewImage[attr.OutboxEventID].(*streamtypes.AttributeValueMemberS); ok {
				seqs[id.Value] = aws.ToString(rec.Dynamodb.SequenceNumber)
			}
		}
	}
	return ev, seqs
}

// streamFaults fails chosen DynamoDB Streams calls the way AWS does and
// DynamoDB Local never will: an expired shard iterator (after 15 minutes
// unused) and a checkpoint past the stream's 24-hour retention.
type streamFaults struct {
	mu sync.Mutex
	// plan: operation name → errors to return on its next calls.
	plan map[string][]error
}

func (f *streamFaults) install(o *dynamodbstreams.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("streamFaults", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			op := middleware.GetOperationName(ctx)
			f.mu.Lock()
			var err error
			if q := f.plan[op]; len(q) > 0 {
				err, f.plan[op] = q[0], q[1:]
			}
			f.mu.Unlock()
			if err != nil {
				return middleware.InitializeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
}

func (f *streamFaults) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.plan {
		n += len(q)
	}
	return n
}

// An expired iterator is renewed from the checkpoint and a trimmed
// checkpoint restarts at TRIM_HORIZON: nothing is lost, and the re-read
// records are skipped, not sent again.
func TestRelayRecoversFromExpiredAndTrimmedIterators(t *testing.T) {
	w := newWorld(t, true)
	first := w.write("a", 1, 4)
	f := &streamFaults{plan: map[string][]error{}}
	w.streams = dynamodbstreams.NewFromConfig(w.env.AWS, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	}, f.install)
	stop := w.run(w.relay(nil))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(first) })
	// Now the iterator in hand expires, and the checkpoint it falls back on
	// is trimmed: the relay reads the shard again from TRIM_HORIZON.
	f.mu.Lock()
	f.plan["GetRecords"] = []error{&streamtypes.ExpiredIteratorException{Message: aws.String("injected: iterator expired")}}
	f.plan["GetShardIterator"] = []error{&streamtypes.TrimmedDataAccessException{Message: aws.String("injected: trimmed")}}
	f.mu.Unlock()
	testenv.Eventually(t, 10*time.Second, func() bool { return f.left() == 0 }, "faults injected")
	second := w.write("a", 5, 8)
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(second) })
	stop()
	for _, id := range append(first, second...) {
		require.Equal(t, 1, w.sends.count(id), id)
	}
	require.GreaterOrEqual(t, w.metrics.Value("ddbworker_outbox_skipped_total"), float64(len(first)), "the re-read records were skipped")
	inOrder(t, w.drain(8, 20*time.Second))
}

// Another instance takes the shard's lease (here: its item is written
// with another token): this one's next fenced write fails, it stops
// reading the shard, and takes it back once that lease has expired,
// continuing from the checkpoint.
func TestRelayStopsOnALostLeaseAndTakesOverAnExpiredOne(t *testing.T) {
	w := newWorld(t, true)
	first := w.write("a", 1, 2)
	w.run(w.relay(func(c *relay.Config) { c.LeaseDuration = 600 * time.Millisecond }))
	m := w.metrics
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(first) })
	ctx := context.Background()
	leases, err := w.env.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(PK, :p)"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "RELAY#"}}})
	require.NoError(t, err)
	require.Len(t, leases.Items, 1)
	steal := func(expires time.Time) {
		_, err := w.env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.env.Table),
			Key:              map[string]types.AttributeValue{"PK": leases.Items[0]["PK"], "SK": leases.Items[0]["SK"]},
			UpdateExpression: aws.String("SET leaseOwner = :o, leaseToken = :t, leaseExpiresAt = :e"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: "thief"},
				":t": &types.AttributeValueMemberS{Value: "stolen"}, ":e": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires.UnixMilli(), 10)}}})
		require.NoError(t, err)
	}
	steal(time.Now().Add(time.Hour))
	testenv.Eventually(t, 10*time.Second, func() bool { return m.Value("ddbworker_relay_shards") == 0 }, "the shard was given up")
	second := w.write("a", 3, 4)
	// The thief's lease expires: the relay takes the shard back.
	steal(time.Now().Add(-time.Second))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(second) })
	require.Equal(t, float64(1), m.Value("ddbworker_relay_shards"))
	for _, id := range append(first, second...) {
		require.Equal(t, 1, w.sends.count(id), id)
	}
}

// leaseFaults fails the lease writes (UpdateItem on RELAY# items) of one
// DynamoDB client while on is set, with an error other than a failed
// condition: a network partition or throttling on the lease partition.
type leaseFaults struct {
	mu sync.Mutex
	on bool
}

func (f *leaseFaults) install(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("leaseFaults", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
				pk, _ := p.Key["PK"].(*types.AttributeValueMemberS)
				f.mu.Lock()
				on := f.on
				f.mu.Unlock()
				if on && pk != nil && strings.HasPrefix(pk.Value, "RELAY#") {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &types.InternalServerError{Message: aws.String("injected: lease write failed")}
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
}

// An instance that cannot renew its lease (its writes fail, but not on the
// condition) must stop reading the shard before the lease expires: after
// the expiry another instance takes the shard, and the first one's only
// fence — a conditional write — never runs while its writes fail, so it
// would publish beside the new owner for as long as the fault lasts.
func TestRelayGivesUpALeaseItCannotRenew(t *testing.T) {
	w := newWorld(t, true)
	first := w.write("a", 1, 2)
	f := &leaseFaults{}
	ddbA := dynamodb.NewFromConfig(w.env.AWS, f.install)
	mA := metricstest.New()
	a, err := relay.New(relay.Deps{DynamoDB: ddbA, Streams: w.streams, SQS: w.sqs, Metrics: mA}, relay.Config{Table: w.env.Table,
		QueueURL: w.env.Queues.URL, LeaseDuration: 1500 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		DiscoveryInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second})
	require.NoError(t, err)
	w.run(a)
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(first) })
	require.Equal(t, float64(1), mA.Value("ddbworker_relay_shards"))
	f.mu.Lock()
	f.on = true
	f.mu.Unlock()
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, func() bool { return mA.Value("ddbworker_relay_shards") == 0 }, "the unrenewed shard was given up")
	require.Less(t, time.Since(start), 1500*time.Millisecond, "given up before the lease expired")
}

// queryLimit makes every Query on the attention index return one item per
// page, as a large PENDING backlog (a 1 MB page) does.
func queryLimit(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("queryLimit", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*dynamodb.QueryInput); ok && p.IndexName != nil {
				cp := *p
				cp.Limit = aws.Int32(1)
				in.Parameters = &cp
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// On a FIFO queue, a sweep whose record failed does not send the
// aggregate's later records, even when they come in a later page of the
// index: they would overtake it.
func TestSweepKeepsOrderAcrossPages(t *testing.T) {
	w := newWorld(t, true)
	ids := w.write("a", 1, 3)
	w.sends.fail = func(id string) bool { return id == "a-e001" }
	now := time.Now().Add(time.Hour)
	m := metricstest.New()
	r, err := relay.New(relay.Deps{DynamoDB: dynamodb.NewFromConfig(w.env.AWS, queryLimit), SQS: w.sqs, Metrics: m},
		relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL, SendAttempts: 1, Now: func() time.Time { return now }})
	require.NoError(t, err)
	res, err := r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, relay.SweepResult{Found: 3, Failed: 3}, res)
	for _, id := range ids {
		require.Zero(t, w.sends.count(id), id)
	}
	// The fault gone, the next sweep publishes them in order.
	w.sends.fail = nil
	res, err = r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, relay.SweepResult{Found: 3, Published: 3}, res)
	inOrder(t, w.drain(3, 20*time.Second))
}

// batchLimit refuses a SendMessageBatch whose bodies sum to more than
// limit bytes, as SQS does (BatchRequestTooLong: 256 KiB, 1 MiB since
// 2025); fauxqs does not check it.
func batchLimit(limit int) func(*sqs.Options) {
	return func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("batchLimit", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if p, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
					n := 0
					for _, e := range p.Entries {
						n += len(aws.ToString(e.MessageBody))
					}
					if n > limit {
						return middleware.InitializeOutput{}, middleware.Metadata{}, &sqstypes.BatchRequestTooLong{Message: aws.String("injected: batch too long")}
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		})
	}
}

// Records whose bodies together exceed a batch's payload limit are sent
// in several calls; in one call, SQS refuses them all, every time, and
// the shard (or the sweep) never gets past them.
func TestPublishSplitsBatchesByPayloadSize(t *testing.T) {
	w := newWorld(t, false)
	big := strings.Repeat("x", 60_000)
	var ids []string
	for n := 1; n <= 10; n++ {
		e := event("big", n)
		e.Payload = []byte(`{"pad":"` + big + `"}`)
		put, err := w.outbox.Put(context.Background(), outbox.Event{Envelope: e})
		require.NoError(t, err)
		_, err = w.env.DynamoDB.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
		require.NoError(t, err)
		ids = append(ids, e.MessageID)
	}
	q := sqs.NewFromConfig(w.env.AWS, w.sends.install, batchLimit(256*1024))
	r, err := relay.New(relay.Deps{DynamoDB: w.env.DynamoDB, SQS: q}, relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL})
	require.NoError(t, err)
	recs := w.pendingRecords()
	require.Len(t, recs, 10)
	for i, err := range r.Publish(context.Background(), recs) {
		require.NoError(t, err, recs[i].EventID)
	}
	require.True(t, w.allPublished(ids))
}

// dropRecords hides the stream records of chosen events from GetRecords:
// records trimmed from the stream (past its 24 hours) before a relay read
// them. DynamoDB Local trims nothing.
type dropRecords struct{ ids map[string]bool }

func (d *dropRecords) install(o *dynamodbstreams.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("dropRecords", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if res, ok := out.Result.(*dynamodbstreams.GetRecordsOutput); ok && err == nil {
				var keep []streamtypes.Record
				for _, rec := range res.Records {
					if rec.Dynamodb != nil {
						if id, ok := rec.Dynamodb.NewImage[attr.OutboxEventID].(*streamtypes.AttributeValueMemberS); ok && d.ids[id.Value] {
							continue
						}
					}
					keep = append(keep, rec)
				}
				res.Records = keep
			}
			return out, md, err
		}), middleware.After)
	})
}

// When the checkpoint is trimmed, the records between it and the oldest
// one left are only in the table (PENDING, older than the stream's
// retention): they go (the sweep) before the aggregate's later records
// from the stream, which would overtake them on a FIFO queue.
func TestTrimmedCheckpointSweepsBeforeReading(t *testing.T) {
	w := newWorld(t, true)
	var err error
	old := w.outbox
	w.outbox, err = outbox.New(outbox.Config{Table: w.env.Table, Now: func() time.Time { return time.Now().Add(-25 * time.Hour) }})
	require.NoError(t, err)
	gone := w.write("a", 1, 2) // trimmed from the stream
	w.outbox = old
	left := w.write("a", 3, 4)
	f := &streamFaults{plan: map[string][]error{"GetRecords": {&streamtypes.TrimmedDataAccessException{Message: aws.String("injected: trimmed")}}}}
	d := &dropRecords{ids: map[string]bool{gone[0]: true, gone[1]: true}}
	w.streams = dynamodbstreams.NewFromConfig(w.env.AWS, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	}, f.install, d.install)
	w.run(w.relay(nil))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(left) })
	got := w.drain(4, 20*time.Second)
	require.Len(t, got, 4, "every record, also the trimmed ones, was published")
	inOrder(t, got)
}

// oddRecords appends, to every non-empty GetRecords page, a record without
// its dynamodb part: the relay skips it and does not panic.
func oddRecords(o *dynamodbstreams.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("oddRecords", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if res, ok := out.Result.(*dynamodbstreams.GetRecordsOutput); ok && err == nil && len(res.Records) > 0 {
				res.Records = append(res.Records, streamtypes.Record{EventName: streamtypes.OperationTypeInsert})
			}
			return out, md, err
		}), middleware.After)
	})
}

func TestRelaySkipsAStreamRecordWithoutItsChange(t *testing.T) {
	w := newWorld(t, true)
	ids := w.write("a", 1, 3)
	w.streams = dynamodbstreams.NewFromConfig(w.env.AWS, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	}, oddRecords)
	w.run(w.relay(nil))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(ids) })
}

// An item under the outbox's key that is no readable outbox record (a
// hand-written producer forgot the body) is not published, and not
// skipped silently either: the decode step counts it. The records around
// it go on.
func TestRelayCountsAnUnreadableOutboxItem(t *testing.T) {
	w := newWorld(t, true)
	ids := w.write("a", 1, 2)
	_, err := w.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(w.env.Table),
		Item: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "OUTBOX#Counter#broken"}, "SK": &types.AttributeValueMemberS{Value: "EVENT#V1#e-1"},
			"status": &types.AttributeValueMemberS{Value: "PENDING"}, // no body, no event id
		}})
	require.NoError(t, err)
	ids = append(ids, w.write("b", 1, 2)...)
	w.run(w.relay(nil))
	testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(ids) }, "the readable records PUBLISHED")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return w.metrics.Value("ddbworker_outbox_failures_total", "decode") == 1
	}, "the unreadable one counted once")
	require.Zero(t, w.metrics.Value("ddbworker_outbox_failures_total", "send"))
}
