package worker_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/producer"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/worker"
)

// payloadHarness is a harness with an S3 bucket on fauxqs, its fault and
// version middleware, and an offloader.
type payloadHarness struct {
	*harness
	faults *testenv.S3Faults
	s3     *s3.Client
	bucket string
	off    *s3payload.Offloader
}

func newPayloadHarness(t *testing.T, versioned bool) *payloadHarness {
	t.Helper()
	h := newHarness(t, testenv.Options{})
	faults := testenv.NewS3Faults()
	if versioned {
		faults.EnableVersioning()
	}
	c := testenv.S3(t, faults.Options)
	bucket := testenv.NewBucket(t, c)
	off, err := s3payload.NewOffloader(s3payload.OffloaderDeps{S3: c}, s3payload.OffloaderConfig{Bucket: bucket})
	require.NoError(t, err)
	return &payloadHarness{harness: h, faults: faults, s3: c, bucket: bucket, off: off}
}

// byRef returns env with its payload offloaded to S3, and the request hash
// the worker computes for it.
func (p *payloadHarness) byRef(env *envelope.Envelope) (*envelope.Envelope, string) {
	p.t.Helper()
	ref, err := p.off.Offload(context.Background(), env.MessageType, env.Payload)
	require.NoError(p.t, err)
	cp := *env
	cp.Payload, cp.PayloadRef = nil, &ref
	return &cp, hashOf(p.t, &cp)
}

// hashOf is the request hash the worker computes for env.
func hashOf(t *testing.T, env *envelope.Envelope) string {
	t.Helper()
	b, err := envelope.Encode(env)
	require.NoError(t, err)
	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	got, err := dec.Decode(b)
	require.NoError(t, err)
	return got.RequestHash
}

// sendExtended sends body the way the SQS Extended Client libraries do:
// the body in S3 under key, a pointer in the message, its size in the size
// attribute (name).
func (p *payloadHarness) sendExtended(body []byte, key, attr string) {
	p.t.Helper()
	_, err := p.s3.PutObject(context.Background(), testenv.S3ObjectInput(p.bucket, key, body))
	require.NoError(p.t, err)
	ptr := s3payload.Pointer{Bucket: p.bucket, Key: key, Size: int64(len(body)), SizeAttribute: attr}
	_, err = p.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(p.env.Queues.URL),
		MessageBody: aws.String(ptr.Body()), MessageAttributes: ptr.Attributes()})
	require.NoError(p.t, err)
}

func (p *payloadHarness) deps(opts ...ddbworker.RouteOption) worker.Deps {
	return worker.Deps{S3: p.s3, Handlers: p.caseHandlers(opts...)}
}

// A payload by reference is fetched under the lease and applied once; the
// record's hash is the reference's; a duplicate costs no S3 read. S3
// throttling on the first delivery is retried without a business attempt,
// and the re-fetch leaves the hash unchanged. Gated and fused routes alike
// (a reference always takes the gate first).
func TestPayloadRefAppliedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ddbworker.RouteOption
	}{{"gated", nil}, {"fused route", []ddbworker.RouteOption{ddbworker.Fused()}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPayloadHarness(t, true)
			p.seedCases("c1")
			env, hash := p.byRef(mustEnv(t)(caseflow.NewDeadlineRequest("k-ref", "c1", "review", effective)))
			require.NotEmpty(t, env.PayloadRef.VersionID, "the versioned bucket's version is pinned")
			// Every attempt of the first fetch is throttled.
			p.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusServiceUnavailable, Code: "SlowDown", Times: 3})
			cfg := p.testConfig()
			cfg.Payload.CallTimeout = 5 * time.Second // room for the SDK's three attempts
			p.start(cfg, p.deps(tc.opts...))
			p.send(env)

			ev := p.waitEvents(1, 30*time.Second, final)[0]
			require.Equal(t, worker.OutcomeApplied, ev.Outcome)
			require.Equal(t, 1, ev.Attempt, "the throttled fetch counted no business attempt")
			retries := p.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
			require.Len(t, retries, 1)
			require.Equal(t, failure.CodeThrottled, retries[0].Code)
			require.True(t, retries[0].Infrastructure)

			rec := p.record("k-ref", caseflow.TypeDeadline)
			require.Equal(t, inbox.StatusCompleted, rec.Status)
			require.Equal(t, hash, rec.RequestHash, "the hash covers the reference, not the fetched bytes")
			require.Zero(t, rec.Attempts)
			require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-ref"))
			require.Equal(t, 2, p.faults.Calls("GetObject"), "one throttled fetch, one that succeeded")

			// The same work re-sent: a duplicate, no S3 read.
			resent := *env
			resent.MessageID = caseflow.NewID("m")
			p.send(&resent)
			dup := p.waitEvents(2, 20*time.Second, final)[1]
			require.Equal(t, worker.OutcomeDuplicate, dup.Outcome)
			require.Equal(t, 2, p.faults.Calls("GetObject"), "a duplicate of completed work costs no S3 read")
			require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-ref"))
			p.requireQueueEmpty()
		})
	}
}

// Every payload failure under the lease ends as its classification says:
// terminal with its code (recorded, dead-lettered, nothing applied), or —
// access denied — an alert and retries that count no attempt, healed once
// the permission is.
func TestPayloadRefFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		versioned bool
		cfg       s3payload.Config
		// spoil breaks the reference or the object.
		spoil func(p *payloadHarness, env *envelope.Envelope)
		code  string
		// gets is how many GetObject calls the first delivery makes.
		gets int
	}{
		{name: "object gone", code: s3payload.CodeNotFound, gets: 1, spoil: func(p *payloadHarness, env *envelope.Envelope) {
			_, err := p.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(env.PayloadRef.Key)})
			require.NoError(p.t, err)
		}},
		{name: "version gone", versioned: true, code: s3payload.CodeVersionNotFound, gets: 1, spoil: func(p *payloadHarness, env *envelope.Envelope) {
			env.PayloadRef.VersionID = "Zm9yZ290dGVuLXZlcnNpb24"
		}},
		{name: "object replaced", code: s3payload.CodeChecksumMismatch, gets: 1, spoil: func(p *payloadHarness, env *envelope.Envelope) {
			body := make([]byte, env.PayloadRef.Size)
			for i := range body {
				body[i] = ' '
			}
			body[0], body[len(body)-1] = '{', '}'
			_, err := p.s3.PutObject(context.Background(), testenv.S3ObjectInput(p.bucket, env.PayloadRef.Key, body))
			require.NoError(p.t, err)
		}},
		{name: "larger than the worker reads", cfg: s3payload.Config{MaxBytes: 16}, code: s3payload.CodeTooLarge, gets: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPayloadHarness(t, tc.versioned)
			p.seedCases("c1")
			env, hash := p.byRef(mustEnv(t)(caseflow.NewDeadlineRequest("k-bad", "c1", "review", effective)))
			if tc.spoil != nil {
				tc.spoil(p, env)
				hash = hashOf(t, env)
			}
			cfg := p.testConfig()
			cfg.Payload = tc.cfg
			p.start(cfg, p.deps())
			p.send(env)

			ev := p.waitEvents(1, 20*time.Second, final)[0]
			require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
			require.Equal(t, tc.code, ev.Code)
			require.Equal(t, 1, ev.Attempt)
			rec := p.record("k-bad", caseflow.TypeDeadline)
			require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
			require.Equal(t, tc.code, rec.FailureCode)
			require.Equal(t, hash, rec.RequestHash)
			require.EqualValues(t, 0, p.applications("c1", caseflow.TypeDeadline, "k-bad"))
			require.Equal(t, tc.gets, p.faults.Calls("GetObject"))
			copies := p.dlq(1)
			require.Equal(t, tc.code, aws.ToString(copies[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
			p.requireQueueEmpty()
		})
	}

	t.Run("access denied: alert, retried without attempts, healed by the fix", func(t *testing.T) {
		p := newPayloadHarness(t, false)
		p.seedCases("c1")
		env, hash := p.byRef(mustEnv(t)(caseflow.NewDeadlineRequest("k-denied", "c1", "review", effective)))
		p.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusForbidden, Code: "AccessDenied", Message: "Access Denied"})
		metrics := metricstest.New()
		deps := p.deps()
		deps.Metrics = metrics
		p.start(p.testConfig(), deps)
		p.send(env)

		retries := p.waitEvents(2, 20*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeRetry })
		for _, ev := range retries {
			require.Equal(t, s3payload.CodeAccessDenied, ev.Code)
			require.True(t, ev.Infrastructure, "no business attempt")
			require.False(t, ev.Final)
		}
		require.GreaterOrEqual(t, metrics.Value("ddbworker_payload_access_denied_total"), 2.0, "each refusal is an alert")
		rec := p.record("k-denied", caseflow.TypeDeadline)
		require.Zero(t, rec.Attempts, "no attempt was charged")
		require.Equal(t, s3payload.CodeAccessDenied, rec.FailureCode)

		p.faults.Clear() // the permission is fixed
		ev := p.waitEvents(1, 30*time.Second, final)[0]
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 1, ev.Attempt)
		rec = p.record("k-denied", caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, hash, rec.RequestHash)
		require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-denied"))
	})
}

// Messages produced by the SQS Extended Client libraries (their pointer
// body and size attribute, current and legacy names) are applied once;
// their envelope is read from S3 before it is decoded. A pointer to a
// missing object is rejected terminal, and its DLQ copy keeps the pointer
// and the size attribute, so a redrive reads the same object.
func TestExtendedClientMessages(t *testing.T) {
	p := newPayloadHarness(t, false)
	p.seedCases("c1", "c2")
	p.start(p.testConfig(), p.deps())

	envs := map[string]*envelope.Envelope{
		"k-ext":    mustEnv(t)(caseflow.NewDeadlineRequest("k-ext", "c1", "review", effective)),
		"k-legacy": mustEnv(t)(caseflow.NewDeadlineRequest("k-legacy", "c2", "review", effective)),
	}
	for key, attr := range map[string]string{"k-ext": s3payload.AttrExtendedPayloadSize, "k-legacy": s3payload.AttrLegacyPayloadSize} {
		body, err := envelope.Encode(envs[key])
		require.NoError(t, err)
		p.sendExtended(body, "ext/"+key, attr)
	}
	applied := p.waitEvents(2, 30*time.Second, final)
	for _, ev := range applied {
		require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", ev)
		rec := p.record(ev.IdempotencyKey, caseflow.TypeDeadline)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Equal(t, hashOf(t, envs[ev.IdempotencyKey]), rec.RequestHash)
	}
	require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-ext"))
	require.EqualValues(t, 1, p.applications("c2", caseflow.TypeDeadline, "k-legacy"))
	require.Equal(t, 2, p.faults.Calls("GetObject"))

	// The same message again: fetched (its key is in S3), then a duplicate.
	body, err := envelope.Encode(envs["k-ext"])
	require.NoError(t, err)
	p.sendExtended(body, "ext/k-ext", s3payload.AttrExtendedPayloadSize)
	dup := p.waitEvents(3, 20*time.Second, final)[2]
	require.Equal(t, worker.OutcomeDuplicate, dup.Outcome)
	require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-ext"))

	// A pointer to nothing: rejected, dead-lettered with the pointer.
	ptr := s3payload.Pointer{Bucket: p.bucket, Key: "ext/missing", Size: 10, SizeAttribute: s3payload.AttrExtendedPayloadSize}
	_, err = p.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(p.env.Queues.URL),
		MessageBody: aws.String(ptr.Body()), MessageAttributes: ptr.Attributes()})
	require.NoError(t, err)
	ev := p.waitEvents(4, 20*time.Second, final)[3]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, s3payload.CodeNotFound, ev.Code)
	copies := p.dlq(1)
	require.Equal(t, ptr.Body(), aws.ToString(copies[0].Body))
	require.Equal(t, s3payload.CodeNotFound, aws.ToString(copies[0].MessageAttributes[dlq.AttrFailureCode].StringValue))
	require.Equal(t, strconv.Itoa(10), aws.ToString(copies[0].MessageAttributes[s3payload.AttrExtendedPayloadSize].StringValue))
	p.requireQueueEmpty()
}

// Under Lambda (HandleSQSEvent) a payloadRef and an Extended Client
// message are applied once, and an S3 refusal is reported as a batch item
// failure, hidden for its backoff, with no attempt counted.
func TestPayloadsUnderLambda(t *testing.T) {
	p := newPayloadHarness(t, true)
	p.seedCases("c1", "c2", "c3")
	w := p.lambdaWorker(p.testConfig(), p.deps())
	ref, hash := p.byRef(mustEnv(t)(caseflow.NewDeadlineRequest("k-lref", "c1", "review", effective)))
	p.send(ref)
	ext := mustEnv(t)(caseflow.NewDeadlineRequest("k-lext", "c2", "review", effective))
	body, err := envelope.Encode(ext)
	require.NoError(t, err)
	p.sendExtended(body, "ext/k-lext", s3payload.AttrExtendedPayloadSize)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := w.HandleSQSEvent(ctx, p.sqsEvent(2, 30*time.Second))
	require.NoError(t, err)
	require.Empty(t, resp)
	require.Equal(t, hash, p.record("k-lref", caseflow.TypeDeadline).RequestHash)
	require.Equal(t, inbox.StatusCompleted, p.record("k-lext", caseflow.TypeDeadline).Status)
	require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-lref"))
	require.EqualValues(t, 1, p.applications("c2", caseflow.TypeDeadline, "k-lext"))

	denied, _ := p.byRef(mustEnv(t)(caseflow.NewDeadlineRequest("k-ldenied", "c3", "review", effective)))
	p.send(denied)
	p.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusForbidden, Code: "AccessDenied"})
	event := p.sqsEvent(1, 30*time.Second)
	resp, err = w.HandleSQSEvent(ctx, event)
	require.NoError(t, err)
	require.Equal(t, []string{aws.ToString(event[0].MessageId)}, []string{resp[0]})
	rec := p.record("k-ldenied", caseflow.TypeDeadline)
	require.Equal(t, 0, rec.Attempts)
	require.Equal(t, s3payload.CodeAccessDenied, rec.FailureCode)
	evs := p.waitEventsNow(func(ev worker.Event) bool { return ev.IdempotencyKey == "k-ldenied" })
	require.Len(t, evs, 1)
	require.Equal(t, worker.OutcomeRetry, evs[0].Outcome)
	require.True(t, evs[0].Infrastructure)
	require.Positive(t, evs[0].Visibility, "hidden for its backoff")
}

// The Go producer offloads a payload above its threshold through
// s3payload.Offloader, and the worker applies the work once from the
// reference, under the hash the producer computed.
func TestProducerOffloadsToWorker(t *testing.T) {
	p := newPayloadHarness(t, true)
	p.seedCases("c1")
	var _ producer.Offloader = p.off
	prod, err := producer.New(p.env.SQS, producer.Config{QueueURL: p.env.Queues.URL, Producer: "payload-test", Offloader: p.off, OffloadAbove: 64})
	require.NoError(t, err)
	big := mustEnv(t)(caseflow.NewDeadlineRequest("k-big", "c1", "review", effective))
	require.Greater(t, len(big.Payload), 64)
	results, err := prod.SendEnvelopes(context.Background(), big)
	require.NoError(t, err)
	require.True(t, results[0].Offloaded)
	require.NotNil(t, results[0].Envelope.PayloadRef)
	require.NotEmpty(t, results[0].Envelope.PayloadRef.VersionID)

	p.start(p.testConfig(), p.deps())
	ev := p.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	rec := p.record("k-big", caseflow.TypeDeadline)
	require.Equal(t, results[0].Envelope.RequestHash, rec.RequestHash)
	require.EqualValues(t, 1, p.applications("c1", caseflow.TypeDeadline, "k-big"))
	require.Equal(t, 1, p.faults.Calls("GetObject"))
}

var _ types.Message
