package worker_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// sendWithAttributes sends one envelope with message attributes and
// returns its SQS message id.
func (h *harness) sendWithAttributes(e *envelope.Envelope, attrs map[string]types.MessageAttributeValue) string {
	h.t.Helper()
	b, err := envelope.Encode(e)
	require.NoError(h.t, err)
	out, err := h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
		MessageBody: aws.String(string(b)), MessageAttributes: attrs})
	require.NoError(h.t, err)
	return aws.ToString(out.MessageId)
}

func stringAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

func numberAttr(n int64) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(n, 10))}
}

// requireRejected checks a terminal rejection: its event, its rejection
// record, no domain write, and its DLQ copy (returned).
func (h *harness) requireRejected(ev worker.Event, code, caseID, key string) types.Message {
	t := h.t
	t.Helper()
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, code, ev.Code)
	require.Equal(t, worker.PolicyDLQ, ev.Policy)
	require.True(t, ev.Final)
	rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
	require.NoError(t, err, "a rejection record exists")
	require.True(t, rej.Rejection)
	require.Equal(t, code, rej.FailureCode)
	require.Equal(t, inbox.StatusFailedTerminal, rej.Status)
	require.Nil(t, h.record(key, caseflow.TypeDeadline), "the work never claimed its key")
	require.EqualValues(t, 0, h.applications(caseID, caseflow.TypeDeadline, key), "no domain write")
	require.EqualValues(t, 0, num(t, h.item(caseflow.CaseKey(caseID)), caseflow.AttrDeadlineVersion), "no domain write")
	m := h.dlq(1)[0]
	require.Equal(t, code, aws.ToString(m.MessageAttributes[dlq.AttrFailureCode].StringValue))
	require.Equal(t, ev.SQSMessageID, aws.ToString(m.MessageAttributes[dlq.AttrSourceMessageID].StringValue))
	return m
}

// Old behaviour, (a): attemptPolicy.notBefore was always served by hiding
// the message (visibility). Its next receive counts against the queue's
// redrive policy: with maxReceiveCount 1, that receive was the second and
// SQS moved the message to the DLQ, never applied. The test requires it
// applied once, on a delivery received once, and an empty DLQ.
// (b): a notBefore far ahead was re-hidden 12 hours at a time until the
// message aged out of the queue; now, beyond Config.MaxDeferral (7 days),
// it ends terminal DEFERRAL_TOO_LONG, accounted for by a rejection record
// and a DLQ copy. (c): the deferral by re-sending must not lose the
// producer's attributes nor the work's age: the copy carries them and
// ddbworker.firstSentAt set to the original's SentTimestamp.
func TestRegressDeferral(t *testing.T) {
	tests := []struct {
		name  string
		queue worker.QueueConfig
		run   func(t *testing.T, h *harness)
	}{
		{"maxReceiveCount 1: deferred without a second receive", worker.QueueConfig{MaxReceiveCount: 1}, func(t *testing.T, h *harness) {
			inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
			var mu sync.Mutex
			var counts []int
			reg := ddbworker.NewRegistry()
			require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
				mu.Lock()
				counts = append(counts, m.ReceiveCount)
				mu.Unlock()
				return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
			})))
			h.start(h.testConfig(), worker.Deps{Handlers: reg})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-defer", "c1", "intake", effective))
			later := time.Now().Add(2 * time.Second)
			env.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &later}
			h.send(env)

			ev := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })[0]
			require.Equal(t, 1, ev.Attempt)
			require.False(t, time.Now().Before(later))
			mu.Lock()
			require.Equal(t, []int{1}, counts, "the handler ran once, on a delivery received once")
			mu.Unlock()
			require.NotEmpty(t, h.waitEventsNow(func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeDeferred }))
			require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, "k-defer"))
			h.requireQueueEmpty()
			require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing went to the DLQ")
		}},
		{"beyond MaxDeferral: terminal DEFERRAL_TOO_LONG", worker.QueueConfig{}, func(t *testing.T, h *harness) {
			h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-far", "c1", "intake", effective))
			far := time.Now().Add(8 * 24 * time.Hour)
			env.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &far}
			h.send(env)
			ev := h.waitEvents(1, 30*time.Second, final)[0]
			h.requireRejected(ev, failure.CodeDeferralTooLong, "c1", "k-far")
			h.requireQueueEmpty()
		}},
		{"the re-sent copy keeps attributes and origin", worker.QueueConfig{MaxReceiveCount: 1}, func(t *testing.T, h *harness) {
			rec := &receiveRecorder{}
			sqsClient := sqs.NewFromConfig(h.env.AWS, h.inj.SQS, rec.install)
			h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), SQS: sqsClient})
			env := mustEnv(t)(caseflow.NewDeadlineRequest("k-copy", "c1", "intake", effective))
			later := time.Now().Add(2 * time.Second)
			env.AttemptPolicy = &envelope.AttemptPolicy{NotBefore: &later}
			original := h.sendWithAttributes(env, map[string]types.MessageAttributeValue{"tenant": stringAttr("acme")})

			ev := h.waitEvents(1, 30*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })[0]
			require.NotEqual(t, original, ev.SQSMessageID, "the applied delivery is the re-sent copy")
			h.requireQueueEmpty()

			msgs := rec.Messages()
			require.GreaterOrEqual(t, len(msgs), 2)
			require.Equal(t, original, aws.ToString(msgs[0].MessageId))
			sent := msgs[0].Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]
			require.NotEmpty(t, sent)
			var copies int
			for _, m := range msgs[1:] {
				if aws.ToString(m.MessageId) == original {
					continue
				}
				copies++
				require.Equal(t, "acme", aws.ToString(m.MessageAttributes["tenant"].StringValue), "the producer's attribute travels with the copy")
				require.Equal(t, sent, aws.ToString(m.MessageAttributes[dlq.AttrFirstSentAt].StringValue), "the copy carries the original's SentTimestamp")
			}
			require.Positive(t, copies)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testenv.Options{Queue: tc.queue})
			h.seedCases("c1")
			tc.run(t, h)
		})
	}
}

// The replay guard. Old behaviour: none — a message replayed (from a DLQ,
// an archive) after the inbox's COMPLETED record had expired by TTL (35
// days by default) found no record and applied its work a second time.
// Now a message whose ddbworker.firstSentAt (or SentTimestamp) is older
// than the COMPLETED TTL is rejected terminal REPLAY_WINDOW_EXPIRED: a
// rejection record, no domain write, a DLQ copy that keeps firstSentAt. A
// message 10 days old is inside the window and applies normally.
func TestRegressReplayWindow(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1", "c2")
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})

	old := time.Now().Add(-40 * 24 * time.Hour).UnixMilli()
	h.sendWithAttributes(mustEnv(t)(caseflow.NewDeadlineRequest("k-replay", "c1", "intake", effective)),
		map[string]types.MessageAttributeValue{dlq.AttrFirstSentAt: numberAttr(old)})
	ev := h.waitEvents(1, 30*time.Second, final)[0]
	m := h.requireRejected(ev, failure.CodeReplayWindowExpired, "c1", "k-replay")
	require.Equal(t, strconv.FormatInt(old, 10), aws.ToString(m.MessageAttributes[dlq.AttrFirstSentAt].StringValue), "the DLQ copy keeps the work's origin")

	recent := time.Now().Add(-10 * 24 * time.Hour).UnixMilli()
	h.sendWithAttributes(mustEnv(t)(caseflow.NewDeadlineRequest("k-recent", "c2", "intake", effective)),
		map[string]types.MessageAttributeValue{dlq.AttrFirstSentAt: numberAttr(recent)})
	ev = h.waitEvents(2, 30*time.Second, final)[1]
	require.Equal(t, worker.OutcomeApplied, ev.Outcome)
	require.Equal(t, "k-recent", ev.IdempotencyKey)
	require.EqualValues(t, 1, h.applications("c2", caseflow.TypeDeadline, "k-recent"))
	h.requireQueueEmpty()
}
