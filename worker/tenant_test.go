package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// tenantOrder is an OrderPlaced envelope for order id.
func tenantOrder(id string) string {
	b, err := envelope.Encode(&envelope.Envelope{MessageID: "m-" + id, SchemaVersion: envelope.SchemaV1, MessageType: "OrderPlaced",
		Producer: "test", OccurredAt: time.Now(), IdempotencyKey: "order:" + id + ":placed", AggregateType: "order", AggregateID: id,
		Payload: []byte(`{"orderId":"` + id + `","amountCents":1999}`)})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Regression (issue 24, tenants kept): the worker's copies of a message
// on a standard queue — its terminal copy to the DLQ, and the re-send that
// keeps a message on its last receive before the redrive policy's
// maxReceiveCount — went without the MessageGroupId it arrived with, so a
// fair queue's tenant was lost at the first copy. Both keep it now; a
// message that arrived without one is copied without one.
//
// fauxqs drops a standard queue's MessageGroupId, so every client here
// goes through testenv.MessageGroups: it records what is sent, and serves
// the group ids sent back on receive, as AWS returns them.
func TestCopiesKeepTheTenant(t *testing.T) {
	// maxReceiveCount 1: every receive is the last, so a retry is a re-send.
	// A 10 s lease (5 s calls) rides out a loaded machine's slow first calls.
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 1, VisibilityTimeout: 10 * time.Second}})
	groups := &testenv.MessageGroups{}
	client := sqs.NewFromConfig(h.env.AWS, groups.Options)
	var flaky atomic.Int32
	apply := orderHandler(h.env.Table)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPlaced", ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		switch id := m.Envelope.AggregateID; {
		case strings.HasPrefix(id, "bad"):
			return ddbworker.Result{}, failure.NewTerminal("ORDER_REJECTED", "the pricing data is missing")
		case id == "flaky" && flaky.Add(1) == 1:
			return ddbworker.Result{}, failure.NewRetryable("PRICING_BUSY", "try again")
		}
		return apply.Handle(ctx, m)
	})))
	cfg := h.testConfig()
	cfg.VisibilityTimeout = 10 * time.Second
	h.start(cfg, worker.Deps{Handlers: reg, SQS: client})

	for id, group := range map[string]string{"bad-1": "acct-7", "bad-2": "", "flaky": "acct-9"} {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(h.env.Queues.URL), MessageBody: aws.String(tenantOrder(id))}
		if group != "" {
			in.MessageGroupId = aws.String(group)
		}
		_, err := client.SendMessage(context.Background(), in)
		require.NoError(t, err)
	}
	// bad-1 and bad-2 end terminal, flaky applied after its re-sent copy.
	want := map[string]string{"order:bad-1:placed": worker.OutcomeTerminal, "order:bad-2:placed": worker.OutcomeTerminal,
		"order:flaky:placed": worker.OutcomeApplied}
	h.waitEvents(3, 60*time.Second, func(ev worker.Event) bool { return ev.Final && want[ev.IdempotencyKey] == ev.Outcome })
	require.Positive(t, groups.Served(), "the receive asked for the MessageGroupId and got it")

	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	groupOf := func(queueURL string) map[string][]string {
		out := map[string][]string{}
		for _, s := range groups.Sent(queueURL) {
			env, err := dec.Decode([]byte(s.Body))
			require.NoError(t, err)
			out[env.AggregateID] = append(out[env.AggregateID], aws.ToString(s.GroupID))
		}
		return out
	}
	// Every send of a message carries its group, however many copies a
	// slow machine's infrastructure trouble adds (each of them a re-send
	// too).
	tenant := map[string]string{"bad-1": "acct-7", "bad-2": "", "flaky": "acct-9"}
	for queue, sent := range map[string]map[string][]string{"DLQ": groupOf(h.env.Queues.DLQURL), "work queue": groupOf(h.env.Queues.URL)} {
		for id, gs := range sent {
			for _, g := range gs {
				require.Equal(t, tenant[id], g, "%s: a send of %s: %v", queue, id, gs)
			}
		}
	}
	require.NotEmpty(t, groupOf(h.env.Queues.DLQURL)["bad-1"], "bad-1's DLQ copy")
	require.NotEmpty(t, groupOf(h.env.Queues.DLQURL)["bad-2"], "bad-2's DLQ copy")
	require.GreaterOrEqual(t, len(groupOf(h.env.Queues.URL)["flaky"]), 2, "flaky: the producer's send and the re-sent copy")
}
