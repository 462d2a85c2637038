package producer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
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

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/producer"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rejecter is SDK middleware that makes SQS refuse chosen batch entries,
// as AWS may and the emulator never does: the entry is removed from the
// request before it is sent and reported in Failed. It also records the
// entries of every call.
type rejecter struct {
	mu      sync.Mutex
	calls   [][]string                                              // message ids per call
	reject  func(e *envelope.Envelope) *types.BatchResultErrorEntry // nil: send it
	decoder *envelope.Decoder
}

func (r *rejecter) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("test.reject", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			params, ok := in.Parameters.(*sqs.SendMessageBatchInput)
			if !ok {
				return next.HandleInitialize(ctx, in)
			}
			var keep []types.SendMessageBatchRequestEntry
			var failed []types.BatchResultErrorEntry
			var ids []string
			for _, e := range params.Entries {
				env, err := r.decoder.Decode([]byte(aws.ToString(e.MessageBody)))
				if err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
				ids = append(ids, env.IdempotencyKey)
				if r.reject != nil {
					if f := r.reject(env); f != nil {
						f.Id = e.Id
						failed = append(failed, *f)
						continue
					}
				}
				keep = append(keep, e)
			}
			r.mu.Lock()
			r.calls = append(r.calls, ids)
			r.mu.Unlock()
			var out *sqs.SendMessageBatchOutput
			if len(keep) > 0 {
				cp := *params
				cp.Entries = keep
				in.Parameters = &cp
				res, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					return res, md, err
				}
				out = res.Result.(*sqs.SendMessageBatchOutput)
			} else {
				out = &sqs.SendMessageBatchOutput{}
			}
			out.Failed = append(out.Failed, failed...)
			return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, nil
		}), middleware.Before)
	})
}

func (r *rejecter) Calls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

type fixture struct {
	env *testenv.Env
	rej *rejecter
	sqs *sqs.Client
	dec *envelope.Decoder
}

func newFixture(t *testing.T, fifo bool) *fixture {
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{FIFO: fifo, VisibilityTimeout: 30 * time.Second}})
	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	rej := &rejecter{decoder: dec}
	return &fixture{env: env, rej: rej, sqs: sqs.NewFromConfig(env.AWS, rej.install), dec: dec}
}

func (f *fixture) producer(t *testing.T, cfg producer.Config) *producer.Producer {
	cfg.QueueURL = f.env.Queues.URL
	if cfg.Producer == "" {
		cfg.Producer = "orders-service"
	}
	p, err := producer.New(f.sqs, cfg)
	require.NoError(t, err)
	return p
}

// receiveAll receives until n messages arrived (deleting them) and returns
// them in arrival order. Each receive hides its messages for a few seconds
// only, so a receive whose response was lost (the emulator is shared by
// every package of the suite, and slow under load) does not hide them past
// the deadline; a message received twice counts once.
func (f *fixture) receiveAll(t *testing.T, n int) []types.Message {
	t.Helper()
	var got []types.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(45 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := f.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(f.env.Queues.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		require.NoError(t, err)
		for _, m := range out.Messages {
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				got = append(got, m)
			}
			_, err := f.env.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(f.env.Queues.URL), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	require.Len(t, got, n)
	return got
}

func order(id string, n int) producer.Message {
	return producer.Message{
		MessageType: "invoice.requested", IdempotencyKey: "order-" + id + ":invoice:" + strconv.Itoa(n),
		AggregateType: "order", AggregateID: id,
		Payload: map[string]any{"orderId": id, "n": n, "amountCents": 1999},
	}
}

// Sent messages are what the worker's decoder accepts, with the request
// hash the producer reported, a fresh messageId each, occurredAt with an
// offset; 25 messages take 3 calls.
func TestSendStandardQueue(t *testing.T) {
	f := newFixture(t, false)
	p := f.producer(t, producer.Config{})
	var msgs []producer.Message
	for i := range 25 {
		msgs = append(msgs, order("42", i))
	}
	msgs[3].Attributes = map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}}
	results, err := p.Send(context.Background(), msgs...)
	require.NoError(t, err)
	require.Len(t, results, 25)
	require.Len(t, f.rej.Calls(), 3)
	require.Equal(t, []int{10, 10, 5}, []int{len(f.rej.Calls()[0]), len(f.rej.Calls()[1]), len(f.rej.Calls()[2])})

	byKey := map[string]producer.Result{}
	for i, r := range results {
		require.NoError(t, r.Err)
		require.NotEmpty(t, r.SQSMessageID)
		require.Equal(t, msgs[i].IdempotencyKey, r.Envelope.IdempotencyKey)
		byKey[r.Envelope.IdempotencyKey] = r
	}
	ids := map[string]bool{}
	for _, m := range f.receiveAll(t, 25) {
		body := aws.ToString(m.Body)
		e, err := f.dec.Decode([]byte(body))
		require.NoError(t, err, body)
		r := byKey[e.IdempotencyKey]
		require.Equal(t, r.Envelope.RequestHash, e.RequestHash)
		require.Equal(t, r.SQSMessageID, aws.ToString(m.MessageId))
		require.Equal(t, "orders-service", e.Producer)
		require.Regexp(t, `"occurredAt":"[0-9T:.-]+(Z|[+-][0-9]{2}:[0-9]{2})"`, body)
		require.False(t, ids[e.MessageID], "messageId reused")
		ids[e.MessageID] = true
		if e.IdempotencyKey == msgs[3].IdempotencyKey {
			require.Equal(t, "acme", aws.ToString(m.MessageAttributes["tenant"].StringValue))
		}
	}

	// The same work sent again: a new messageId, the same request hash.
	again, err := p.Send(context.Background(), msgs[0])
	require.NoError(t, err)
	require.NotEqual(t, results[0].Envelope.MessageID, again[0].Envelope.MessageID)
	require.Equal(t, results[0].Envelope.RequestHash, again[0].Envelope.RequestHash)
}

func TestSendBatchBytes(t *testing.T) {
	f := newFixture(t, false)
	p := f.producer(t, producer.Config{MaxMessageBytes: 1 << 20, MaxBatchBytes: 256 << 10})
	big := strings.Repeat("x", 100<<10)
	var msgs []producer.Message
	for i := range 5 {
		m := order("7", i)
		m.Payload = map[string]any{"blob": big}
		msgs = append(msgs, m)
	}
	_, err := p.Send(context.Background(), msgs...)
	require.NoError(t, err)
	var sizes []int
	for _, c := range f.rej.Calls() {
		sizes = append(sizes, len(c))
	}
	require.Equal(t, []int{2, 2, 1}, sizes, "at most 256 KiB per call")
	f.receiveAll(t, 5)
}

// Regression: a message larger than MaxBatchBytes but within
// MaxMessageBytes was never admitted to a call, and Send reported it
// neither sent nor failed (no error, no SQS message id): dropped silently.
// It goes alone, in a call of its own. Without MaxBatchBytes, a queue that
// takes 1 MiB messages gets calls of up to 1 MiB (it defaulted to 256 KiB,
// below the messages New accepted).
func TestSendEntryOverBatchBytesGoesAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   producer.Config
		calls [][]int // message indexes per call
	}{
		{"MaxBatchBytes below MaxMessageBytes", producer.Config{MaxMessageBytes: 1 << 20, MaxBatchBytes: 256 << 10}, [][]int{{0, 2, 4}, {1}, {3}}},
		{"MaxBatchBytes defaults to MaxMessageBytes", producer.Config{MaxMessageBytes: 1 << 20}, [][]int{{0, 1, 2, 4}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			p := f.producer(t, tc.cfg)
			var msgs []producer.Message
			for i := range 5 {
				msgs = append(msgs, order("9", i))
			}
			msgs[1].Payload = map[string]any{"blob": strings.Repeat("a", 400<<10)}
			msgs[3].Payload = map[string]any{"blob": strings.Repeat("b", 700<<10)}
			results, err := p.Send(context.Background(), msgs...)
			require.NoError(t, err)
			byID := map[string]int{}
			for i, r := range results {
				require.NoError(t, r.Err, "message %d", i)
				require.NotEmpty(t, r.SQSMessageID, "message %d: neither sent nor failed", i)
				byID[r.SQSMessageID] = i
			}
			var calls [][]int
			for _, c := range f.rej.Calls() {
				var idx []int
				for _, key := range c {
					idx = append(idx, slices.IndexFunc(msgs, func(m producer.Message) bool { return m.IdempotencyKey == key }))
				}
				calls = append(calls, idx)
			}
			require.Equal(t, tc.calls, calls)
			got := map[int]bool{}
			for _, m := range f.receiveAll(t, 5) {
				i, ok := byID[aws.ToString(m.MessageId)]
				require.True(t, ok)
				e, err := f.dec.Decode([]byte(aws.ToString(m.Body)))
				require.NoError(t, err)
				require.Equal(t, msgs[i].IdempotencyKey, e.IdempotencyKey)
				got[i] = true
			}
			require.Len(t, got, 5)
		})
	}
}

// One bad message fails alone, with the decoder's code and field; the
// others are sent.
func TestSendRejectsPerMessage(t *testing.T) {
	f := newFixture(t, false)
	p := f.producer(t, producer.Config{})
	bad := order("1", 1)
	bad.MessageType = "invoice requested"
	noKey := order("1", 2)
	noKey.IdempotencyKey = ""
	huge := order("1", 3)
	huge.Payload = map[string]any{"blob": strings.Repeat("y", 250<<10)}
	reserved := order("1", 4)
	reserved.Attributes = map[string]types.MessageAttributeValue{"ddbworker.failureCode": {DataType: aws.String("String"), StringValue: aws.String("X")}}
	results, err := p.Send(context.Background(), order("1", 0), bad, noKey, huge, reserved, order("1", 5))
	require.Error(t, err)

	for _, tc := range []struct {
		index int
		kind  error
		code  envelope.Code
		field string
	}{
		{1, producer.ErrInvalid, envelope.CodeInvalidField, "messageType"},
		{2, producer.ErrInvalid, envelope.CodeMissingField, "idempotencyKey"},
		{3, producer.ErrTooLarge, "", ""},
		{4, producer.ErrInvalid, "", ""},
	} {
		var ee *producer.EntryError
		require.ErrorAs(t, results[tc.index].Err, &ee, "message %d", tc.index)
		require.Equal(t, tc.index, ee.Index)
		require.ErrorIs(t, ee, tc.kind)
		if tc.code != "" {
			var envErr *envelope.Error
			require.ErrorAs(t, ee, &envErr)
			require.Equal(t, tc.code, envErr.Code)
			require.Equal(t, tc.field, envErr.Field)
		}
		require.Empty(t, results[tc.index].SQSMessageID)
		if tc.kind == producer.ErrTooLarge {
			require.ErrorContains(t, ee, "MaxMessageBytes", "the error names the limit")
		}
	}
	require.NoError(t, results[0].Err)
	require.NoError(t, results[5].Err)
	got := f.receiveAll(t, 2)
	require.Len(t, got, 2)
}

// Entries SQS fails on its side are offered again; those that are the
// sender's fault, or keep failing, come back per message with SQS's code.
func TestSendPartialBatchFailures(t *testing.T) {
	f := newFixture(t, false)
	var mu sync.Mutex
	seen := map[string]int{}
	f.rej.reject = func(e *envelope.Envelope) *types.BatchResultErrorEntry {
		mu.Lock()
		defer mu.Unlock()
		seen[e.IdempotencyKey]++
		switch {
		case strings.HasSuffix(e.IdempotencyKey, ":1") && seen[e.IdempotencyKey] == 1: // transient
			return &types.BatchResultErrorEntry{Code: aws.String("InternalError"), SenderFault: false, Message: aws.String("try again")}
		case strings.HasSuffix(e.IdempotencyKey, ":2"): // the sender's fault
			return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true, Message: aws.String("bad attribute")}
		case strings.HasSuffix(e.IdempotencyKey, ":3"): // never heals
			return &types.BatchResultErrorEntry{Code: aws.String("ServiceUnavailable"), SenderFault: false}
		}
		return nil
	}
	p := f.producer(t, producer.Config{MaxAttempts: 3, RetryDelay: 10 * time.Millisecond})
	results, err := p.Send(context.Background(), order("9", 0), order("9", 1), order("9", 2), order("9", 3), order("9", 4))
	require.Error(t, err)
	require.NoError(t, results[0].Err)
	require.NoError(t, results[1].Err, "a transient entry failure is retried")
	require.NoError(t, results[4].Err)

	var sender *producer.EntryError
	require.ErrorAs(t, results[2].Err, &sender)
	require.ErrorIs(t, sender, producer.ErrSend)
	require.Equal(t, "InvalidParameterValue", sender.Code)
	require.True(t, sender.SenderFault)
	require.Equal(t, 1, sender.Attempts, "the sender's fault is not retried")

	var stuck *producer.EntryError
	require.ErrorAs(t, results[3].Err, &stuck)
	require.Equal(t, "ServiceUnavailable", stuck.Code)
	require.Equal(t, 3, stuck.Attempts)
	mu.Lock()
	require.Equal(t, 3, seen["order-9:invoice:3"])
	require.Equal(t, 2, seen["order-9:invoice:1"])
	mu.Unlock()
	f.receiveAll(t, 3)
}

// On a FIFO queue: MessageGroupId is the aggregate id, each group arrives
// in order, a re-send of the same work within the deduplication window is
// dropped by SQS, and a group whose message failed holds its later
// messages back while other groups go on.
func TestSendFIFO(t *testing.T) {
	f := newFixture(t, true)
	p := f.producer(t, producer.Config{RetryDelay: 10 * time.Millisecond})
	var msgs []producer.Message
	for n := range 4 {
		for _, id := range []string{"a", "b", "c"} {
			msgs = append(msgs, order(id, n))
		}
	}
	f.rej.reject = func(e *envelope.Envelope) *types.BatchResultErrorEntry {
		if e.IdempotencyKey == "order-b:invoice:0" { // transient: b's first message goes on the second try
			if f.rej.seenOnce(e.IdempotencyKey) {
				return nil
			}
			return &types.BatchResultErrorEntry{Code: aws.String("InternalError")}
		}
		return nil
	}
	results, err := p.Send(context.Background(), msgs...)
	require.NoError(t, err)
	for _, c := range f.rej.Calls() {
		groups := map[string]bool{}
		for _, key := range c {
			g := strings.Split(strings.TrimPrefix(key, "order-"), ":")[0]
			require.False(t, groups[g], "two messages of group %s in one call: %v", g, c)
			groups[g] = true
		}
	}
	offered := 0
	for _, c := range f.rej.Calls() {
		offered += strings.Count(strings.Join(c, ","), "order-b:invoice:0")
	}
	require.Equal(t, 2, offered, "b's first message failed once and was offered again")
	got := f.receiveAll(t, 12)
	perGroup := map[string][]int{}
	for _, m := range got {
		e, err := f.dec.Decode([]byte(aws.ToString(m.Body)))
		require.NoError(t, err)
		require.Equal(t, e.AggregateID, m.Attributes["MessageGroupId"])
		sum := sha256.Sum256([]byte(e.IdempotencyKey + "\x00" + e.RequestHash))
		require.Equal(t, hex.EncodeToString(sum[:]), m.Attributes["MessageDeduplicationId"])
		var pl struct{ N int }
		require.NoError(t, json.Unmarshal(e.Payload, &pl))
		perGroup[e.AggregateID] = append(perGroup[e.AggregateID], pl.N)
	}
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, []int{0, 1, 2, 3}, perGroup[id], "group %s order", id)
	}
	require.NotEmpty(t, results[0].SequenceNumber)

	// The same work again (new messageIds) within the window: deduplicated.
	f.rej.reject = nil
	again, err := p.Send(context.Background(), msgs[0], msgs[1])
	require.NoError(t, err)
	require.NotEqual(t, results[0].Envelope.MessageID, again[0].Envelope.MessageID)
	out, err := f.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.env.Queues.URL), WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, out.Messages, "SQS dropped the duplicates")

	// A message that fails for good blocks the rest of its group only.
	f.rej.reject = func(e *envelope.Envelope) *types.BatchResultErrorEntry {
		if e.IdempotencyKey == "order-b:invoice:11" {
			return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true}
		}
		return nil
	}
	results, err = p.Send(context.Background(), order("a", 10), order("b", 10), order("b", 11), order("c", 10), order("b", 12), order("a", 11))
	require.Error(t, err)
	for i, want := range []error{nil, nil, producer.ErrSend, nil, producer.ErrGroupBlocked, nil} {
		if want == nil {
			require.NoError(t, results[i].Err, "message %d", i)
			continue
		}
		require.ErrorIs(t, results[i].Err, want, "message %d", i)
	}
	require.Len(t, f.receiveAll(t, 4), 4)

	// So does a message that is invalid: b's earlier message goes, its
	// later one waits for the fix.
	f.rej.reject = nil
	bad := order("b", 21)
	bad.MessageType = "not a type"
	results, err = p.Send(context.Background(), order("b", 20), bad, order("a", 20), order("b", 22))
	require.Error(t, err)
	require.NoError(t, results[0].Err)
	require.ErrorIs(t, results[1].Err, producer.ErrInvalid)
	require.NoError(t, results[2].Err)
	require.ErrorIs(t, results[3].Err, producer.ErrGroupBlocked)
	require.Len(t, f.receiveAll(t, 2), 2)
}

type memOffloader struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (m *memOffloader) Offload(_ context.Context, messageType string, payload []byte) (envelope.PayloadRef, error) {
	if messageType == "fail.offload" {
		return envelope.PayloadRef{}, errors.New("bucket unavailable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := sha256.Sum256(payload)
	key := messageType + "/" + hex.EncodeToString(sum[:8])
	m.objects[key] = slices.Clone(payload)
	return envelope.PayloadRef{Bucket: "acme-payloads", Key: key, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(payload))}, nil
}

// Payloads above OffloadAbove travel as a payloadRef whose checksum and
// size are the payload's; the worker resolves them to the same bytes.
func TestSendOffloads(t *testing.T) {
	f := newFixture(t, false)
	off := &memOffloader{objects: map[string][]byte{}}
	p := f.producer(t, producer.Config{Offloader: off, OffloadAbove: 1024})
	small := order("5", 0)
	large := order("5", 1)
	large.Payload = map[string]any{"blob": strings.Repeat("z", 4096)}
	failing := order("5", 2)
	failing.MessageType = "fail.offload"
	failing.Payload = large.Payload
	results, err := p.Send(context.Background(), small, large, failing)
	require.Error(t, err)
	require.NoError(t, results[0].Err)
	require.False(t, results[0].Offloaded)
	require.NoError(t, results[1].Err)
	require.True(t, results[1].Offloaded)
	require.ErrorIs(t, results[2].Err, producer.ErrOffload)

	for _, m := range f.receiveAll(t, 2) {
		e, err := f.dec.Decode([]byte(aws.ToString(m.Body)))
		require.NoError(t, err)
		if e.IdempotencyKey != large.IdempotencyKey {
			require.Nil(t, e.PayloadRef)
			continue
		}
		require.NotNil(t, e.PayloadRef)
		require.Nil(t, e.Payload)
		require.Equal(t, results[1].Envelope.RequestHash, e.RequestHash)
		require.NoError(t, e.ResolvePayload(off.objects[e.PayloadRef.Key]))
		want, err := json.Marshal(large.Payload)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(e.Payload))
	}
}

func TestNewConfig(t *testing.T) {
	_, err := producer.New(nil, producer.Config{MaxMessageBytes: 2 << 20, MaxAttempts: -1, DLQHeadroom: -5})
	require.Error(t, err)
	for _, want := range []string{"API", "QueueURL", "Producer", "MaxMessageBytes", "MaxAttempts", "DLQHeadroom"} {
		require.ErrorContains(t, err, want)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok)
	require.Len(t, joined.Unwrap(), 6)
}

func TestEnvelopeBuildsWithoutSending(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	p, err := producer.New(&sqs.Client{}, producer.Config{QueueURL: "https://sqs.example/q", Producer: "svc", Now: func() time.Time { return now }})
	require.NoError(t, err)
	e, err := p.Envelope(order("1", 0))
	require.NoError(t, err)
	require.True(t, e.OccurredAt.Equal(now))
	require.Regexp(t, `^v3:[0-9a-f]{64}$`, e.RequestHash)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, e.MessageID)
	m := order("1", 0)
	m.AggregateType = ""
	_, err = p.Envelope(m)
	var ee *envelope.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "aggregateType", ee.Field)
}

func (r *rejecter) seenOnce(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		for _, k := range c {
			if k == key {
				n++
			}
		}
	}
	return n >= 1 // the current call is recorded after reject runs
}
