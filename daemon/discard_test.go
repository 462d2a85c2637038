package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// dlq discard removes what can never be fixed — filtered, dry run first,
// each removal recorded in the inbox before the delete: on the work's
// FAILED_TERMINAL record, on the rejection of the delivery the worker
// failed, or on a rejection record it creates for a message the inbox never
// knew; a message whose work completed stays, reported. Old behaviour: no
// command removed a DLQ message (the tool pointed at SQS's own, which
// records nothing).
func TestDLQDiscard(t *testing.T) {
	c := newInboxCLI(t)
	client := sqs.NewFromConfig(testenv.AWSConfig(t))
	ctx := context.Background()
	qs, err := worker.CreateQueues(ctx, client, worker.QueueConfig{Name: testenv.Unique("discard")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	c.failed(inbox.StatusFailedTerminal, "order-1", "CASE_GONE", c.now.Add(-time.Hour))
	c.completed("order-2", "CaseOpened", "agg-2", c.now.Add(-time.Hour))
	c.rejection("src-3", "UNKNOWN_MESSAGE_TYPE", c.now.Add(-time.Hour))

	s := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	copyOf := func(id, code, typ, key, source string) types.SendMessageBatchRequestEntry {
		attrs := map[string]types.MessageAttributeValue{dlq.AttrFailureCode: s(code), dlq.AttrMessageType: s(typ), dlq.AttrFailureMessage: s("boom")}
		if key != "" {
			attrs[dlq.AttrIdempotencyKey] = s(key)
		}
		if source != "" {
			attrs[dlq.AttrSourceMessageID] = s(source)
		}
		return types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(`{"n":"` + id + `"}`), MessageAttributes: attrs}
	}
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(qs.DLQURL), Entries: []types.SendMessageBatchRequestEntry{
		copyOf("terminal", "CASE_GONE", "CaseOpened", "order-1", "src-1"),
		copyOf("completed", "CASE_GONE", "CaseOpened", "order-2", "src-2"),
		copyOf("rejected", "UNKNOWN_MESSAGE_TYPE", "OrderCancelled", "", "src-3"),
		copyOf("unknown", "CASE_GONE", "CaseOpened", "order-4", "src-4"),
		copyOf("other", "HANDLER_ERROR", "CaseOpened", "order-5", "src-5"),
	}})
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	idOf := map[string]string{}
	for _, r := range out.Successful {
		idOf[aws.ToString(r.Id)] = aws.ToString(r.MessageId)
	}

	run := func(args ...string) (string, string, error) {
		t.Helper()
		root := newRootCmd(App{})
		root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--sqs-endpoint", os.Getenv("AWS_ENDPOINT_URL_SQS"),
			"--table", c.env.Table, "--attention-shards", fmt.Sprint(inboxTestShards), "dlq", "discard", "--dlq-url", qs.DLQURL}, args...))
		var o, e bytes.Buffer
		root.SetOut(&o)
		root.SetErr(&e)
		err := root.ExecuteContext(ctx)
		return o.String(), e.String(), err
	}

	_, _, err = run("--reason", "x")
	require.ErrorContains(t, err, "--filter is required")
	_, _, err = run("--filter", "code=CASE_GONE")
	require.ErrorContains(t, err, "--reason is required")

	text, errw, err := run("--filter", "code=CASE_GONE", "--dry-run")
	require.ErrorContains(t, err, "1 selected messages stayed in the DLQ")
	require.Regexp(t, `would discard\s+`+idOf["terminal"]+`\s+CASE_GONE\s+CaseOpened\s+order-1\s+would mark work record order-1 CaseOpened discarded`, text)
	require.Regexp(t, `would discard\s+`+idOf["unknown"]+`\s+CASE_GONE\s+CaseOpened\s+order-4\s+would create rejection record rejected:`+idOf["unknown"], text)
	require.Regexp(t, `failed \(record\)\s+`+idOf["completed"]+`.*its work record order-2 CaseOpened is COMPLETED, not FAILED_TERMINAL`, text)
	require.Contains(t, text, "would discard 2 (at most 10); skipped 2 (filter)")
	require.Contains(t, text, "dry run: nothing removed or recorded")
	require.Contains(t, errw, "[discard] scanned 5, would discard 2 of 10")
	require.Equal(t, 5, testenv.InspectQueue(t, qs.DLQURL).Total(), "a dry run removes nothing")
	require.Empty(t, c.runJSON("inbox", "get", "order-1", "--attention-shards", fmt.Sprint(inboxTestShards)).Records[0].DiscardedAt)

	text, _, err = run("--filter", "code=CASE_GONE", "--reason", "cases purged", "--by", "ops@test")
	require.ErrorContains(t, err, "1 selected messages stayed in the DLQ")
	require.Contains(t, text, "discarded 2 (at most 10)")
	require.Contains(t, text, "marked work record order-1 CaseOpened discarded")
	require.Contains(t, text, "created and marked rejection record rejected:"+idOf["unknown"]+" discarded")
	require.Contains(t, text, "discarded by code: CASE_GONE 2")

	rec := c.runJSON("inbox", "get", "order-1", "--attention-shards", fmt.Sprint(inboxTestShards)).Records[0]
	require.Equal(t, string(inbox.StatusFailedTerminal), rec.Status, "still failed: a later delivery is refused again")
	require.Equal(t, "ops@test", rec.DiscardedBy)
	require.Equal(t, "cases purged", rec.DiscardReason)
	require.NotEmpty(t, rec.DiscardedAt)
	created := c.runJSON("inbox", "get", "rejected:"+idOf["unknown"], "--attention-shards", fmt.Sprint(inboxTestShards)).Records[0]
	require.Equal(t, "CASE_GONE", created.FailureCode)
	require.Equal(t, "CaseOpened", created.MessageType)
	require.Equal(t, "cases purged", created.DiscardReason)
	detail, err := c.run("inbox", "get", "order-1", "--attention-shards", fmt.Sprint(inboxTestShards))
	require.NoError(t, err)
	require.Contains(t, detail, "discarded:")

	text, _, err = run("--filter", "code=UNKNOWN_MESSAGE_TYPE", "--filter", "type=OrderCancelled", "--all", "--reason", "not ours")
	require.NoError(t, err, text)
	require.Contains(t, text, "marked rejection record rejected:src-3 discarded")
	require.Equal(t, "not ours", c.runJSON("inbox", "get", "rejected:src-3", "--attention-shards", fmt.Sprint(inboxTestShards)).Records[0].DiscardReason)

	require.Equal(t, 2, testenv.InspectQueue(t, qs.DLQURL).Total(), "the completed work's copy and the other code's stay")
}
