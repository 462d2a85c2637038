package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/effects"
)

// The effects command's own checks, before any AWS call (the commands
// against a table are exercised through a real service binary in package
// effects' kill -9 tests).
func TestEffectsCommandChecksFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"resolve", "k", "--reason", "r"}, "exactly one of --completed"},
		{[]string{"resolve", "k", "--completed", "--not-done", "--ref", "x", "--reason", "r"}, "exactly one of --completed"},
		{[]string{"resolve", "k", "--completed", "--reason", "r"}, "--completed needs --ref"},
		{[]string{"resolve", "k", "--not-done", "--ref", "x", "--reason", "r"}, "--not-done takes no --ref"},
		{[]string{"resolve", "k", "--not-done", "--reason", " "}, "--reason is required"},
		{[]string{"resolve", "k", "--not-done", "--reason", "r", "-o", "yaml"}, "table or json"},
		{[]string{"resolve"}, "accepts 1 arg"},
		{[]string{"list", "--limit", "0"}, "--limit 0 must be within"},
		{[]string{"list", "-o", "xml"}, "table or json"},
		{[]string{"get", "a", "b"}, "accepts 1 arg"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := Command(App{Name: "ddbworker"})
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"effects", "--table", "t"}, tc.args...))
			require.ErrorContains(t, cmd.Execute(), tc.want)
		})
	}
}

func TestEffectsOutput(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	es := []*effects.Effect{
		{Key: "OrderPaid/o-1/charge", Status: effects.StatusCompleted, Provider: "payments", Operation: "charge", ProviderRef: "ch_1",
			Calls: 1, StartedAt: "2026-03-01T11:00:00.000Z", CompletedAt: "2026-03-01T11:00:01.000Z", CommittedAt: "2026-03-01T11:00:02.000Z"},
		{Key: "OrderPaid/o-2/charge", Status: effects.StatusUnknown, Provider: "legacy", Operation: "charge", Calls: 1,
			StartedAt: "2026-03-01T11:00:00.000Z", UnknownAt: "2026-03-01T11:00:05.000Z", CallExpiresAt: now.Add(-time.Minute)},
		{Key: "OrderPaid/o-3/charge", Status: effects.StatusFailed, Provider: "payments", Operation: "charge", FailureCode: "CARD_DECLINED", Calls: 1},
	}
	var table bytes.Buffer
	effectsPrintTable(&table, es, "CUR")
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	require.Len(t, lines, 5)
	require.Regexp(t, `^KEY\s+STATUS\s+PROVIDER\s+OPERATION\s+REF/CODE\s+CALLS`, lines[0])
	require.Regexp(t, `^OrderPaid/o-1/charge\s+COMPLETED\s+payments\s+charge\s+ch_1\s+1\s+2026-03-01T11:00:00.000Z\s+2026-03-01T11:00:01.000Z\s+2026-03-01T11:00:02.000Z$`, lines[1])
	require.Regexp(t, `^OrderPaid/o-2/charge\s+UNKNOWN\s+legacy\s+charge\s+-\s+1\s+\S+\s+2026-03-01T11:00:05.000Z\s+-$`, lines[2])
	require.Regexp(t, `^OrderPaid/o-3/charge\s+FAILED\s+payments\s+charge\s+CARD_DECLINED\s`, lines[3])
	require.Equal(t, "next page: --cursor CUR", lines[4])

	var detail bytes.Buffer
	effectsPrintDetail(&detail, es[1], now)
	require.Contains(t, detail.String(), "(over)")
	require.Contains(t, detail.String(), "none (kept until resolved)")

	var js bytes.Buffer
	require.NoError(t, effectsWriteJSON(&js, es[:1], ""))
	require.Contains(t, js.String(), `"effectKey": "OrderPaid/o-1/charge"`)
	require.Contains(t, js.String(), `"providerRef": "ch_1"`)
	require.Contains(t, js.String(), `"next": ""`)
}
