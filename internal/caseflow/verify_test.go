package caseflow_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A plan consumed with the stage changes on the single-write route
// verifies, and VerifyWith finds what it must in the table it left: a
// version applied twice, the newest lost, a fence naming other work, a
// message reported applied whose work is not in the case item.
func TestVerifySingleWrite(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	plan, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: 300, Seed: 7, StageMismatches: true})
	require.NoError(t, err)
	require.NoError(t, caseflow.SeedCases(ctx, env.DynamoDB, env.Table, plan.CaseIDs))

	reg := ddbworker.NewRegistry()
	require.NoError(t, (&caseflow.Handlers{Table: env.Table, TrackApplications: true, SingleWriteStages: true}).Register(reg, ddbworker.Fused()))
	rt, ok := reg.Lookup(caseflow.TypeStageChanged)
	require.True(t, ok)
	require.True(t, rt.SingleWrite && !rt.Fused, "stage changes single-write, whatever the options say of the commit")
	rt, _ = reg.Lookup(caseflow.TypeDeadline)
	require.True(t, rt.Fused, "the other types as the options say")

	var mu sync.Mutex
	finals := 0
	outcomes := map[string]map[string]int{}
	w, err := worker.New(worker.Deps{DynamoDB: env.DynamoDB, SQS: env.SQS, Handlers: reg, Logger: slog.New(slog.DiscardHandler),
		OnEvent: func(ev worker.Event) {
			if !ev.Final {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			finals++
			if outcomes[ev.IdempotencyKey] == nil {
				outcomes[ev.IdempotencyKey] = map[string]int{}
			}
			outcomes[ev.IdempotencyKey][ev.Outcome]++
		}}, worker.Config{Store: inbox.Store{Table: env.Table}, QueueURL: env.Queues.URL, DLQURL: env.Queues.DLQURL,
		Concurrency: 8, VisibilityTimeout: 10 * time.Second, WaitTime: time.Second})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	sent := 0
	for phase := 1; phase <= 2; phase++ {
		msgs := plan.Phase(phase)
		send(t, env.SQS, env.Queues.URL, msgs)
		sent += len(msgs)
		testenv.Eventually(t, time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return finals == sent
		}, "phase %d did not settle", phase)
	}
	stop()
	require.NoError(t, <-done)

	opts := caseflow.VerifyOptions{SingleWriteStages: true, Outcomes: outcomes}
	report, err := caseflow.VerifyWith(ctx, env.DynamoDB, env.Table, plan, opts)
	require.NoError(t, err)
	require.True(t, report.OK(), "violations: %v", report.Violations)
	require.Positive(t, report.SingleWrite["APPLIED, no record"], report.SingleWrite)
	require.Positive(t, report.SingleWrite["SUPERSEDED, no record"], "out-of-order stage changes superseded: %v", report.SingleWrite)
	require.Positive(t, report.Rejections["IDEMPOTENCY_HASH_MISMATCH"], "the stage probe refused by the fence")
	require.Equal(t, len(plan.Work), report.WorkStates["APPLIED"]+report.WorkStates["SUPERSEDED"]+report.WorkStates["FAILED_TERMINAL:CASE_NOT_FOUND"])

	plain, err := caseflow.Verify(ctx, env.DynamoDB, env.Table, plan, nil)
	require.NoError(t, err)
	require.False(t, plain.OK(), "read as the default routes, the stage changes have no records")

	// The newest stage change of a case with an older one superseded.
	newest := map[string]caseflow.WorkItem{}
	var older caseflow.WorkItem
	for _, w := range plan.Work {
		if w.MessageType == caseflow.TypeStageChanged && w.Version > newest[w.CaseID].Version {
			newest[w.CaseID] = w
		}
	}
	for _, w := range plan.Work {
		if w.MessageType == caseflow.TypeStageChanged && w.Version < newest[w.CaseID].Version && outcomes[w.Key]["superseded"] > 0 &&
			outcomes[w.Key]["applied"] == 0 {
			older = w
			break
		}
	}
	require.NotEmpty(t, older.Key, "a superseded stage change")
	top := newest[older.CaseID]
	set := func(attr string, v ddbtypes.AttributeValue) func() {
		key := caseflow.CaseKey(top.CaseID)
		item, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), Key: key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		put := func(it map[string]ddbtypes.AttributeValue) {
			_, err := env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: it})
			require.NoError(t, err)
		}
		changed := map[string]ddbtypes.AttributeValue{}
		for k, x := range item.Item {
			changed[k] = x
		}
		if v == nil {
			delete(changed, attr)
		} else {
			changed[attr] = v
		}
		put(changed)
		return func() { put(item.Item) }
	}
	violated := func(o caseflow.VerifyOptions, want string) {
		t.Helper()
		r, err := caseflow.VerifyWith(ctx, env.DynamoDB, env.Table, plan, o)
		require.NoError(t, err)
		require.False(t, r.OK(), "want a violation with %q", want)
		require.True(t, strings.Contains(strings.Join(r.Violations, "\n"), want), "want %q in %v", want, r.Violations)
	}
	num := func(n int) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(n)} }

	undo := set(caseflow.StageApplicationsAttr(top.Version), num(2))
	violated(opts, "applied 2 times")
	undo()
	undo = set(caseflow.StageApplicationsAttr(top.Version), nil)
	violated(opts, "newest stage change was not applied")
	undo()
	undo = set(caseflow.StageApplicationsAttr(99), num(1))
	violated(opts, "which no stage change has")
	undo()
	undo = set(ddbworker.FenceKeyAttr(caseflow.AttrStageVersion), &ddbtypes.AttributeValueMemberS{Value: older.Key})
	violated(opts, "want its newest stage change")
	undo()
	reported := cloneOutcomes(outcomes)
	reported[older.Key] = map[string]int{"applied": 1}
	violated(caseflow.VerifyOptions{SingleWriteStages: true, Outcomes: reported}, "yet not applied (lost)")
	reported[older.Key] = map[string]int{"duplicate": 1, "superseded": 1}
	violated(caseflow.VerifyOptions{SingleWriteStages: true, Outcomes: reported}, "yet not applied (lost)")
	delete(reported, older.Key)
	violated(caseflow.VerifyOptions{SingleWriteStages: true, Outcomes: reported}, "none of its messages reported superseded")

	report, err = caseflow.VerifyWith(ctx, env.DynamoDB, env.Table, plan, opts)
	require.NoError(t, err)
	require.True(t, report.OK(), "the table restored: %v", report.Violations)
}

func cloneOutcomes(in map[string]map[string]int) map[string]map[string]int {
	out := map[string]map[string]int{}
	for k, m := range in {
		out[k] = map[string]int{}
		for o, n := range m {
			out[k][o] = n
		}
	}
	return out
}

func send(t *testing.T, q *sqs.Client, url string, msgs []caseflow.Message) {
	t.Helper()
	for start := 0; start < len(msgs); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, m := range msgs[start:min(start+10, len(msgs))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.Body)})
		}
		out, err := q.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
}
