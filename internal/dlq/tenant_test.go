package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// Regression (issue 24, tenants kept): dlq redrive re-sent a standard
// DLQ's message to the work queue without its MessageGroupId, so a
// redriven message left its fair-queue tenant. It keeps it now — a
// worker's DLQ copy's and a message SQS's redrive policy moved alike;
// one without a group goes without.
//
// fauxqs drops a standard queue's MessageGroupId: the client goes through
// testenv.MessageGroups, which records the redrive's sends and serves the
// group ids sent back on receive, as AWS returns them.
func TestRedriveKeepsTheTenant(t *testing.T) {
	f := newFixture(t, false)
	groups := &testenv.MessageGroups{}
	f.sqs = sqs.NewFromConfig(testenv.AWSConfig(t), groups.Options)
	ctx := context.Background()

	// Two worker DLQ copies, one with a tenant.
	for key, group := range map[string]string{"k-tenant": "acct-7", "k-none": ""} {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.DLQURL), MessageBody: aws.String(envelopeBody(typeDeadline, key)),
			MessageAttributes: map[string]types.MessageAttributeValue{dlq.AttrFailureCode: str("CASE_NOT_FOUND"),
				dlq.AttrFailedAt: str(inbox.FormatTime(time.Now())), dlq.AttrMessageType: str(typeDeadline), dlq.AttrIdempotencyKey: str(key)}}
		if group != "" {
			in.MessageGroupId = aws.String(group)
		}
		_, err := f.sqs.SendMessage(ctx, in)
		require.NoError(t, err)
	}
	// One the redrive policy moved (maxReceiveCount 1), with its tenant.
	before := testenv.InspectQueue(t, f.queues.DLQURL).Total()
	_, err := f.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.URL), MessageBody: aws.String(envelopeBody(typeDeadline, "k-moved")),
		MessageGroupId: aws.String("acct-9")})
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queues.URL), VisibilityTimeout: 0, WaitTimeSeconds: 0})
		require.NoError(t, err)
		return testenv.InspectQueue(t, f.queues.DLQURL).Total() == before+1
	}, "the redrive policy did not move the message")

	sentBefore := len(groups.Sent(f.queues.URL))
	rep, err := f.queue(dlq.Config{QueueURL: f.queues.URL}).Redrive(ctx, dlq.RedriveOptions{All: true, Rate: 1000})
	require.NoError(t, err)
	require.Empty(t, rep.Failed)
	require.Len(t, rep.Moved, 3)
	require.Positive(t, groups.Served(), "the scan asked for the MessageGroupId and got it")

	got := map[string]*string{}
	for _, s := range groups.Sent(f.queues.URL)[sentBefore:] {
		for _, key := range []string{"k-tenant", "k-none", "k-moved"} {
			if s.Body == envelopeBody(typeDeadline, key) {
				got[key] = s.GroupID
			}
		}
	}
	require.Len(t, got, 3)
	require.Equal(t, "acct-7", aws.ToString(got["k-tenant"]))
	require.Nil(t, got["k-none"], "no group: none invented")
	require.Equal(t, "acct-9", aws.ToString(got["k-moved"]))
}
