package caseflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
)

func TestGeneratePlan(t *testing.T) {
	for _, n := range []int{100, 2000, 10000} {
		p, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: n, Seed: 3})
		require.NoError(t, err)
		require.Len(t, p.Messages, n, "exactly the messages asked for")
		require.Equal(t, int(float64(n)*0.3), p.Duplicates)
		require.GreaterOrEqual(t, float64(p.Duplicates)/float64(n), 0.25)
		terminal := 0
		for _, c := range p.TerminalMessages() {
			terminal += c
		}
		require.Positive(t, terminal)
		require.Positive(t, p.OutOfOrder)
		copies := 0
		for _, w := range p.Work {
			copies += w.Copies
		}
		require.Equal(t, n-len(p.PoisonList), copies, "every non-poison message carries one work item")

		again, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: n, Seed: 3})
		require.NoError(t, err)
		require.Equal(t, p.OutOfOrder, again.OutOfOrder, "the same seed gives the same plan")
		require.Equal(t, len(p.Work), len(again.Work))
		for i := range p.Work {
			require.Equal(t, p.Work[i].Key, again.Work[i].Key)
			require.Equal(t, p.Work[i].RequestHash, again.Work[i].RequestHash)
			require.Equal(t, p.Work[i].Expect, again.Work[i].Expect)
		}
	}
	_, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: 10, Poison: 9})
	require.Error(t, err)
}

// With StageMismatches, half the hash-mismatch probes (rounded up) re-send
// a case's newest stage change with another stage: same key and version,
// other work.
func TestGeneratePlanStageMismatches(t *testing.T) {
	for _, n := range []int{600, 2000} {
		p, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: n, Seed: 3, StageMismatches: true})
		require.NoError(t, err)
		require.Len(t, p.Messages, n)
		newest := map[string]int64{}
		byKey := map[string]caseflow.WorkItem{}
		for _, w := range p.Work {
			byKey[w.Key] = w
			if w.MessageType == caseflow.TypeStageChanged {
				newest[w.CaseID] = max(newest[w.CaseID], w.Version)
			}
		}
		dec, err := envelope.NewDecoder(envelope.Config{})
		require.NoError(t, err)
		var stage, deadline int
		for _, m := range p.Messages {
			if m.Poison < 0 || p.PoisonList[m.Poison].Key == "" {
				continue
			}
			require.Equal(t, 2, m.Phase, "a probe comes after the work whose key it reuses")
			w := byKey[p.PoisonList[m.Poison].Key]
			env, err := dec.Decode([]byte(m.Body))
			require.NoError(t, err)
			require.Equal(t, w.MessageType, env.MessageType)
			require.NotEqual(t, w.RequestHash, env.RequestHash, "other work under the key")
			switch w.MessageType {
			case caseflow.TypeStageChanged:
				stage++
				require.Equal(t, newest[w.CaseID], w.Version, "the case's newest stage change")
				require.Equal(t, w.Version, *env.AggregateVersion)
			case caseflow.TypeDeadline:
				deadline++
			}
		}
		mismatches := max(1, max(6, n/100)/6)
		require.Equal(t, (mismatches+1)/2, stage, n)
		require.Equal(t, mismatches-stage, deadline, n)
	}
}
