package worker

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
)

// A re-send of a message whose delivery holds a lease carries it
// (controls: attrHeldLease), and the copy's delivery holds it again
// (newDelivery); a message without the attribute, or with one that does
// not parse, holds none. The DLQ copy never carries it.
func TestHeldLeaseTravelsWithTheResend(t *testing.T) {
	l := &inbox.Lease{Key: "order 42/é", MessageType: "OrderPlaced", Token: "0123456789abcdef0123456789abcdef", Attempt: 2, ExpiresAt: time.Now()}
	d := newDelivery(types.Message{MessageId: aws.String("m1"), Body: aws.String("{}"),
		Attributes: map[string]string{string(types.MessageSystemAttributeNameSentTimestamp): "1700000000000"}}, time.Now())
	require.Nil(t, d.held)
	d.held = l

	w := &Worker{cfg: Config{Now: time.Now}, queue: queueFacts{dlqMaxBytes: maxMessageBytes, maxBytes: maxMessageBytes}}
	attrs := w.resendAttributes(d).attrs
	require.Contains(t, attrs, attrHeldLease)
	require.Contains(t, attrs, dlq.AttrFirstSentAt, "beside the other control attributes")
	copied := newDelivery(types.Message{MessageId: aws.String("m2"), Body: aws.String("{}"), MessageAttributes: attrs}, time.Now())
	require.Equal(t, &inbox.Lease{Key: l.Key, MessageType: l.MessageType, Token: l.Token}, copied.held, "the copy holds the lease: its item and token")

	require.NotContains(t, w.dlqAttributes(d, nil, failure.NewTerminal("CASE_NOT_FOUND", "gone")).attrs, attrHeldLease, "a DLQ copy carries no lease")

	for name, v := range map[string]string{"not JSON": "abc", "no token": `{"k":"a","t":"T"}`, "no key": `{"t":"T","l":"x"}`} {
		m := types.Message{MessageId: aws.String("m3"), MessageAttributes: map[string]types.MessageAttributeValue{attrHeldLease: strAttr(v)}}
		require.Nil(t, newDelivery(m, time.Now()).held, name)
	}
	d.held = nil
	require.NotContains(t, w.resendAttributes(d).attrs, attrHeldLease)
}
