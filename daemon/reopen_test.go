package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
)

// runErr runs `ddbworker --dynamodb-endpoint … --table … args…` and
// returns stdout and stderr (progress lines) apart.
func (c *inboxCLI) runErr(args ...string) (stdout, stderr string, err error) {
	c.t.Helper()
	root := newRootCmd(App{})
	root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", c.env.Table,
		"--attention-shards", fmt.Sprint(inboxTestShards)}, args...))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func (c *inboxCLI) statusOf(key, msgType string) inbox.Status {
	c.t.Helper()
	doc := c.runJSON("inbox", "get", key, "--type", msgType)
	require.Len(c.t, doc.Records, 1)
	return inbox.Status(doc.Records[0].Status)
}

// inbox reopen in bulk: by failure code (dry run first, a count, --max and
// what remains, --all), rejections left alone; one key without --type when
// it has one record, refused naming the types when it has several; a
// missing --reason blames --reason alone. Old behaviour: one key at a time,
// --type always required, and a missing --reason blamed --type too.
func TestInboxReopenBulk(t *testing.T) {
	c := newInboxCLI(t)
	for i := range 5 {
		c.failed(inbox.StatusFailedTerminal, fmt.Sprintf("order-%d", i), "CASE_NOT_FOUND", c.now.Add(-time.Duration(10-i)*time.Minute))
	}
	c.failed(inbox.StatusFailedTerminal, "order-handler", "HANDLER_ERROR", c.now.Add(-time.Minute))
	c.rejection("msg-bad", "CASE_NOT_FOUND", c.now.Add(-time.Minute))

	out, _, err := c.runErr("inbox", "reopen", "--code", "CASE_NOT_FOUND", "--dry-run")
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^would reopen\s+order-0\s+CaseOpened\s+CASE_NOT_FOUND`, out)
	require.Contains(t, out, "would reopen 5 (at most 10), failed 0")
	require.Contains(t, out, "1 matching rejections left alone")
	require.Contains(t, out, "dry run: nothing changed")
	require.Equal(t, inbox.StatusFailedTerminal, c.statusOf("order-0", "CaseOpened"), "a dry run changes nothing")

	out, errw, err := c.runErr("inbox", "reopen", "--code", "CASE_NOT_FOUND", "--max", "3", "--reason", "orders restored", "--by", "ops@test")
	require.NoError(t, err, out)
	require.Contains(t, out, "reopened 3 (at most 3), failed 0")
	require.Contains(t, out, "--max reached: more FAILED_TERMINAL records match")
	require.Contains(t, out, `dlq redrive --dlq-url "$DLQ_URL" --filter code=CASE_NOT_FOUND --dry-run`)
	require.Contains(t, errw, "[reopen] 3 of 3: reopened 3, failed 0")
	require.Equal(t, inbox.StatusFailedRetryable, c.statusOf("order-0", "CaseOpened"), "oldest first")
	require.Equal(t, inbox.StatusFailedTerminal, c.statusOf("order-4", "CaseOpened"))

	out, _, err = c.runErr("inbox", "reopen", "--code", "CASE_NOT_FOUND", "--all", "--reason", "orders restored", "-o", "json")
	require.NoError(t, err, out)
	var rep reopenReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Reopened, 2)
	require.False(t, rep.More)
	require.Equal(t, 1, rep.Rejections)
	require.Equal(t, "orders restored", rep.Reopened[0].ReopenReason)
	require.Equal(t, inbox.StatusFailedRetryable, c.statusOf("order-4", "CaseOpened"))
	require.Equal(t, inbox.StatusFailedTerminal, c.statusOf("order-handler", "CaseOpened"), "another code is left alone")

	// By type, combined with nothing else: the remaining one.
	out, _, err = c.runErr("inbox", "reopen", "--type", "CaseOpened", "--dry-run")
	require.NoError(t, err, out)
	require.Contains(t, out, "would reopen 1 (at most 10)")

	// One key, no --type: its only record.
	out, _, err = c.runErr("inbox", "reopen", "order-handler", "--reason", "fixed")
	require.NoError(t, err, out)
	require.Contains(t, out, "status:          FAILED_RETRYABLE")
	require.Contains(t, out, "reopened 1, failed 0")

	// One key with records of two types: refused, naming them.
	c.failed(inbox.StatusFailedTerminal, "order-9", "CASE_NOT_FOUND", c.now)
	other := c.record("order-9", "OrderShipped", "CASE", "agg-order-9", c.now)
	other.Status, other.FailureCode, other.FailedAt = inbox.StatusFailedTerminal, "X", inbox.FormatTime(c.now)
	c.put(other, nil)
	_, _, err = c.runErr("inbox", "reopen", "order-9", "--reason", "x")
	require.ErrorContains(t, err, "order-9 has records of 2 message types: CaseOpened (FAILED_TERMINAL), OrderShipped (FAILED_TERMINAL); say which with --type")

	// A missing --reason blames --reason only; no selection says what selects.
	_, _, err = c.runErr("inbox", "reopen", "order-9", "--type", "CaseOpened")
	require.ErrorContains(t, err, "--reason is required")
	require.NotContains(t, err.Error(), "--type")
	_, _, err = c.runErr("inbox", "reopen", "--reason", "x")
	require.ErrorContains(t, err, "say what to reopen: a KEY, or --code, --aggregate or --type")
}
