package dlq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// sendCalls records the entries of every SendMessageBatch call a client
// makes: their bodies and attributes, as sent.
type sendCalls struct {
	mu    sync.Mutex
	calls [][]types.SendMessageBatchRequestEntry
}

func (s *sendCalls) install(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("test.sendCalls", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
				s.mu.Lock()
				s.calls = append(s.calls, p.Entries)
				s.mu.Unlock()
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

func (s *sendCalls) get() [][]types.SendMessageBatchRequestEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// sqsSize is a message's size as SQS counts it: the body, and each
// attribute's name, data type and value.
func sqsSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// paddedBody is an envelope of typ and key whose body is exactly n bytes.
func paddedBody(t *testing.T, typ, key string, n int) string {
	t.Helper()
	b := envelopeBody(typ, key)
	pad := n - len(b) - len(`,"pad":""`)
	require.Positive(t, pad)
	b = strings.Replace(b, `"payload":{`, `"payload":{"pad":"`+strings.Repeat("p", pad)+`",`, 1)
	require.Len(t, b, n)
	return b
}

// Regression: a DLQ message close to SQS's 1 MiB limit did not move. The
// copy Redrive sends carries, besides the body and the producer's
// attributes, ddbworker.firstSentAt and ddbworker.redrivenFrom (some 100
// bytes), and SQS refused the call as a whole (BatchRequestTooLong: "Batch
// requests cannot be longer than 1048576 bytes"): the message stayed in
// the DLQ, in the report's Failed, and `dlq redrive --all` exited 1. The
// copy now fits: attributes yield when they would not (fitAttributes'
// order: redrivenFrom and firstSentAt kept first, the producer's last by
// name shed first; one too large for the room left yields to smaller
// ones), named in the report; and a message that large goes alone in its
// call. Likewise, a message with 10 producer attributes left no room for
// firstSentAt, whose copy then looked freshly sent to the worker's
// replay-window check; and shedding the producer's last attributes by name
// instead dropped a route's type attribute (explorer seed 19): such a copy
// is now refused, naming the fix (DropAttributes: the operator names an
// attribute no route reads), and the mark redrivenFrom yields to the
// producer's attributes (the work's record is checked in every commit but
// SkipInboxCheck's).
func TestRedriveMessageNearSizeLimit(t *testing.T) {
	const maxMessage = 1 << 20
	tenant := map[string]string{"tenant": "acme"}
	ten := map[string]string{}
	for i := range 10 {
		ten[fmt.Sprintf("a%02d", i)] = "v"
	}
	f := newFixture(t, false)
	big := paddedBody(t, typeNote, "k-big", maxMessage-sqsSize("", map[string]types.MessageAttributeValue{"tenant": str("acme")})-40)
	seeds := []failed{
		{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k1", producer: tenant},
		{typ: typeNote, key: "k-big", body: big, producer: tenant}, // moved by the redrive policy: no ddbworker attributes
		{code: "CASE_NOT_FOUND", typ: typeDeadline, key: "k2"},
		{typ: typeNote, key: "k-ten", producer: ten},
		{typ: typeNote, key: "k3"},
	}
	ids := f.seed(seeds...)
	keyOf := map[string]string{}
	for i, s := range seeds {
		keyOf[ids[i]] = s.key
	}

	var rec sendCalls
	q, err := dlq.New(sqs.NewFromConfig(testenv.AWSConfig(t), rec.install), dlq.Config{DLQURL: f.queues.DLQURL, QueueURL: f.queues.URL, EmptyReceives: 1})
	require.NoError(t, err)
	rep, err := q.Redrive(context.Background(), dlq.RedriveOptions{All: true, Rate: 1000})
	require.NoError(t, err)
	require.Len(t, rep.Failed, 1, "the message with 10 producer attributes is refused")
	require.Equal(t, "k-ten", rep.Failed[0].Key)
	require.Equal(t, "fit", rep.Failed[0].Step)
	require.Contains(t, rep.Failed[0].Error, "it would leave out ddbworker.firstSentAt")
	require.Contains(t, rep.Failed[0].Error, "--drop-attribute NAME", "the refusal names the fix")
	require.Len(t, rep.Moved, len(seeds)-1)
	f.requireAllVisible(1)
	// The operator names an attribute no route reads: it moves.
	again, err := q.Redrive(context.Background(), dlq.RedriveOptions{All: true, Rate: 1000, DropAttributes: []string{"a00"}})
	require.NoError(t, err)
	require.Empty(t, again.Failed)
	dropped := map[string][]string{}
	for _, m := range append(rep.Moved, again.Moved...) {
		if len(m.DroppedAttributes) > 0 {
			dropped[m.Key] = m.DroppedAttributes
		}
	}
	require.Equal(t, map[string][]string{"k-big": {dlq.AttrRedrivenFrom}, "k-ten": {"a00", dlq.AttrRedrivenFrom}}, dropped, "the report names what each copy could not carry")
	f.requireAllVisible(0)

	// Every call within 256 KiB of payload, but for a larger message alone.
	sawBig := false
	for _, c := range rec.get() {
		total := 0
		for _, e := range c {
			total += sqsSize(aws.ToString(e.MessageBody), e.MessageAttributes)
			sawBig = sawBig || aws.ToString(e.MessageBody) == big
		}
		require.True(t, total <= 256<<10 || len(c) == 1, "a call of %d entries and %d bytes", len(c), total)
	}
	require.True(t, sawBig)

	bodies := map[string]bool{}
	for _, m := range f.drain(f.queues.URL, len(seeds)) {
		body := aws.ToString(m.Body)
		bodies[body] = true
		attrs := stringAttrs(m.MessageAttributes)
		require.Contains(t, attrs, dlq.AttrFirstSentAt, "every copy carries when its work was first sent")
		require.LessOrEqual(t, sqsSize(body, m.MessageAttributes), maxMessage)
		switch body {
		case big:
			require.NotContains(t, attrs, dlq.AttrRedrivenFrom)
			require.Equal(t, str("acme"), attrs["tenant"], "the producer's attribute fits and stays")
			require.Len(t, attrs, 2)
		case envelopeBody(typeNote, "k-ten"):
			require.Len(t, attrs, 10, "SQS's limit")
			require.NotContains(t, attrs, "a00", "left out by name")
			require.Contains(t, attrs, "a09", "every other attribute of the producer's is kept")
			require.NotContains(t, attrs, dlq.AttrRedrivenFrom, "the mark yields to the producer's attributes")
		default:
			key := keyOf[aws.ToString(attrs[dlq.AttrRedrivenFrom].StringValue)]
			require.NotEmpty(t, key, "redrivenFrom names a seeded message")
		}
	}
	for _, s := range seeds {
		body := s.body
		if body == "" {
			body = envelopeBody(s.typ, s.key)
		}
		require.True(t, bodies[body], "%s arrived in the work queue", s.key)
	}
}
