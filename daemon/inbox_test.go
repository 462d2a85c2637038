package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/internal/writes"
	"github.com/ddbworker/ddbworker/mutation"
)

// inboxCLI is one test's table, seeded the way the gate and the committer
// write records, and a way to run `ddbworker inbox …` against it.
type inboxCLI struct {
	t   *testing.T
	env *testenv.Env
	now time.Time
}

const inboxTestShards = 4

func newInboxCLI(t *testing.T) *inboxCLI {
	t.Helper()
	for _, kv := range os.Environ() { // no stray DDBWORKER_* flag values
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	return &inboxCLI{t: t, env: testenv.New(t, testenv.Options{NoQueue: true}), now: time.Now().UTC().Truncate(time.Millisecond)}
}

// run executes `ddbworker --dynamodb-endpoint … --table … args…` in-process.
func (c *inboxCLI) run(args ...string) (string, error) {
	c.t.Helper()
	root := newRootCmd(App{})
	root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", c.env.Table}, args...))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	require.Empty(c.t, errOut.String(), "nothing on stderr (errors are returned)")
	return out.String(), err
}

// runJSON runs args with -o json and decodes the document.
func (c *inboxCLI) runJSON(args ...string) inboxJSONDoc {
	c.t.Helper()
	out, err := c.run(append(args, "-o", "json")...)
	require.NoError(c.t, err, out)
	var doc inboxJSONDoc
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(c.t, dec.Decode(&doc), out)
	return doc
}

func (c *inboxCLI) put(rec *inbox.Record, key map[string]string) {
	c.t.Helper()
	item, err := (inbox.Store{}).Encode(rec), error(nil)
	require.NoError(c.t, err)
	for k, v := range key { // a rejection's own primary key
		item[k] = &types.AttributeValueMemberS{Value: v}
	}
	_, err = c.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(c.env.Table), Item: item})
	require.NoError(c.t, err)
}

func (c *inboxCLI) record(key, msgType, aggType, aggID string, seen time.Time) *inbox.Record {
	rec := inbox.NewRecord(&inbox.Work{Key: key, MessageType: msgType, RequestHash: "hash-" + key, SchemaVersion: 1,
		AggregateType: aggType, AggregateID: aggID, CorrelationID: "corr-" + key, Producer: "cli-test"}, seen)
	rec.LeaseOwner, rec.LeaseToken = "worker-1", "token-"+key
	return rec
}

func (c *inboxCLI) completed(key, msgType, aggID string, seen time.Time) {
	rec := c.record(key, msgType, "CASE", aggID, seen)
	rec.Status, rec.Outcome, rec.CompletedAt = inbox.StatusCompleted, inbox.OutcomeApplied, inbox.FormatTime(seen.Add(time.Second))
	c.put(rec, nil)
}

func (c *inboxCLI) failed(status inbox.Status, key, code string, at time.Time) {
	rec := c.record(key, "CaseOpened", "CASE", "agg-"+key, at.Add(-time.Minute))
	ts := inbox.FormatTime(at)
	rec.Status, rec.FailureCode, rec.FailureMessage, rec.FailedAt, rec.Attempts, rec.Deliveries = status, code, "boom: "+code, ts, 3, 4
	rec.GSI2PK, rec.GSI2SK = inbox.AttentionPK(status, inbox.Shard(key, inboxTestShards)), ts
	c.put(rec, nil)
}

func (c *inboxCLI) processing(key string, expires time.Time) {
	rec := c.record(key, "CaseOpened", "CASE", "agg-"+key, expires.Add(-time.Minute))
	rec.Status, rec.LeaseExpiresAt = inbox.StatusProcessing, expires.UnixMilli()
	rec.GSI2PK, rec.GSI2SK = inbox.AttentionPK(inbox.StatusProcessing, inbox.Shard(key, inboxTestShards)), inbox.FormatTime(expires)
	c.put(rec, nil)
}

func (c *inboxCLI) rejection(msgID, code string, at time.Time) {
	ts := inbox.FormatTime(at)
	rec := &inbox.Record{SQSMessageID: msgID, Status: inbox.StatusFailedTerminal, FailureCode: code, FailureMessage: "not JSON",
		FirstSeenAt: ts, FailedAt: ts,
		GSI2PK: inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(msgID, inboxTestShards)), GSI2SK: ts}
	c.put(rec, map[string]string{"PK": "REJECT#" + msgID, "SK": "REJECT"})
}

// keysOfJSON are the record names of a JSON document, in order.
func keysOfJSON(doc inboxJSONDoc) []string {
	var out []string
	for _, r := range doc.Records {
		if r.Rejection {
			out = append(out, "rejected:"+r.SQSMessageID)
		} else {
			out = append(out, r.Key)
		}
	}
	return out
}

// rowsOf are the first column of a table's rows (after the header).
func rowsOf(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	require.Regexp(t, `^KEY\s+TYPE\s+STATUS\s+OUTCOME/CODE\s+ATTEMPTS\s+DELIVERIES\s+FIRST SEEN\s+FAILED/COMPLETED\s+LEASE EXPIRES\s+AGGREGATE$`, lines[0])
	var keys []string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "next page: ") {
			break
		}
		keys = append(keys, strings.Fields(l)[0])
	}
	return keys
}

var nextRe = regexp.MustCompile(`(?m)^next page: --cursor (\S+)$`)

func TestInboxGet(t *testing.T) {
	c := newInboxCLI(t)
	c.completed("case-1:open", "CaseOpened", "case-1", c.now.Add(-time.Hour))
	c.failed(inbox.StatusFailedRetryable, "case-1:stage", "THROTTLED", c.now.Add(-time.Minute))
	c.completed("case-1:stage", "StageChanged", "case-1", c.now.Add(-30*time.Minute))
	c.processing("case-1:open2", c.now.Add(-time.Second))
	c.rejection("msg-abc", "ENVELOPE_INVALID", c.now)

	t.Run("table, every type", func(t *testing.T) {
		out, err := c.run("inbox", "get", "case-1:stage")
		require.NoError(t, err)
		blocks := strings.Split(out, "\n\n")
		require.Len(t, blocks, 2, out)
		require.Regexp(t, `(?m)^key:\s+case-1:stage$`, blocks[0])
		require.Regexp(t, `(?m)^messageType:\s+CaseOpened$`, blocks[0])
		require.Regexp(t, `(?m)^status:\s+FAILED_RETRYABLE$`, blocks[0])
		require.Regexp(t, `(?m)^failureCode:\s+THROTTLED$`, blocks[0])
		require.Regexp(t, `(?m)^failureMessage:\s+boom: THROTTLED$`, blocks[0])
		require.Regexp(t, `(?m)^attempts:\s+3$`, blocks[0])
		require.Regexp(t, `(?m)^messageType:\s+StageChanged$`, blocks[1])
		require.Regexp(t, `(?m)^outcome:\s+APPLIED$`, blocks[1])
		require.Regexp(t, `(?m)^aggregate:\s+CASE/case-1$`, blocks[1])
	})
	t.Run("table, an earlier attempt's failure on a completed record", func(t *testing.T) {
		rec := c.record("case-1:retried", "CaseOpened", "CASE", "case-1", c.now.Add(-time.Hour))
		rec.Status, rec.Outcome, rec.Attempts = inbox.StatusCompleted, inbox.OutcomeApplied, 2
		rec.FailureCode, rec.FailureMessage, rec.FailedAt = "THROTTLED", "slow down", inbox.FormatTime(c.now.Add(-50*time.Minute))
		c.put(rec, nil)
		out, err := c.run("inbox", "get", "case-1:retried")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^status:\s+COMPLETED$`, out)
		require.Regexp(t, `(?m)^failureCode:\s+THROTTLED \(an earlier attempt\)$`, out)
		require.Regexp(t, `(?m)^failedAt:\s+\S+ \(an earlier attempt\)$`, out)
	})
	t.Run("table, rejection", func(t *testing.T) {
		out, err := c.run("inbox", "get", "msg-abc", "--rejection")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^rejection:\s+yes: the message was refused and filed under its SQS message id$`, out)
	})
	t.Run("table, processing", func(t *testing.T) {
		out, err := c.run("inbox", "get", "case-1:open2", "--type", "CaseOpened")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^leaseExpiresAt:\s+\S+ \(expired\)$`, out)
		require.Regexp(t, `(?m)^leaseOwner:\s+worker-1$`, out)
	})
	t.Run("json, one type", func(t *testing.T) {
		doc := c.runJSON("inbox", "get", "case-1:stage", "--type", "StageChanged")
		require.Len(t, doc.Records, 1)
		r := doc.Records[0]
		require.Equal(t, "case-1:stage", r.Key)
		require.Equal(t, "StageChanged", r.MessageType)
		require.Equal(t, "COMPLETED", r.Status)
		require.Equal(t, "APPLIED", r.Outcome)
		require.Equal(t, "hash-case-1:stage", r.RequestHash)
		require.Equal(t, "case-1", r.AggregateID)
		require.Zero(t, r.Attempts, "no failure recorded")
		require.Empty(t, doc.Next)
	})
	t.Run("json keeps every field", func(t *testing.T) {
		out, err := c.run("inbox", "get", "case-1:open", "-o", "json")
		require.NoError(t, err)
		var raw struct {
			Records []map[string]any `json:"records"`
			Next    *string          `json:"next"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &raw), out)
		require.NotNil(t, raw.Next, `"next" is always present`)
		require.Len(t, raw.Records, 1)
		for _, f := range []string{"key", "messageType", "status", "failureCode", "failureMessage", "leaseExpiresAt", "ttl", "outcome", "attempts"} {
			require.Contains(t, raw.Records[0], f, "empty fields are present too")
		}
	})
	t.Run("rejection", func(t *testing.T) {
		doc := c.runJSON("inbox", "get", "msg-abc", "--rejection")
		require.Len(t, doc.Records, 1)
		require.True(t, doc.Records[0].Rejection)
		require.Equal(t, "ENVELOPE_INVALID", doc.Records[0].FailureCode)
		out, err := c.run("inbox", "get", "msg-abc", "--rejection")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^sqsMessageId:\s+msg-abc$`, out)
	})

	errs := []cliError{
		{name: "missing key", args: []string{"inbox", "get", "case-404"}, is: inbox.ErrNotFound, want: `"case-404"`},
		{name: "missing type", args: []string{"inbox", "get", "case-1:open", "--type", "Nope"}, is: inbox.ErrNotFound, want: `"Nope"`},
		{name: "missing rejection", args: []string{"inbox", "get", "msg-404", "--rejection"}, is: inbox.ErrNotFound, want: "msg-404"},
		{name: "no key", args: []string{"inbox", "get"}, want: "accepts 1 arg"},
		{name: "bad output", args: []string{"inbox", "get", "case-1:open", "-o", "yaml"}, want: `--output "yaml"`},
		{name: "type and rejection", args: []string{"inbox", "get", "x", "--rejection", "--type", "T"}, want: "exclude each other"},
	}
	c.requireErrors(errs)
}

func TestInboxListAggregate(t *testing.T) {
	c := newInboxCLI(t)
	var want []string
	msgTypes := []string{"CaseOpened", "StageChanged", "DeadlineSet"}
	for i := range 7 {
		key := fmt.Sprintf("case-9:%d", i)
		c.completed(key, msgTypes[i%3], "case-9", c.now.Add(time.Duration(i-10)*time.Minute))
		want = append(want, key)
	}
	c.completed("case-8:0", "CaseOpened", "case-8", c.now)

	t.Run("table, pages by cursor", func(t *testing.T) {
		var got []string
		args := []string{"inbox", "list", "--aggregate", "CASE/case-9", "--limit", "3"}
		for range 10 {
			out, err := c.run(args...)
			require.NoError(t, err)
			got = append(got, rowsOf(t, out)...)
			m := nextRe.FindStringSubmatch(out)
			if m == nil {
				break
			}
			args = []string{"inbox", "list", "--aggregate", "CASE/case-9", "--limit", "3", "--cursor", m[1]}
		}
		require.Equal(t, want, got)
	})
	t.Run("table columns", func(t *testing.T) {
		out, err := c.run("inbox", "list", "--aggregate", "CASE/case-9", "--limit", "1")
		require.NoError(t, err)
		lines := strings.Split(out, "\n")
		require.Regexp(t, `^case-9:0\s+CaseOpened\s+COMPLETED\s+APPLIED\s+0\s+1\s+\S+Z\s+\S+Z\s+-\s+CASE/case-9$`, lines[1])
		require.Regexp(t, `^next page: --cursor \S+$`, lines[2])
	})
	t.Run("json, all pages", func(t *testing.T) {
		doc := c.runJSON("inbox", "list", "--aggregate", "CASE/case-9", "--limit", "2", "--all")
		require.Equal(t, want, keysOfJSON(doc))
		require.Empty(t, doc.Next)
	})
	t.Run("json, descending page", func(t *testing.T) {
		doc := c.runJSON("inbox", "list", "--aggregate", "CASE/case-9", "--limit", "2", "--descending")
		require.Equal(t, []string{want[6], want[5]}, keysOfJSON(doc))
		require.NotEmpty(t, doc.Next)
		rest := c.runJSON("inbox", "list", "--aggregate", "CASE/case-9", "--descending", "--cursor", doc.Next, "--all")
		require.Equal(t, []string{want[4], want[3], want[2], want[1], want[0]}, keysOfJSON(rest))
	})
	t.Run("empty", func(t *testing.T) {
		out, err := c.run("inbox", "list", "--aggregate", "CASE/none")
		require.NoError(t, err)
		require.Equal(t, "no records\n", out)
		doc := c.runJSON("inbox", "list", "--aggregate", "CASE/none")
		require.NotNil(t, doc.Records)
		require.Empty(t, doc.Records)
	})
}

func TestInboxListStatus(t *testing.T) {
	c := newInboxCLI(t)
	var terminal, recentHandler []string
	for i := range 12 {
		key := fmt.Sprintf("w-%02d", i)
		code := []string{"HANDLER_ERROR", "VALIDATION_FAILED"}[i%2]
		at := c.now.Add(time.Duration(i-12) * 10 * time.Minute) // 2h ago … 10m ago
		c.failed(inbox.StatusFailedTerminal, key, code, at)
		terminal = append(terminal, key)
		if code == "HANDLER_ERROR" && !at.Before(c.now.Add(-65*time.Minute)) {
			recentHandler = append(recentHandler, key)
		}
	}
	c.rejection("msg-1", "ENVELOPE_INVALID", c.now.Add(-5*time.Minute))
	terminal = append(terminal, "rejected:msg-1")
	c.failed(inbox.StatusFailedRetryable, "r-1", "THROTTLED", c.now)
	c.processing("p-old", c.now.Add(-time.Minute))
	c.processing("p-new", c.now.Add(time.Minute))
	shards := []string{"--attention-shards", fmt.Sprint(inboxTestShards)}
	list := func(args ...string) []string { return append(append([]string{"inbox", "list"}, args...), shards...) }

	t.Run("all terminal, json, all pages", func(t *testing.T) {
		doc := c.runJSON(list("--status", "FAILED_TERMINAL", "--limit", "5", "--all")...)
		require.Equal(t, terminal, keysOfJSON(doc))
		require.Empty(t, doc.Next)
		last := doc.Records[len(doc.Records)-1]
		require.True(t, last.Rejection)
		require.Equal(t, "ENVELOPE_INVALID", last.FailureCode)
	})
	t.Run("code and since, json", func(t *testing.T) {
		require.NotEmpty(t, recentHandler)
		doc := c.runJSON(list("--status", "failed_terminal", "--code", "HANDLER_ERROR", "--since", "65m", "--limit", "2", "--all")...)
		require.Equal(t, recentHandler, keysOfJSON(doc))
		for _, r := range doc.Records {
			require.Equal(t, "HANDLER_ERROR", r.FailureCode)
			require.Equal(t, "boom: HANDLER_ERROR", r.FailureMessage)
			require.Equal(t, "FAILED_TERMINAL", r.Status)
		}
	})
	t.Run("code, table, pages by cursor", func(t *testing.T) {
		var got []string
		args := list("--status", "FAILED_TERMINAL", "--code", "VALIDATION_FAILED", "--limit", "4")
		for range 10 {
			out, err := c.run(args...)
			require.NoError(t, err)
			rows := rowsOf(t, out)
			got = append(got, rows...)
			for _, l := range strings.Split(out, "\n")[1 : len(rows)+1] {
				require.Regexp(t, `\sFAILED_TERMINAL\s+VALIDATION_FAILED\s+3\s+4\s`, l)
			}
			m := nextRe.FindStringSubmatch(out)
			if m == nil {
				break
			}
			args = list("--status", "FAILED_TERMINAL", "--code", "VALIDATION_FAILED", "--limit", "4", "--cursor", m[1])
		}
		require.Equal(t, []string{"w-01", "w-03", "w-05", "w-07", "w-09", "w-11"}, got)
	})
	t.Run("until RFC3339", func(t *testing.T) {
		until := c.now.Add(-95 * time.Minute).Format(time.RFC3339)
		doc := c.runJSON(list("--status", "FAILED_TERMINAL", "--until", until)...)
		require.Equal(t, []string{"w-00", "w-01", "w-02"}, keysOfJSON(doc))
	})
	t.Run("rejection in the table", func(t *testing.T) {
		out, err := c.run(list("--status", "FAILED_TERMINAL", "--since", "6m")...)
		require.NoError(t, err)
		require.Equal(t, []string{"rejected:msg-1"}, rowsOf(t, out))
		require.Contains(t, out, "ENVELOPE_INVALID")
	})
	t.Run("processing, expired leases", func(t *testing.T) {
		out, err := c.run(list("--status", "PROCESSING", "--until", "0s")...)
		require.NoError(t, err)
		require.Equal(t, []string{"p-old"}, rowsOf(t, out))
		require.Regexp(t, `\S+Z \(expired\)\s+CASE/agg-p-old`, out)
		out, err = c.run(list("--status", "PROCESSING")...)
		require.NoError(t, err)
		require.Equal(t, []string{"p-old", "p-new"}, rowsOf(t, out))
	})
	t.Run("retryable", func(t *testing.T) {
		doc := c.runJSON(list("--status", "FAILED_RETRYABLE")...)
		require.Equal(t, []string{"r-1"}, keysOfJSON(doc))
	})

	errs := []cliError{
		{name: "neither", args: []string{"inbox", "list"}, want: "exactly one of --aggregate"},
		{name: "both", args: []string{"inbox", "list", "--aggregate", "CASE/1", "--status", "PROCESSING"}, want: "exactly one of --aggregate"},
		{name: "bad aggregate", args: []string{"inbox", "list", "--aggregate", "CASE"}, want: "want TYPE/ID"},
		{name: "code with aggregate", args: []string{"inbox", "list", "--aggregate", "CASE/1", "--code", "X"}, want: "--code applies to --status"},
		{name: "bad status", args: []string{"inbox", "list", "--status", "COMPLETED"}, is: inbox.ErrBadStatus, want: "COMPLETED"},
		{name: "bad since", args: []string{"inbox", "list", "--status", "PROCESSING", "--since", "yesterday"}, want: `--since "yesterday"`},
		{name: "negative since", args: []string{"inbox", "list", "--status", "PROCESSING", "--since", "-1h"}, want: `--since "-1h"`},
		{name: "since after until", args: []string{"inbox", "list", "--status", "PROCESSING", "--since", "1m", "--until", "1h"}, is: inbox.ErrBadQuery},
		{name: "bad limit", args: []string{"inbox", "list", "--status", "PROCESSING", "--limit", "0"}, want: "--limit 0"},
		{name: "bad cursor", args: []string{"inbox", "list", "--status", "PROCESSING", "--cursor", "garbage!"}, is: inbox.ErrBadCursor},
		{name: "bad shards", args: []string{"inbox", "list", "--status", "PROCESSING", "--attention-shards", "101"}, want: "AttentionShards 101"},
		{name: "bad output", args: []string{"inbox", "list", "--status", "PROCESSING", "-o", "xml"}, want: `--output "xml"`},
	}
	c.requireErrors(errs)
}

// A cursor printed for one status does not resume another listing.
func TestInboxCursorBelongsToItsListing(t *testing.T) {
	c := newInboxCLI(t)
	for i := range 3 {
		c.failed(inbox.StatusFailedTerminal, fmt.Sprintf("k-%d", i), "X", c.now.Add(time.Duration(-i)*time.Minute))
	}
	doc := c.runJSON("inbox", "list", "--status", "FAILED_TERMINAL", "--limit", "1")
	require.NotEmpty(t, doc.Next)
	_, err := c.run("inbox", "list", "--status", "FAILED_RETRYABLE", "--cursor", doc.Next)
	require.ErrorIs(t, err, inbox.ErrBadCursor)
	_, err = c.run("inbox", "list", "--aggregate", "CASE/agg-k-0", "--cursor", doc.Next)
	require.ErrorIs(t, err, inbox.ErrBadCursor)
}

// cliError is a command line that must fail: with an error wrapping is
// (when set) and containing want, and nothing on stdout.
type cliError struct {
	name string
	args []string
	is   error
	want string
}

func (c *inboxCLI) requireErrors(errs []cliError) {
	c.t.Helper()
	for _, tt := range errs {
		c.t.Run(tt.name, func(t *testing.T) {
			out, err := c.run(tt.args...)
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, out)
		})
	}
}

// reopen gives a FAILED_TERMINAL work item back to the retry path, fenced
// and audited; anything else is refused.
func TestInboxReopen(t *testing.T) {
	c := newInboxCLI(t)
	c.failed(inbox.StatusFailedTerminal, "case-9:stage", "CASE_NOT_FOUND", c.now.Add(-time.Minute))
	c.processing("case-9:open", c.now.Add(time.Minute))

	doc := c.runJSON("inbox", "reopen", "case-9:stage", "--type", "CaseOpened", "--reason", "case 9 restored", "--by", "ops@test",
		"--attention-shards", fmt.Sprint(inboxTestShards))
	require.Len(t, doc.Records, 1)
	r := doc.Records[0]
	require.Equal(t, string(inbox.StatusFailedRetryable), r.Status)
	require.Zero(t, r.Attempts, "a fresh attempts budget")
	require.Equal(t, 4, r.Deliveries, "deliveries stay as history")
	require.Equal(t, "CASE_NOT_FOUND", r.FailureCode, "the last failure stays on the record")
	require.Equal(t, "ops@test", r.ReopenedBy)
	require.Equal(t, "case 9 restored", r.ReopenReason)
	require.NotEmpty(t, r.ReopenedAt)
	listed := c.runJSON("inbox", "list", "--status", "FAILED_RETRYABLE", "--attention-shards", fmt.Sprint(inboxTestShards))
	require.Equal(t, []string{"case-9:stage"}, keysOfJSON(listed), "in the attention index under its new status")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"again: it is not FAILED_TERMINAL any more", []string{"case-9:stage", "--type", "CaseOpened", "--reason", "x"}, "is FAILED_RETRYABLE, not FAILED_TERMINAL"},
		{"in flight", []string{"case-9:open", "--type", "CaseOpened", "--reason", "x"}, "is PROCESSING, not FAILED_TERMINAL"},
		{"no reason", []string{"case-9:stage", "--type", "CaseOpened"}, "--reason is required"},
		{"no such record", []string{"case-404", "--type", "CaseOpened", "--reason", "x"}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.run(append([]string{"inbox", "reopen"}, tc.args...)...)
			require.Error(t, err, out)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// `inbox get KEY` lists the deliveries of KEY that were rejected (filed
// under their SQS message ids, found through the indexes), and `inbox get
// rejected:<id>` — the name `inbox list` prints — reads that rejection.
// Old behaviour: `inbox get KEY` showed the key's record only, and `inbox
// get rejected:<id>` was "record not found".
func TestInboxGetRejections(t *testing.T) {
	c := newInboxCLI(t)
	store := inbox.Store{Table: c.env.Table} // the CLI's defaults: 16 attention shards
	now := c.now
	committer, err := mutation.New(c.env.DynamoDB, mutation.Config{Store: store, Now: func() time.Time { return now }})
	require.NoError(t, err)
	reject := func(at time.Time, r mutation.Rejection) {
		t.Helper()
		now = at
		require.NoError(t, committer.Reject(context.Background(), &r))
	}
	c.completed("order-7:invoice", "OrderInvoiceRequested", "o-7", c.now.Add(-time.Hour))
	reject(c.now.Add(-30*time.Minute), mutation.Rejection{SQSMessageID: "m-mismatch", Code: "IDEMPOTENCY_HASH_MISMATCH",
		Message: "the key was used for other work", Key: "order-7:invoice", MessageType: "OrderInvoiceRequested",
		AggregateType: "CASE", AggregateID: "o-7"})
	reject(c.now.Add(-20*time.Minute), mutation.Rejection{SQSMessageID: "m-elsewhere", Code: "IDEMPOTENCY_HASH_MISMATCH",
		Key: "order-7:invoice", MessageType: "OrderInvoiceRequested", AggregateType: "CASE", AggregateID: "o-8"})
	reject(c.now.Add(-10*time.Minute), mutation.Rejection{SQSMessageID: "m-never", Code: "FIELD_TOO_LONG",
		Key: "order-9:invoice", MessageType: "OrderInvoiceRequested", AggregateType: "CASE", AggregateID: "o-9"})

	t.Run("table: the record, then its rejected deliveries", func(t *testing.T) {
		out, err := c.run("inbox", "get", "order-7:invoice")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^status:\s+COMPLETED$`, out)
		require.Contains(t, out, "\n\n2 rejected deliveries of order-7:invoice, filed under their SQS message ids")
		require.Regexp(t, `(?m)^REJECTION\s+TYPE\s+CODE\s+FAILED AT\s+AGGREGATE\s+MESSAGE$`, out)
		require.Regexp(t, `(?m)^rejected:m-mismatch\s+OrderInvoiceRequested\s+IDEMPOTENCY_HASH_MISMATCH\s+\S+\s+CASE/o-7\s+the key was used for other work$`, out)
		require.Regexp(t, `(?m)^rejected:m-elsewhere\s+OrderInvoiceRequested\s+IDEMPOTENCY_HASH_MISMATCH\s+\S+\s+CASE/o-8\s+-$`, out)
		require.Less(t, strings.Index(out, "m-mismatch"), strings.Index(out, "m-elsewhere"), "oldest first")
	})
	t.Run("json: records and rejections", func(t *testing.T) {
		doc := c.runJSON("inbox", "get", "order-7:invoice")
		require.Len(t, doc.Records, 1)
		require.Len(t, doc.Rejections, 2)
		for _, r := range doc.Rejections {
			require.True(t, r.Rejection)
			require.Equal(t, "order-7:invoice", r.Key)
			require.Equal(t, "IDEMPOTENCY_HASH_MISMATCH", r.FailureCode)
		}
		require.Equal(t, "m-mismatch", doc.Rejections[0].SQSMessageID)
	})
	t.Run("a key whose every delivery was rejected", func(t *testing.T) {
		out, err := c.run("inbox", "get", "order-9:invoice")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(out, "no record under order-9:invoice: no delivery of it was accepted, or it applied on a single-write route, which records only failures (--item reads the domain item's fence)\n1 rejected delivery of order-9:invoice, filed under its SQS message id (`inbox get rejected:<id>` shows it):\n"), out)
		require.Regexp(t, `(?m)^rejected:m-never\s+OrderInvoiceRequested\s+FIELD_TOO_LONG\s`, out)
	})
	t.Run("the name inbox list prints reads the rejection", func(t *testing.T) {
		listed, err := c.run("inbox", "list", "--status", "FAILED_TERMINAL", "--code", "IDEMPOTENCY_HASH_MISMATCH")
		require.NoError(t, err)
		names := rowsOf(t, listed)
		require.Contains(t, names, "rejected:m-mismatch")
		out, err := c.run("inbox", "get", "rejected:m-mismatch")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^key:\s+order-7:invoice$`, out)
		require.Regexp(t, `(?m)^rejection:\s+yes: the message was refused and filed under its SQS message id, not under its key`, out)
		require.Regexp(t, `(?m)^sqsMessageId:\s+m-mismatch$`, out)
		require.Regexp(t, `(?m)^failureCode:\s+IDEMPOTENCY_HASH_MISMATCH$`, out)
		doc := c.runJSON("inbox", "get", "rejected:m-mismatch")
		require.Len(t, doc.Records, 1)
		require.True(t, doc.Records[0].Rejection)
		require.Empty(t, doc.Rejections)
	})
	c.requireErrors([]cliError{
		{name: "no such rejection", args: []string{"inbox", "get", "rejected:m-404"}, is: inbox.ErrNotFound, want: `no rejection of SQS message "m-404"`},
		{name: "no such key", args: []string{"inbox", "get", "order-404"}, is: inbox.ErrNotFound, want: "no rejected delivery"},
	})
}

// A single-write route keeps applied work in the domain item's fence:
// inbox get KEY --item … reads it and says whether it names KEY.
func TestInboxGetItemFence(t *testing.T) {
	c := newInboxCLI(t)
	store := inbox.Store{Table: c.env.Table}
	committer, err := mutation.New(c.env.DynamoDB, mutation.Config{Store: store})
	require.NoError(t, err)
	commit := func(w ddbworker.Write, key, typ, hash string) {
		t.Helper()
		m, err := writes.Mutation(w)
		require.NoError(t, err)
		fenced, err := mutation.Fenced([]mutation.Write{m}, mutation.Stamp{Key: key, Type: typ, Hash: hash})
		require.NoError(t, err)
		require.NoError(t, committer.CommitSingle(context.Background(), fenced))
	}
	caseKey := ddbworker.Key{"PK": "CASE#c-1", "SK": "CASE"}
	// What the worker commits for version 3 of case c-1's stage, key
	// case-1:stage:3, and for its note 1 (another route, another version
	// attribute, the same item), key case-1:note:1.
	commit(ddbworker.Update(c.env.Table, caseKey).Set("stage", "review").Guard(ddbworker.NewerVersion("stageVersion", 3)), "case-1:stage:3", "StageChanged", "v2:abc")
	commit(ddbworker.Update(c.env.Table, caseKey).Set("lastNote", "n").Guard(ddbworker.NewerVersion("noteVersion", 1)), "case-1:note:1", "NoteAdded", "v2:def")
	item := []string{"--item", "PK=CASE#c-1", "--item", "SK=CASE"}
	where := "item {PK=CASE#c-1, SK=CASE} of table " + c.env.Table

	out, err := c.run(append([]string{"inbox", "get", "case-1:stage:3"}, item...)...)
	require.NoError(t, err, "no inbox record, but an item to read")
	require.Contains(t, out, "no record under case-1:stage:3")
	require.Contains(t, out, where+": its stageVersion fence names case-1:stage:3 of type StageChanged (request hash v2:abc): that work set stageVersion 3, the current value — applied")
	require.Contains(t, out, where+": its noteVersion fence names other work, case-1:note:1 of type NoteAdded (request hash v2:def), which set noteVersion 1:")

	// The fence names work as the inbox does, by key and type.
	out, err = c.run(append([]string{"inbox", "get", "case-1:stage:3", "--type", "StageCorrected"}, item...)...)
	require.NoError(t, err)
	require.Contains(t, out, where+": its stageVersion fence names other work, case-1:stage:3 of type StageChanged (request hash v2:abc), which set stageVersion 3:")
	out, err = c.run(append([]string{"inbox", "get", "case-1:stage:3", "--type", "StageChanged"}, item...)...)
	require.NoError(t, err)
	require.Contains(t, out, where+": its stageVersion fence names case-1:stage:3 of type StageChanged (request hash v2:abc): that work set stageVersion 3, the current value — applied")

	out, err = c.run(append([]string{"inbox", "get", "case-1:note:1"}, item...)...)
	require.NoError(t, err)
	require.Contains(t, out, where+": its noteVersion fence names case-1:note:1 of type NoteAdded (request hash v2:def): that work set noteVersion 1, the current value — applied")

	out, err = c.run(append([]string{"inbox", "get", "case-1:stage:2"}, item...)...)
	require.NoError(t, err)
	require.Contains(t, out, "its stageVersion fence names other work, case-1:stage:3 of type StageChanged (request hash v2:abc), which set stageVersion 3: the fence names only the newest version's work, so it cannot tell whether case-1:stage:2 applied before that version")

	doc := c.runJSON(append([]string{"inbox", "get", "case-1:stage:3"}, item...)...)
	require.NotNil(t, doc.Fence)
	require.Equal(t, itemFence{Table: c.env.Table, Item: map[string]string{"PK": "CASE#c-1", "SK": "CASE"}, Found: true, NamesKey: true,
		Fences: []versionFence{
			{VersionAttr: "noteVersion", Version: "1", Key: "case-1:note:1", Type: "NoteAdded", Hash: "v2:def"},
			{VersionAttr: "stageVersion", Version: "3", Key: "case-1:stage:3", Type: "StageChanged", Hash: "v2:abc", NamesKey: true},
		}}, *doc.Fence)

	// A fence an older worker wrote names a key and a hash, no type: it
	// names KEY whatever --type asks.
	_, err = c.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(c.env.Table),
		Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#c-3"}, "SK": &types.AttributeValueMemberS{Value: "CASE"},
			"stageVersion": &types.AttributeValueMemberN{Value: "2"}, mutation.FenceKeyAttr("stageVersion"): &types.AttributeValueMemberS{Value: "case-3:stage:2"},
			mutation.FenceHashAttr("stageVersion"): &types.AttributeValueMemberS{Value: "v2:abd"}}})
	require.NoError(t, err)
	out, err = c.run("inbox", "get", "case-3:stage:2", "--type", "StageChanged", "--item", "PK=CASE#c-3", "--item", "SK=CASE")
	require.NoError(t, err)
	require.Contains(t, out, "item {PK=CASE#c-3, SK=CASE} of table "+c.env.Table+": its stageVersion fence names case-3:stage:2 (request hash v2:abd): that work set stageVersion 2, the current value — applied")

	_, err = c.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(c.env.Table),
		Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#c-2"}, "SK": &types.AttributeValueMemberS{Value: "CASE"}}})
	require.NoError(t, err)
	out, err = c.run("inbox", "get", "case-2:stage:1", "--item", "PK=CASE#c-2", "--item", "SK=CASE")
	require.NoError(t, err)
	require.Contains(t, out, "item {PK=CASE#c-2, SK=CASE} of table "+c.env.Table+": no fence (ddbworkerKey_<version attribute>): no single-write route has written it")
	out, err = c.run("inbox", "get", "case-9:stage:1", "--item", "PK=CASE#c-9", "--item", "SK=CASE")
	require.NoError(t, err)
	require.Contains(t, out, "item {PK=CASE#c-9, SK=CASE} of table "+c.env.Table+": no such item")
	_, err = c.run("inbox", "get", "case-1:stage:3", "--item", "PK")
	require.ErrorContains(t, err, `--item "PK": want NAME=VALUE`)
}
