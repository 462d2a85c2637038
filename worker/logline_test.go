package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/logevent"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// signalledReceives tells when a long poll is in flight.
type signalledReceives struct {
	worker.SQSAPI
	polling chan struct{}
}

func (s *signalledReceives) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	select {
	case s.polling <- struct{}{}:
	default:
	}
	return s.SQSAPI.ReceiveMessage(ctx, in, optFns...)
}

// An idle worker in a 20 s long poll stops within 2 s of its context's
// end: shutdown cancels the poll. The queue's other visibility timeout is
// warned about once, however long the worker runs.
func TestIdleWorkerStopsWithinTwoSeconds(t *testing.T) {
	h := newHarness(t, testenv.Options{}) // the queue's visibility timeout: 2s
	cfg := h.testConfig()
	cfg.WaitTime = 20 * time.Second
	cfg.VisibilityTimeout = 3 * time.Second
	logs := &testenv.Buffer{}
	sq := &signalledReceives{SQSAPI: h.sqs, polling: make(chan struct{}, 1)}
	r := h.start(cfg, worker.Deps{SQS: sq, Handlers: h.caseHandlers(), Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	select {
	case <-sq.polling:
	case <-time.After(10 * time.Second):
		t.Fatal("no long poll within 10s")
	}
	start := time.Now()
	r.Stop()
	require.Less(t, time.Since(start), 2*time.Second, "an idle worker stops within 2s, not after its 20s long poll")
	require.Equal(t, 1, strings.Count(logs.String(), "the queue's visibility timeout differs"), "said once")
}

// The delivery's log line: its outcome's event as msg, the reference
// design's fields, the commit's time apart from the delivery's, and no
// empty error.
func TestDeliveryLogLine(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("case-1")
	logs := &testenv.Buffer{}
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers(), Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	e := mustEnv(t)(caseflow.NewDeadlineRequest("k-log-1", "case-1", "intake", effective))
	e.CorrelationID = "corr-1"
	h.send(e)
	h.waitEvents(1, 30*time.Second, final)
	h.send(e) // after the first settled: a duplicate, not in flight
	h.waitEvents(2, 30*time.Second, final)

	var lines []map[string]any
	for _, l := range logs.Lines() {
		require.NotContains(t, l, `"error":"<nil>"`)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, logevent.Prefix) {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 2)
	byEvent := map[string]map[string]any{}
	for _, l := range lines {
		byEvent[l["msg"].(string)] = l
	}
	done, dup := byEvent[logevent.Completed], byEvent[logevent.Duplicate]
	require.NotNil(t, done, "%v", lines)
	require.NotNil(t, dup, "%v", lines)
	for _, l := range []map[string]any{done, dup} {
		for _, field := range []string{"queue", "sqsMessageId", "messageType", "idempotencyKey", "aggregateId", "correlationId",
			"receiveCount", "processingMs", "dbTransactionMs", "result"} {
			require.Contains(t, l, field)
		}
		require.Equal(t, worker.QueueName(h.env.Queues.URL), l["queue"])
		require.Equal(t, "k-log-1", l["idempotencyKey"])
		require.Equal(t, "corr-1", l["correlationId"])
	}
	require.Equal(t, worker.OutcomeApplied, done["result"])
	require.Equal(t, worker.OutcomeDuplicate, dup["result"])
	require.Positive(t, done["dbTransactionMs"].(float64)+done["processingMs"].(float64)+1, "numbers")
	require.LessOrEqual(t, done["dbTransactionMs"].(float64), done["processingMs"].(float64), "the commit is part of the delivery")
	require.Zero(t, dup["dbTransactionMs"], "a duplicate commits nothing")
}

func TestLogEventPerOutcome(t *testing.T) {
	for outcome, want := range map[string]string{
		worker.OutcomeApplied: logevent.Completed, "already_recorded": logevent.Completed,
		worker.OutcomeDuplicate: logevent.Duplicate, worker.OutcomeSuperseded: logevent.Superseded,
		worker.OutcomeInFlight: logevent.InFlight, worker.OutcomeRetry: logevent.Retry,
		worker.OutcomeTerminal: logevent.Terminal, worker.OutcomeDeferred: logevent.Deferred,
		worker.OutcomeLeaseLost: logevent.LeaseLost, worker.OutcomeReleased: logevent.Released,
		worker.OutcomeParked: logevent.Parked,
	} {
		require.Equal(t, want, worker.LogEvent(outcome), outcome)
	}
}
