package dlq_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// attemptLog logs every attempt of an SQS call that failed and was
// retried by the SDK: an emulator response lost under load shows here.
type attemptLog struct{ t *testing.T }

func (attemptLog) ID() string { return "dlqtest.attemptLog" }

func (a attemptLog) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleFinalize(ctx, in)
	if err != nil {
		a.t.Logf("%s attempt failed: %v", middleware.GetOperationName(ctx), err)
	}
	return out, md, err
}

// fixture is one test's work queue and DLQ.
type fixture struct {
	t      *testing.T
	sqs    *sqs.Client
	queues worker.Queues
}

func newFixture(t *testing.T, fifo bool) *fixture {
	t.Helper()
	client := sqs.NewFromConfig(testenv.AWSConfig(t), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(attemptLog{t}, "Retry", middleware.After)
		})
	})
	name := testenv.Unique("dlqt")
	if fifo {
		name += ".fifo"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	qs, err := worker.CreateQueues(ctx, client, worker.QueueConfig{Name: name, FIFO: fifo, MaxReceiveCount: 1, VisibilityTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	return &fixture{t: t, sqs: client, queues: qs}
}

func (f *fixture) queue(cfg dlq.Config) *dlq.Queue {
	f.t.Helper()
	if cfg.DLQURL == "" {
		cfg.DLQURL = f.queues.DLQURL
	}
	if cfg.EmptyReceives == 0 {
		cfg.EmptyReceives = 1 // fauxqs: one empty long poll means empty
	}
	q, err := dlq.New(f.sqs, cfg)
	require.NoError(f.t, err)
	return q
}

// failed is a DLQ message as the worker's terminal policy writes it (code
// set), or as the redrive policy moves it (code empty: no ddbworker.*
// attributes).
type failed struct {
	code, typ, key string
	body           string // default: an envelope with typ and key
	failedAt       time.Time
	group          string // FIFO only
	producer       map[string]string
}

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

func envelopeBody(typ, key string) string {
	b, _ := json.Marshal(map[string]any{"messageId": "m-" + key, "schemaVersion": 1, "messageType": typ, "idempotencyKey": key,
		"producer": "dlq-test", "aggregateType": "Case", "aggregateId": "c1", "payload": map[string]string{"k": key}})
	return string(b)
}

// seed sends msgs to the DLQ, one at a time (in order), and returns their
// DLQ message ids.
func (f *fixture) seed(msgs ...failed) []string {
	f.t.Helper()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		attrs := map[string]types.MessageAttributeValue{}
		for k, v := range m.producer {
			attrs[k] = str(v)
		}
		if m.code != "" {
			at := m.failedAt
			if at.IsZero() {
				at = time.Now()
			}
			attrs[dlq.AttrFailureCode] = str(m.code)
			attrs[dlq.AttrFailureMessage] = str("because " + m.code)
			attrs[dlq.AttrFailedAt] = str(inbox.FormatTime(at))
			attrs[dlq.AttrSourceMessageID] = str("src-" + m.key)
			if m.typ != "" {
				attrs[dlq.AttrMessageType] = str(m.typ)
				attrs[dlq.AttrIdempotencyKey] = str(m.key)
			}
		}
		body := m.body
		if body == "" {
			body = envelopeBody(m.typ, m.key)
		}
		in := &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.DLQURL), MessageBody: aws.String(body), MessageAttributes: attrs}
		if m.group != "" {
			in.MessageGroupId = aws.String(m.group)
			in.MessageDeduplicationId = aws.String(testenv.Unique("dedup"))
		}
		out, err := f.sqs.SendMessage(context.Background(), in)
		require.NoError(f.t, err)
		ids[i] = aws.ToString(out.MessageId)
	}
	return ids
}

// moveByRedrivePolicy sends body to the work queue and receives it until
// SQS's redrive policy (maxReceiveCount 1) moves it to the DLQ.
func (f *fixture) moveByRedrivePolicy(body string, producer map[string]string) {
	f.t.Helper()
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range producer {
		attrs[k] = str(v)
	}
	before := testenv.InspectQueue(f.t, f.queues.DLQURL).Total()
	_, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.URL), MessageBody: aws.String(body), MessageAttributes: attrs})
	require.NoError(f.t, err)
	testenv.Eventually(f.t, 10*time.Second, func() bool {
		_, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queues.URL), VisibilityTimeout: 0, WaitTimeSeconds: 0})
		require.NoError(f.t, err)
		return testenv.InspectQueue(f.t, f.queues.DLQURL).Total() == before+1
	}, "the redrive policy did not move the message")
	require.Zero(f.t, testenv.InspectQueue(f.t, f.queues.URL).Total())
}

// drain receives and deletes every message of url (FIFO groups included),
// until want arrived or nothing comes for two receives.
func (f *fixture) drain(url string, want int) []types.Message {
	f.t.Helper()
	var got []types.Message
	deadline := time.Now().Add(15 * time.Second)
	for empty := 0; empty < 2 && len(got) < want && time.Now().Before(deadline); {
		out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 30, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		require.NoError(f.t, err)
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			_, err := f.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
			require.NoError(f.t, err)
		}
		got = append(got, out.Messages...)
	}
	require.Len(f.t, got, want)
	return got
}

// requireAllVisible checks that the DLQ holds n messages, none hidden.
func (f *fixture) requireAllVisible(n int) {
	f.t.Helper()
	st := testenv.InspectQueue(f.t, f.queues.DLQURL)
	require.Equal(f.t, testenv.QueueState{Ready: n}, st, "every message back in the DLQ and visible")
}

const (
	typeDeadline = "CaseDeadlineCalculationRequested"
	typeLedger   = "LedgerEntryRequested"
	typeNote     = "CaseNoteRecorded"
)

func TestDLQStats(t *testing.T) {
	f := newFixture(t, false)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	f.moveByRedrivePolicy(envelopeBody(typeNote, "k-note"), map[string]string{"tenant": "t1"})
	f.seed(
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k1", failedAt: t0.Add(time.Minute)},
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k2", failedAt: t0},
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k3", failedAt: t0.Add(2 * time.Minute)},
		failed{code: "INVALID_ENVELOPE", body: "not json {"},
		failed{code: "IDEMPOTENCY_HASH_MISMATCH", typ: typeLedger, key: "k5"},
	)
	q := f.queue(dlq.Config{})
	for round := 1; round <= 2; round++ {
		st, err := q.Stats(context.Background())
		require.NoError(t, err)
		require.Equal(t, 6, st.Scanned)
		require.True(t, st.Complete)
		require.False(t, st.FIFO)
		require.Equal(t, map[string]int{"CASE_NOT_FOUND": 3, "INVALID_ENVELOPE": 1, "IDEMPOTENCY_HASH_MISMATCH": 1, dlq.CodeNone: 1}, st.ByCode)
		require.Equal(t, map[string]int{typeDeadline: 3, dlq.TypeUnreadable: 1, typeLedger: 1, typeNote: 1}, st.ByType)
		require.Len(t, st.ByCodeType, 4)
		require.Equal(t, dlq.Count{Code: "CASE_NOT_FOUND", Type: typeDeadline, Count: 3}, st.ByCodeType[0], "most frequent first")
		require.Contains(t, st.ByCodeType, dlq.Count{Code: dlq.CodeNone, Type: typeNote, Count: 1})
		require.Equal(t, t0, st.OldestFailedAt)
		require.False(t, st.OldestSentAt.IsZero())
		require.Zero(t, st.ApproximateNotVisible, "nothing hidden before the scan, round %d", round)
		f.requireAllVisible(6)
	}
}

func TestDLQPeekLosesNothing(t *testing.T) {
	f := newFixture(t, false)
	var seeds []failed
	for i := range 12 {
		seeds = append(seeds, failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k" + strconv.Itoa(i), producer: map[string]string{"tenant": "t" + strconv.Itoa(i)}})
	}
	ids := f.seed(seeds...)
	// The library's default of two empty receives in a row, not the
	// fixture's one: a peek right after another's release saw one short
	// receive and then an empty one from fauxqs while ten messages were
	// visible (1 run in 15), and stopped after 2 of 12.
	q := f.queue(dlq.Config{EmptyReceives: dlq.DefaultEmptyReceives})

	all, err := q.Peek(context.Background(), 0)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, idsOf(all))
	f.requireAllVisible(12)
	byKey := map[string]dlq.Message{}
	for _, m := range all {
		byKey[m.IdempotencyKey] = m
	}
	m := byKey["k7"]
	require.Equal(t, "CASE_NOT_FOUND", m.FailureCode)
	require.Equal(t, "because CASE_NOT_FOUND", m.FailureMessage)
	require.Equal(t, "src-k7", m.SourceMessageID)
	require.Equal(t, typeDeadline, m.MessageType)
	require.True(t, m.FromWorker())
	require.Equal(t, 1, m.ReceiveCount)
	require.Equal(t, envelopeBody(typeDeadline, "k7"), m.Body)
	require.Equal(t, map[string]types.MessageAttributeValue{"tenant": str("t7")}, stringAttrs(m.ProducerAttributes()))

	some, err := q.Peek(context.Background(), 5)
	require.NoError(t, err)
	require.Len(t, some, 5)
	f.requireAllVisible(12)

	again, err := q.Peek(context.Background(), 0)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, idsOf(again), "a second peek sees the same messages")
	for _, m := range again {
		require.GreaterOrEqual(t, m.ReceiveCount, 2, "every peek is a receive")
	}
}

// A scan that ends with its context still releases what it received.
func TestDLQPeekReleasesOnCancel(t *testing.T) {
	f := newFixture(t, false)
	var seeds []failed
	for i := range 15 {
		seeds = append(seeds, failed{code: "X", typ: typeNote, key: "k" + strconv.Itoa(i)})
	}
	f.seed(seeds...)
	q := f.queue(dlq.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	seen := 0
	err := q.Scan(ctx, 0, func(dlq.Message) bool {
		seen++
		if seen == 3 {
			cancel()
		}
		return true
	})
	require.ErrorIs(t, err, context.Canceled)
	require.GreaterOrEqual(t, seen, 3)
	f.requireAllVisible(15)
}

func idsOf(msgs []dlq.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// stringAttrs keeps DataType and StringValue only (the SDK fills in more).
func stringAttrs(in map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(in))
	for k, v := range in {
		out[k] = types.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
	}
	return out
}

// A replay older than the inbox keeps COMPLETED records could apply the work
// twice: Redrive leaves it in the DLQ.
func TestRedriveRefusesTooOld(t *testing.T) {
	f := newFixture(t, false)
	old := strconv.FormatInt(time.Now().Add(-40*24*time.Hour).UnixMilli(), 10)
	f.seed(failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k-old", producer: map[string]string{dlq.AttrFirstSentAt: old}},
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k-new"})
	q := f.queue(dlq.Config{QueueURL: f.queues.URL})
	rep, err := q.Redrive(context.Background(), dlq.RedriveOptions{All: true, Rate: 1000})
	require.NoError(t, err)
	require.Equal(t, 1, rep.TooOld)
	require.Len(t, rep.Moved, 1)
	require.Equal(t, "k-new", rep.Moved[0].Key)
	f.requireAllVisible(1)

	rep, err = q.Redrive(context.Background(), dlq.RedriveOptions{All: true, Rate: 1000, MaxAge: 50 * 24 * time.Hour})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1, "a longer MaxAge (longer COMPLETED TTL) lets it go")
	got := f.drain(f.queues.URL, 2)
	for _, m := range got {
		if strings.Contains(aws.ToString(m.Body), "k-old") {
			require.Equal(t, old, aws.ToString(m.MessageAttributes[dlq.AttrFirstSentAt].StringValue), "its age travels with it")
		}
	}
}

func TestRedrive(t *testing.T) {
	seeds := []failed{
		{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k1", producer: map[string]string{"tenant": "a"}},
		{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k2", producer: map[string]string{"tenant": "b"}},
		{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k3"},
		{code: "IDEMPOTENCY_HASH_MISMATCH", typ: typeLedger, key: "k4"},
		{code: "IDEMPOTENCY_HASH_MISMATCH", typ: typeLedger, key: "k5"},
		{typ: typeNote, key: "k6", producer: map[string]string{"tenant": "c"}}, // redrive policy: no ddbworker attributes
	}
	for _, tc := range []struct {
		name      string
		opts      dlq.RedriveOptions
		arrive    bool     // a new failure reaches the DLQ while the redrive runs
		wantKeys  []string // the keys moved; with wantN, the keys that may move
		wantN     int      // how many move, when not all of wantKeys
		wantSkip  int      // -1: depends on what one receive brings
		wantLimit bool
	}{
		{name: "filter code", opts: dlq.RedriveOptions{Filter: dlq.Filter{Code: "CASE_NOT_FOUND"}}, wantKeys: []string{"k1", "k2", "k3"}, wantSkip: 3},
		{name: "filter type", opts: dlq.RedriveOptions{Filter: dlq.Filter{Type: typeLedger}}, wantKeys: []string{"k4", "k5"}, wantSkip: 4},
		{name: "filter code and type", opts: dlq.RedriveOptions{Filter: dlq.Filter{Code: "CASE_NOT_FOUND", Type: typeLedger}}, wantSkip: 6},
		{name: "redrive policy ones", opts: dlq.RedriveOptions{Filter: dlq.Filter{Code: dlq.CodeNone}}, wantKeys: []string{"k6"}, wantSkip: 5},
		{name: "max bounds", opts: dlq.RedriveOptions{Max: 2}, wantKeys: []string{"k1", "k2", "k3", "k4", "k5", "k6"}, wantN: 2, wantLimit: true},
		{name: "max bounds a filter", opts: dlq.RedriveOptions{Max: 1, Filter: dlq.Filter{Type: typeLedger}}, wantKeys: []string{"k4", "k5"}, wantN: 1, wantSkip: -1, wantLimit: true},
		// Exactly Max matching messages: the scan goes on to the end, and
		// the limit did not stop anything.
		{name: "max equals the matches", opts: dlq.RedriveOptions{Max: 1, Filter: dlq.Filter{Code: dlq.CodeNone}}, wantKeys: []string{"k6"}, wantSkip: 5},
		{name: "max equals the matches, no filter", opts: dlq.RedriveOptions{Max: 6}, wantKeys: []string{"k1", "k2", "k3", "k4", "k5", "k6"}},
		{name: "dry run moves nothing", opts: dlq.RedriveOptions{DryRun: true, Filter: dlq.Filter{Code: "CASE_NOT_FOUND"}}, wantKeys: []string{"k1", "k2", "k3"}, wantSkip: 3},
		{name: "all", opts: dlq.RedriveOptions{All: true}, wantKeys: []string{"k1", "k2", "k3", "k4", "k5", "k6"}},
		{name: "arrivals stay", opts: dlq.RedriveOptions{All: true}, arrive: true, wantKeys: []string{"k1", "k2", "k3", "k4", "k5", "k6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			ids := f.seed(seeds...)
			idOf := map[string]string{}
			for i, s := range seeds {
				idOf[s.key] = ids[i]
			}
			q := f.queue(dlq.Config{QueueURL: f.queues.URL})
			opts := tc.opts
			if opts.Rate == 0 {
				opts.Rate = 1000
			}
			var mu sync.Mutex
			var progress []dlq.RedriveProgress
			var once sync.Once
			opts.Progress = func(p dlq.RedriveProgress) {
				mu.Lock()
				progress = append(progress, p)
				mu.Unlock()
				if tc.arrive {
					once.Do(func() { f.seed(failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k-late"}) })
				}
			}
			rep, err := q.Redrive(context.Background(), opts)
			require.NoError(t, err)
			require.Empty(t, rep.Failed)
			require.Equal(t, tc.opts.DryRun, rep.DryRun)
			if tc.wantSkip >= 0 {
				require.Equal(t, tc.wantSkip, rep.Skipped, "report: %+v", rep)
			}
			require.Equal(t, tc.wantLimit, rep.LimitReached)
			require.Equal(t, rep.Scanned, rep.Skipped+rep.Arrived+rep.TooOld+rep.OverMax+len(rep.Moved)+len(rep.Failed),
				"every message scanned is accounted for: %+v", rep)
			require.Equal(t, rep.Scanned-rep.Skipped, rep.Matched)
			if tc.wantLimit {
				require.Positive(t, rep.OverMax, "a matching message beyond the limit was seen")
				require.False(t, rep.Complete)
			} else {
				require.Zero(t, rep.OverMax)
				require.True(t, rep.Complete, "no limit stopped it: the whole DLQ was scanned")
			}
			require.NotEmpty(t, progress)
			var keys []string
			for _, m := range rep.Moved {
				keys = append(keys, m.Key)
				require.Equal(t, idOf[m.Key], m.ID)
				require.Equal(t, tc.opts.DryRun, m.NewID == "", "a new id only when moved")
			}
			n := tc.wantN
			if n == 0 {
				n = len(tc.wantKeys)
				require.ElementsMatch(t, tc.wantKeys, keys)
			} else {
				require.Len(t, keys, n)
				require.Subset(t, tc.wantKeys, keys)
			}
			left := len(seeds) - n
			if tc.arrive {
				require.Equal(t, 1, rep.Arrived, "the late failure is not moved")
				left++
			}
			if tc.opts.DryRun {
				left = len(seeds)
				require.Zero(t, testenv.InspectQueue(t, f.queues.URL).Total(), "a dry run sends nothing")
			}
			f.requireAllVisible(left)
			if tc.opts.DryRun {
				return
			}

			got := f.drain(f.queues.URL, n)
			newIDs := map[string]string{}
			for _, m := range rep.Moved {
				newIDs[m.NewID] = m.Key
			}
			for _, m := range got {
				key := newIDs[aws.ToString(m.MessageId)]
				require.NotEmpty(t, key, "a message the report names")
				want := map[string]types.MessageAttributeValue{dlq.AttrRedrivenFrom: str(idOf[key])}
				for _, s := range seeds {
					if s.key == key {
						require.Equal(t, envelopeBody(s.typ, s.key), aws.ToString(m.Body), "the original body")
						for k, v := range s.producer {
							want[k] = str(v)
						}
					}
				}
				got := stringAttrs(m.MessageAttributes)
				first, err := strconv.ParseInt(aws.ToString(got[dlq.AttrFirstSentAt].StringValue), 10, 64)
				require.NoError(t, err, "the copy carries when its work was first sent")
				require.WithinDuration(t, time.Now(), time.UnixMilli(first), time.Minute, "the DLQ message's own send time")
				delete(got, dlq.AttrFirstSentAt)
				require.Equal(t, want, got, "ddbworker.* stripped, the producer's kept")
			}
		})
	}
}

// FIFO: the group travels with the message, a group's order holds, and a
// group's second message (invisible while its head is held) moves once the
// head left the DLQ.
func TestRedriveFIFO(t *testing.T) {
	f := newFixture(t, true)
	f.seed(
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "g1-a", group: "g1"},
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "g1-b", group: "g1"},
		failed{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "g2-a", group: "g2"},
	)
	q := f.queue(dlq.Config{QueueURL: f.queues.URL})

	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.True(t, st.FIFO)
	require.Equal(t, 2, st.Scanned, "a scan sees the head of each group only")
	f.requireAllVisible(3)

	rep, err := q.Redrive(context.Background(), dlq.RedriveOptions{Rate: 1000})
	require.NoError(t, err)
	require.Empty(t, rep.Failed)
	require.Len(t, rep.Moved, 3)
	f.requireAllVisible(0)

	var order []string
	for _, m := range f.drain(f.queues.URL, 3) {
		key := map[string]string{envelopeBody(typeDeadline, "g1-a"): "g1-a", envelopeBody(typeDeadline, "g1-b"): "g1-b", envelopeBody(typeDeadline, "g2-a"): "g2-a"}[aws.ToString(m.Body)]
		require.Equal(t, key[:2], m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], "the group travels")
		if key[:2] == "g1" {
			order = append(order, key)
		}
	}
	require.Equal(t, []string{"g1-a", "g1-b"}, order, "group order kept")
}

func TestDLQNewValidates(t *testing.T) {
	_, err := dlq.New(nil, dlq.Config{Hide: 1500 * time.Millisecond, WaitTime: 21 * time.Second, MaxScan: -1})
	for _, want := range []string{"dlq: API is required", "dlq: Config.DLQURL is required", "Config.Hide", "Config.WaitTime", "Config.MaxScan"} {
		require.ErrorContains(t, err, want)
	}
	q, err := dlq.New(sqs.New(sqs.Options{}), dlq.Config{DLQURL: "u"})
	require.NoError(t, err)
	cfg := q.Config()
	require.Equal(t, []any{dlq.DefaultHide, dlq.DefaultWaitTime, dlq.DefaultEmptyReceives, dlq.DefaultMaxScan, dlq.DefaultReleaseTimeout},
		[]any{cfg.Hide, cfg.WaitTime, cfg.EmptyReceives, cfg.MaxScan, cfg.ReleaseTimeout}, "New applies the defaults")
	_, err = q.Redrive(context.Background(), dlq.RedriveOptions{})
	require.ErrorIs(t, err, dlq.ErrNoQueueURL)
}
