package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// labelValues returns, per value of label in family, how many series
// carry it.
func labelValues(m *metricstest.Provider, family, label string) map[string]int {
	out := map[string]int{}
	for _, series := range m.Series(family) {
		if v, ok := series[label]; ok {
			out[v]++
		}
	}
	return out
}

// Old behaviour: metric labels took producer and handler input as it came:
// every messageType a producer sent became a message_type value, every
// failure code a handler returned a code value, and a handler's own outcome
// an outcome value — unbounded series, a Prometheus cardinality blow-up a
// single bad producer could cause. The test sends 30 unregistered types,
// 150 distinct valid failure codes, two invalid ones and 150 handler-chosen
// outcomes, and requires the label values to stay within their bounds:
// registered types plus "(unknown)" (and "" for undecodable bodies), at
// most 100 codes plus OTHER, and only the worker's own outcomes.
func TestRegressMetricLabelsBounded(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	const unknownTypes, codes = 30, 150
	invalid := map[string]string{"k-lower": "lower-case", "k-long": strings.Repeat("A", 100)}
	codeOf := func(key string) string {
		if c, ok := invalid[key]; ok {
			return c
		}
		var i int
		_, err := fmt.Sscanf(key, "k-code-%d", &i)
		require.NoError(t, err)
		return fmt.Sprintf("CODE_%03d", i)
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(_ context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		key := m.Envelope.IdempotencyKey
		mu.Lock()
		first := !failed[key]
		failed[key] = true
		mu.Unlock()
		if first {
			return ddbworker.Result{}, failure.NewRetryable(codeOf(key), "the pricing service said no")
		}
		return ddbworker.Result{Outcome: "chosen-" + key}, nil // a handler's own outcome, one per message
	})))
	metrics := metricstest.New()
	cfg := h.testConfig()
	cfg.Concurrency = 16
	cfg.Backoff = worker.Backoff{Base: 500 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	h.start(cfg, worker.Deps{Handlers: reg, Metrics: metrics})

	var envs []*envelope.Envelope
	for i := range unknownTypes {
		e := mustEnv(t)(caseflow.NewDeadlineRequest(fmt.Sprintf("k-type-%d", i), "c1", "intake", effective))
		e.MessageType = fmt.Sprintf("Unregistered.Type%d", i)
		envs = append(envs, e)
	}
	for i := range codes {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest(fmt.Sprintf("k-code-%d", i), "c1", "intake", effective)))
	}
	for key := range invalid {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest(key, "c1", "intake", effective)))
	}
	h.send(envs...)

	evs := h.waitEvents(len(envs), 90*time.Second, final)
	outcomes := map[string]int{}
	for _, ev := range evs {
		outcomes[ev.Outcome]++
	}
	require.Equal(t, unknownTypes, outcomes[worker.OutcomeTerminal], "the unregistered types ended terminal: %v", outcomes)
	require.Equal(t, codes+len(invalid), len(evs)-outcomes[worker.OutcomeTerminal], "the failing ones were applied on their second attempt")

	types := labelValues(metrics, "ddbworker_messages_total", "message_type")
	require.Contains(t, types, "(unknown)")
	require.Contains(t, types, caseflow.TypeDeadline)
	require.LessOrEqual(t, len(types), len(reg.Types())+2, "message_type values: %v", types)

	outcomeLabels := labelValues(metrics, "ddbworker_messages_total", "outcome")
	known := []string{worker.OutcomeApplied, worker.OutcomeDuplicate, worker.OutcomeSuperseded, worker.OutcomeInFlight, worker.OutcomeRetry,
		worker.OutcomeTerminal, worker.OutcomeDeferred, worker.OutcomeLeaseLost, worker.OutcomeReleased, worker.OutcomeParked}
	for o := range outcomeLabels {
		require.Contains(t, known, o, "a handler's own outcome became a label value")
	}
	require.Contains(t, outcomeLabels, worker.OutcomeApplied)

	codeLabels := labelValues(metrics, "ddbworker_failures_total", "code")
	// 100 handler codes, OTHER, and the worker's and envelope's own codes
	// (UNKNOWN_MESSAGE_TYPE here; under load an infrastructure code such as
	// TIMEOUT may show too), which are never pushed out.
	builtin := []string{"OTHER", failure.CodeUnknownMessageType, failure.CodeThrottled, failure.CodeTimeout,
		failure.CodeServiceUnavailable, failure.CodeTransactionConflict, failure.CodeMessageTimeout, failure.CodeShutdown}
	handlerCodes := 0
	for c := range codeLabels {
		if strings.HasPrefix(c, "CODE_") {
			handlerCodes++
			continue
		}
		require.Contains(t, builtin, c, "a code label that is neither a handler's nor the worker's own")
	}
	require.Equal(t, 100, handlerCodes, "handler code values beyond 100 go to OTHER (of %d labels)", len(codeLabels))
	require.Contains(t, codeLabels, "UNKNOWN_MESSAGE_TYPE", "a built-in code keeps its label after 100 handler codes")
	require.Contains(t, codeLabels, "OTHER")
	require.NotContains(t, codeLabels, "lower-case")
	require.NotContains(t, codeLabels, strings.Repeat("A", 100))
	failureTypes := labelValues(metrics, "ddbworker_failures_total", "message_type")
	require.LessOrEqual(t, len(failureTypes), len(reg.Types())+2, "failures message_type values: %v", failureTypes)
	require.Contains(t, failureTypes, "(unknown)")
}
