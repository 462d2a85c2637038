package caseflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/example/caseflow"
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
