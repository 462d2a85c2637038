package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// runDLQCLI runs the command in-process against the test's SQS endpoint.
func runDLQCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd(App{})
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(append([]string{"--sqs-endpoint", os.Getenv("AWS_ENDPOINT_URL_SQS")}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = root.ExecuteContext(ctx)
	return out.String(), errw.String(), err
}

// dlqQueues creates a work queue and its DLQ and seeds the DLQ with three
// CASE_NOT_FOUND copies from the worker and one unreadable message the
// redrive policy moved.
func dlqQueues(t *testing.T) worker.Queues {
	t.Helper()
	client := sqs.NewFromConfig(testenv.AWSConfig(t))
	ctx := context.Background()
	qs, err := worker.CreateQueues(ctx, client, worker.QueueConfig{Name: testenv.Unique("dlqcli")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{qs.URL, qs.DLQURL} {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	s := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	var entries []types.SendMessageBatchRequestEntry
	for i := range 3 {
		key := "k" + strconv.Itoa(i)
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(key),
			MessageBody: aws.String(`{"messageType":"CaseDeadlineCalculationRequested","idempotencyKey":"` + key + `"}`),
			MessageAttributes: map[string]types.MessageAttributeValue{
				dlq.AttrFailureCode: s("CASE_NOT_FOUND"), dlq.AttrFailedAt: s("2026-01-02T03:04:05.000Z"),
				dlq.AttrMessageType: s("CaseDeadlineCalculationRequested"), dlq.AttrIdempotencyKey: s(key), "tenant": s("acme"),
			}})
	}
	entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("bad"), MessageBody: aws.String("not\njson")})
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(qs.DLQURL), Entries: entries})
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	return qs
}

func TestDLQCommands(t *testing.T) {
	qs := dlqQueues(t)

	out, _, err := runDLQCLI(t, "dlq", "stats", "--dlq-url", qs.DLQURL)
	require.NoError(t, err)
	require.Contains(t, out, "scanned 4 messages (the whole queue)")
	require.Contains(t, out, "not seen by a scan")
	require.Regexp(t, `(?m)^CASE_NOT_FOUND\s+3$`, out)
	require.Regexp(t, `(?m)^\(none: redrive policy\)\s+1$`, out)
	require.Regexp(t, `(?m)^\(unreadable\)\s+1$`, out)
	require.Regexp(t, `(?m)^CASE_NOT_FOUND\s+CaseDeadlineCalculationRequested\s+3$`, out)
	require.Contains(t, out, "oldest failure 2026-01-02T03:04:05Z")

	out, _, err = runDLQCLI(t, "dlq", "stats", "--dlq-url", qs.DLQURL, "--output", "json")
	require.NoError(t, err)
	var st dlq.Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, 4, st.Scanned)
	require.Equal(t, map[string]int{"CASE_NOT_FOUND": 3, dlq.CodeNone: 1}, st.ByCode)

	out, _, err = runDLQCLI(t, "dlq", "peek", "--dlq-url", qs.DLQURL)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ID\s+CODE\s+TYPE\s+KEY\s+FAILED AT\s+RECEIVES\s+WRAPPER\s+BODY$`, out)
	require.Regexp(t, `(?m)\s+CASE_NOT_FOUND\s+CaseDeadlineCalculationRequested\s+k1\s+2026-01-02T03:04:05Z\s+\d+\s+-\s+\{"messageType"`, out)
	require.Regexp(t, `(?m)\s+\(none: redrive policy\)\s+\(unreadable\)\s+-\s+-\s+\d+\s+-\s+not json$`, out, "the body on one line")
	require.Contains(t, out, "4 messages shown; all of them are still in the DLQ")

	out, _, err = runDLQCLI(t, "dlq", "peek", "--dlq-url", qs.DLQURL, "--max", "2", "-o", "json")
	require.NoError(t, err)
	var peeked []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &peeked))
	require.Len(t, peeked, 2)
	require.Equal(t, testenv.QueueState{Ready: 4}, testenv.InspectQueue(t, qs.DLQURL), "peek and stats leave everything")

	out, errw, err := runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--dry-run", "--filter", "code=CASE_NOT_FOUND")
	require.NoError(t, err)
	require.Contains(t, out, "would move 3 (at most 10)")
	require.Contains(t, out, "skipped 1 (filter)")
	require.Contains(t, out, "dry run: nothing moved")
	require.Contains(t, errw, "[redrive] scanned 4, would move 3 of 10")
	require.Zero(t, testenv.InspectQueue(t, qs.URL).Total())

	out, errw, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL,
		"--filter", "code=CASE_NOT_FOUND", "--filter", "type=CaseDeadlineCalculationRequested", "--max", "2", "--rate", "100", "-o", "json")
	require.NoError(t, err)
	require.Regexp(t, `\[redrive\] scanned \d+, moved 2 of 2, skipped \d+, failed 0`, errw)
	var rep dlq.RedriveReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Moved, 2)
	require.True(t, rep.LimitReached)
	require.Equal(t, map[string]int{"CASE_NOT_FOUND": 2}, rep.MovedByCode)
	require.Equal(t, 2, testenv.InspectQueue(t, qs.URL).Total())
	require.Equal(t, testenv.QueueState{Ready: 2}, testenv.InspectQueue(t, qs.DLQURL))

	out, _, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL, "--all", "--rate", "100")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^moved\s+\S+\s+\S+\s+CASE_NOT_FOUND\s+CaseDeadlineCalculationRequested\s+k\d\s+-$`, out)
	require.Contains(t, out, "moved 2 (all)")
	require.Contains(t, out, "moved by code: (none: redrive policy) 1, CASE_NOT_FOUND 1")
	require.Equal(t, 4, testenv.InspectQueue(t, qs.URL).Total())
	require.Zero(t, testenv.InspectQueue(t, qs.DLQURL).Total())
}

func TestDLQCommandErrors(t *testing.T) {
	t.Setenv("DDBWORKER_DLQ_URL", "")
	t.Setenv("DDBWORKER_QUEUE_URL", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "stats"}, "--dlq-url is required"},
		{[]string{"dlq", "peek"}, "--dlq-url is required"},
		{[]string{"dlq", "redrive", "--queue-url", "q"}, "--dlq-url is required"},
		{[]string{"dlq", "stats", "--dlq-url", "d", "-o", "yaml"}, `--output "yaml" must be table or json`},
		{[]string{"dlq", "redrive", "--dlq-url", "d"}, "--queue-url (the work queue to redrive to) is required"},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "q", "--filter", "stage=x"}, `"stage" is not a filter key`},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "q", "--filter", "code"}, "want code=CODE or type=TYPE"},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "q", "--all", "--max", "5"}, "--all and --max exclude each other"},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "q", "--max", "0"}, "--max 0 must be at least 1"},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "q", "--rate", "-1"}, "Rate -1 must be a positive number"},
		{[]string{"dlq", "redrive", "--dlq-url", "d", "--queue-url", "d"}, "must not be the DLQ itself"},
	} {
		_, _, err := runDLQCLI(t, tc.args...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// What a redrive left, in words: one message is one message. Old
// behaviour: "at least 1 more matching messages remain".
func TestDLQRemaining(t *testing.T) {
	cases := []struct {
		name string
		rep  dlq.RedriveReport
		want string
	}{
		{"one more", dlq.RedriveReport{Scanned: 3, Matched: 2, LimitReached: true, OverMax: 1},
			"--max reached: at least 1 more matching message remains in the DLQ (scanned 3, 2 matching); check the outcome, then redrive more"},
		{"two more", dlq.RedriveReport{Scanned: 4, Matched: 3, LimitReached: true, OverMax: 2},
			"--max reached: at least 2 more matching messages remain in the DLQ (scanned 4, 3 matching); check the outcome, then redrive more"},
		{"none matched", dlq.RedriveReport{Scanned: 4, Complete: true}, "no message in the DLQ matched (scanned 4, 0 matching)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, dlqRemaining(tc.rep))
		})
	}
}

// A redriven copy that drops attributes says which, in the text report too
// (issue 21), not only in -o json's droppedAttributes.
func TestDLQPrintRedriveNamesDroppedAttributes(t *testing.T) {
	var out bytes.Buffer
	dlqPrintRedrive(&out, dlq.RedriveReport{Max: 2, Rate: 1, Moved: []dlq.Moved{
		{ID: "dlq-1", NewID: "n-1", Code: "C", Type: "T", DroppedAttributes: []string{"p8", "traceparent"}},
		{ID: "dlq-2", NewID: "n-2", Code: "C", Type: "T"},
	}})
	require.Contains(t, out.String(), "moved dlq-1 without the attributes SQS's limits left no room for: p8, traceparent\n")
	require.NotContains(t, out.String(), "moved dlq-2 without")
}

// `dlq redrive` says that matching messages remain only when they may: it
// scans past --max for one more match, so exactly --max matching messages
// leave none behind, and it says how many it scanned and matched. Old
// behaviour: "--max reached: more matching messages may remain" when the one
// matching message had moved.
func TestDLQRedriveSaysWhatRemains(t *testing.T) {
	qs := dlqQueues(t) // 3 CASE_NOT_FOUND, 1 moved by the redrive policy

	out, _, err := runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL,
		"--filter", "code="+dlq.CodeNone, "--max", "1", "--rate", "100")
	require.NoError(t, err)
	require.Contains(t, out, "moved 1 (at most 1)")
	require.Contains(t, out, "scanned 4, 1 matching")
	require.Contains(t, out, "the whole DLQ was scanned (scanned 4, 1 matching): every matching message moved")
	require.NotContains(t, out, "remain")

	out, _, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL,
		"--filter", "code=CASE_NOT_FOUND", "--max", "1", "--rate", "100", "-o", "json")
	require.NoError(t, err)
	var rep dlq.RedriveReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Moved, 1)
	require.True(t, rep.LimitReached)
	require.GreaterOrEqual(t, rep.OverMax, 1)
	require.Equal(t, rep.Scanned-rep.Skipped, rep.Matched)

	out, _, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL,
		"--filter", "code=CASE_NOT_FOUND", "--max", "1", "--rate", "100", "--dry-run")
	require.NoError(t, err)
	require.Regexp(t, `--max reached: at least (1 more matching message remains|\d+ more matching messages remain) in the DLQ \(scanned \d+, \d+ matching\)`, out)
	require.NotContains(t, out, "at least 1 more matching messages")
	require.Contains(t, out, "dry run: nothing moved")

	out, _, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL,
		"--filter", "code=CASE_NOT_FOUND", "--max", "2", "--rate", "100")
	require.NoError(t, err)
	require.Contains(t, out, "moved 2 (at most 2)")
	require.Contains(t, out, "every matching message moved", "exactly --max matching: none remain")
	require.NotContains(t, out, "remain")

	out, _, err = runDLQCLI(t, "dlq", "redrive", "--dlq-url", qs.DLQURL, "--queue-url", qs.URL, "--filter", "code=NOPE", "--rate", "100")
	require.NoError(t, err)
	require.Contains(t, out, "no message in the DLQ matched (scanned 0, 0 matching)")
	require.Equal(t, 4, testenv.InspectQueue(t, qs.URL).Total())
}
