package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// An SNS notification of a type no route takes (an adapted body): its
// rejection record and its DLQ copy name the type the body named, so that
// `dlq peek` and `dlq stats` show it. Old behaviour: the log line's
// failure message named it, but the copy carried no ddbworker.messageType
// and the DLQ tooling, finding no envelope in the SNS wrapper, showed
// "(unreadable)".
func TestAdaptUnknownTypeNamedInDLQ(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("OrderPlaced", orderHandler(h.env.Table), ddbworker.Adapt(ddbworker.SNS(ddbworker.JSONBody{
		Type: "eventType", Key: "join(':', ['order', orderId])", AggregateType: "'order'", AggregateID: "orderId"}))))
	h.start(h.testConfig(), worker.Deps{Handlers: reg})
	c := testenv.SNS(t)
	topic := testenv.Topic(t, c, h.env.SQS, h.env.Queues.URL, false)
	publish(t, c, topic, strings.Replace(snsMessage("o-7", 100, 0), "OrderPlaced", "OrderCancelled", 1))

	ev := h.waitEvents(1, 20*time.Second, final)[0]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome)
	require.Equal(t, failure.CodeUnknownMessageType, ev.Code, "%+v", ev)
	copies := h.dlq(1)
	require.Equal(t, "OrderCancelled", aws.ToString(copies[0].MessageAttributes[dlq.AttrMessageType].StringValue), "the DLQ copy names the type")
	_, hasKey := copies[0].MessageAttributes[dlq.AttrIdempotencyKey]
	require.False(t, hasKey, "no key was read: none is claimed")
	rej, err := (inbox.Store{}).Decode(h.item((inbox.Store{}).RejectionKey(ev.SQSMessageID)))
	require.NoError(t, err)
	require.Equal(t, "OrderCancelled", rej.MessageType, "the rejection record names the type")
}
