package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// routedOrder is a route whose adapter reads the message type from the
// message attribute eventType (JSONBody.TypeAttribute), and whose handler
// fails terminally while broken holds.
func routedOrder(t *testing.T, table string, broken *atomic.Bool) *ddbworker.Registry {
	t.Helper()
	apply := orderHandler(table)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPlaced", ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if broken.Load() {
			return ddbworker.Result{}, failure.NewTerminal("ORDER_REJECTED", "the pricing data is missing")
		}
		return apply.Handle(ctx, m)
	}), ddbworker.Adapt(ddbworker.JSONBody{TypeAttribute: "eventType",
		Key: "join(':', ['order', orderId, 'placed'])", AggregateType: "'order'", AggregateID: "orderId"})))
	return reg
}

// routedAttrs are the producer's attributes: eventType, which the route
// reads, and n others whose names sort before it (a0…).
func routedAttrs(n int) map[string]types.MessageAttributeValue {
	out := map[string]types.MessageAttributeValue{"eventType": {DataType: aws.String("String"), StringValue: aws.String("OrderPlaced")}}
	for i := range n {
		out[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	return out
}

// Issue 21, defect 2: an attribute-routed message could never be
// redriven. The route reads its type from the attribute eventType; the
// producer sends 3 more attributes whose names sort before it. Its work
// fails terminally; the operator fixes the cause, reopens the work (inbox
// reopen) and redrives it (dlq redrive), as the CLI does.
//
// Old behaviour: the DLQ copy kept ddbworker's 7 attributes and the
// producer's first 3 by name, and dropped eventType without a word; the
// redriven message was rejected MISSING_FIELD messageType and
// dead-lettered for good. Now the attributes a route reads rank right
// after ddbworker's control attributes: the DLQ copy carries eventType,
// the redrive carries it back, and the work applies.
func TestRegressAttributeRoutedMessageRedrives(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	var broken atomic.Bool
	broken.Store(true)
	h.start(h.testConfig(), worker.Deps{Handlers: routedOrder(t, h.env.Table, &broken)})
	_, err := h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
		MessageBody: aws.String(`{"orderId":"o-21","amountCents":1999}`), MessageAttributes: routedAttrs(3)})
	require.NoError(t, err)

	failed := h.waitEvents(1, 30*time.Second, final)[0]
	require.Equal(t, worker.OutcomeTerminal, failed.Outcome, "%+v", failed)
	require.Equal(t, "ORDER_REJECTED", failed.Code)
	require.Equal(t, worker.PolicyDLQ, failed.Policy)

	q, err := dlq.New(h.env.SQS, dlq.Config{DLQURL: h.env.Queues.DLQURL, QueueURL: h.env.Queues.URL})
	require.NoError(t, err)
	peek, err := q.Peek(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, peek, 1)
	require.Equal(t, "ORDER_REJECTED", peek[0].FailureCode)
	// assert, not require: on the old code the test goes on to show what
	// the redrive of such a copy came to.
	assert.Equal(t, "OrderPlaced", aws.ToString(peek[0].Attributes["eventType"].StringValue),
		"the DLQ copy keeps the attribute the route reads; it holds %v", keys(peek[0].Attributes))

	// The operator fixes the cause and reopens the work (inbox reopen).
	broken.Store(false)
	store := inbox.Store{Table: h.env.Table}
	rec := h.record("order:o-21:placed", "OrderPlaced")
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	in, err := store.Reopen(rec, time.Now(), "ops", "pricing data loaded").UpdateItem(store.Table, store.Key(rec.Key, rec.MessageType))
	require.NoError(t, err)
	_, err = h.env.DynamoDB.UpdateItem(context.Background(), in)
	require.NoError(t, err)

	// dlq redrive.
	rep, err := q.Redrive(context.Background(), dlq.RedriveOptions{Max: 1, Rate: 10})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	require.Empty(t, rep.Moved[0].DroppedAttributes)

	again := h.waitEvents(2, 30*time.Second, final)[1]
	require.Equal(t, worker.OutcomeApplied, again.Outcome, "the redriven message is read and its work applied: %+v", again)
	require.Equal(t, "order:o-21:placed", again.IdempotencyKey)
	require.EqualValues(t, 1, num(t, h.item(orderKey("o-21")), "applications"))
	require.Equal(t, inbox.StatusCompleted, h.record("order:o-21:placed", "OrderPlaced").Status)
	require.Zero(t, testenv.InspectQueue(t, h.env.Queues.DLQURL).Total(), "nothing dead-lettered again")
}

// Issue 21, defect 2: a re-send — here the park of a message on the last
// receive the redrive policy allows, during a database outage — keeps the
// attribute a route reads when the producer filled all 10 attributes.
// Old behaviour: the re-send added ddbworker.firstSentAt and dropped the
// producer's last attribute by name, eventType: the copy could not be read
// (MISSING_FIELD messageType).
func TestRegressResendKeepsRoutingAttribute(t *testing.T) {
	const maxReceives = 2
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: maxReceives, VisibilityTimeout: 2 * time.Second}})
	proxy, ddb := h.proxied()
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	// The first failed call trips the gate; no probe is due during the test.
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: time.Hour, ProbeMaxInterval: time.Hour,
		ParkVisibility: time.Second, ParkMaxVisibility: time.Second}
	var broken atomic.Bool
	reg := routedOrder(t, h.env.Table, &broken)
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: reg})
	_, err := h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
		MessageBody: aws.String(`{"orderId":"o-22","amountCents":500}`), MessageAttributes: routedAttrs(9)})
	require.NoError(t, err)

	proxy.SetMode(ddbproxy.Throttle)
	for receive := 1; receive <= maxReceives; receive++ {
		ev := h.sqsEvent(1, 30*time.Second)
		require.Len(t, ev[0].MessageAttributes, 10, "the producer filled SQS's 10 attributes")
		resp, err := w.HandleSQSEvent(context.Background(), ev)
		require.NoError(t, err)
		parked := h.waitEvents(receive, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })
		if receive < maxReceives {
			require.Len(t, resp, 1)
			h.makeVisible(ev)
			continue
		}
		require.Empty(t, resp, "the last receive is re-sent, not reported")
		require.True(t, parked[receive-1].Final)
		h.deleteRecords(ev)
	}

	copied := h.sqsEvent(1, 30*time.Second)
	attrs := copied[0].MessageAttributes
	require.Len(t, attrs, 10)
	require.Contains(t, attrs, "eventType", "the re-send keeps the attribute the route reads; it holds %v", keys(attrs))
	require.Equal(t, "OrderPlaced", aws.ToString(attrs["eventType"].StringValue))
	require.Contains(t, attrs, dlq.AttrFirstSentAt, "and the work's origin")
	require.NotContains(t, attrs, "a8", "the producer's last other attribute by name made room")

	// The database is back: a healthy worker reads the copy and applies it.
	healthy := h.lambdaWorker(h.testConfig(), worker.Deps{Handlers: reg})
	resp, err := healthy.HandleSQSEvent(context.Background(), copied)
	require.NoError(t, err)
	require.Empty(t, resp)
	applied := h.waitEvents(1, 10*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeApplied })[0]
	require.Equal(t, worker.OutcomeApplied, applied.Outcome, "%+v", applied)
	require.EqualValues(t, 1, num(t, h.item(orderKey("o-22")), "applications"))
}

// Issue 21 (by-trace item): a re-send is sized to the work queue's own
// MaximumMessageSize, and says what it dropped. The queue takes 1,024
// bytes; the producer's message (900 bytes of body, eventType and a
// 60-byte attribute a0) fits it, its re-send with ddbworker.firstSentAt
// does not. Old behaviour: the re-send was fitted to 1 MiB, the queue
// refused it, and the message on its last receive was hidden instead (its
// next receive moves it to the DLQ). Now the copy sheds a0 — not
// eventType, which the route reads — and a warning names it.
func TestRegressResendFitsTheQueuesMaximumMessageSize(t *testing.T) {
	const queueMax = 1024
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 1, VisibilityTimeout: 2 * time.Second}})
	_, err := h.env.SQS.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(h.env.Queues.URL),
		Attributes: map[string]string{string(types.QueueAttributeNameMaximumMessageSize): fmt.Sprint(queueMax)}})
	require.NoError(t, err)
	proxy, ddb := h.proxied()
	cfg := h.testConfig()
	cfg.CallTimeout = time.Second
	cfg.Health = worker.HealthConfig{ConsecutiveFailures: 1, ProbeInterval: time.Hour, ProbeMaxInterval: time.Hour,
		ParkVisibility: time.Second, ParkMaxVisibility: time.Second}
	var logs testenv.Buffer
	var broken atomic.Bool
	w := h.lambdaWorker(cfg, worker.Deps{DynamoDB: ddb, Handlers: routedOrder(t, h.env.Table, &broken), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.Equal(t, queueMax, w.Prepare(context.Background()).MaxMessageSize, "read with the queue's other attributes")

	body := `{"orderId":"o-23","amountCents":1,"pad":"` + strings.Repeat("x", 840-len(`{"orderId":"o-23","amountCents":1,"pad":""}`)) + `"}`
	attrs := routedAttrs(0)
	attrs["a0"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("v", 60))}
	_, err = h.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL),
		MessageBody: aws.String(body), MessageAttributes: attrs})
	require.NoError(t, err, "precondition: the message fits the queue as sent")

	proxy.SetMode(ddbproxy.Throttle)
	ev := h.sqsEvent(1, 30*time.Second)
	resp, err := w.HandleSQSEvent(context.Background(), ev)
	require.NoError(t, err)
	parked := h.waitEvents(1, 5*time.Second, func(ev worker.Event) bool { return ev.Outcome == worker.OutcomeParked })[0]
	require.True(t, parked.Final, "re-sent on its last receive, not hidden: %+v", parked)
	require.Empty(t, resp)
	h.deleteRecords(ev)

	copied := h.sqsEvent(1, 30*time.Second)
	got := copied[0].MessageAttributes
	require.Subset(t, keys(got), []string{dlq.AttrFirstSentAt, "eventType"}, "eventType kept")
	require.NotContains(t, keys(got), "a0", "a0 shed to fit 1,024 bytes")
	var said bool
	for _, line := range logs.Lines() {
		var rec struct {
			Level, Msg, SqsMessageID, Copy string
			DroppedAttributes              []string
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec.DroppedAttributes != nil {
			said = true
			require.Equal(t, "WARN", rec.Level)
			require.Equal(t, aws.ToString(ev[0].MessageId), rec.SqsMessageID)
			require.Equal(t, "resend", rec.Copy)
			require.Contains(t, rec.DroppedAttributes, "a0")
			require.NotContains(t, rec.DroppedAttributes, "eventType")
		}
	}
	require.True(t, said, "the copy says what it dropped:\n%s", strings.Join(logs.Lines(), "\n"))
}

// keys are a map's keys, for a failure's message.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
