package chaos

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
)

// planIDs gives every plan message an SQS id "s<index>".
func planIDs(p *caseflow.Plan) map[string]int {
	sent := map[string]int{}
	for i := range p.Messages {
		sent[fmt.Sprintf("s%d", i)] = i
	}
	return sent
}

// perfectDLQ is one copy of every message that must end terminal.
func perfectDLQ(p *caseflow.Plan) []DLQCopy {
	var out []DLQCopy
	for i := range p.Messages {
		if code := expectedCode(p, i); code != "" {
			out = append(out, DLQCopy{SourceID: fmt.Sprintf("s%d", i), Code: code})
		}
	}
	return out
}

func TestCheckDLQ(t *testing.T) {
	p, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: 600, Seed: 3})
	require.NoError(t, err)
	sent := planIDs(p)
	want := 0
	for _, n := range p.TerminalMessages() {
		want += n
	}
	require.Positive(t, want)

	copies := perfectDLQ(p)
	st, missing, unexpected := CheckDLQ(p, sent, copies)
	require.Empty(t, missing)
	require.Empty(t, unexpected)
	require.Equal(t, DLQStats{Copies: want, Sources: want, Expected: want, ByCode: st.ByCode}, st)
	byCode := map[string]int{}
	for code, n := range p.TerminalMessages() {
		byCode[code] = n
	}
	require.Equal(t, byCode, st.ByCode)

	t.Run("a second copy of one source is legitimate", func(t *testing.T) {
		st, missing, unexpected := CheckDLQ(p, sent, append(append([]DLQCopy(nil), copies...), copies[0]))
		require.Empty(t, missing)
		require.Empty(t, unexpected)
		require.Equal(t, 1, st.Extra)
		require.Equal(t, want+1, st.Copies)
		require.Equal(t, want, st.Sources)
	})
	t.Run("a missing copy", func(t *testing.T) {
		_, missing, unexpected := CheckDLQ(p, sent, copies[1:])
		require.Len(t, missing, 1)
		require.Contains(t, missing[0], copies[0].SourceID)
		require.Contains(t, missing[0], "no copy")
		require.Empty(t, unexpected)
	})
	t.Run("a copy with the wrong code", func(t *testing.T) {
		bad := append([]DLQCopy(nil), copies...)
		bad[0].Code = "MAX_ATTEMPTS_EXCEEDED"
		_, missing, _ := CheckDLQ(p, sent, bad)
		require.Len(t, missing, 1)
		require.Contains(t, missing[0], "a DLQ copy has MAX_ATTEMPTS_EXCEEDED")
	})
	t.Run("a copy of work that must apply", func(t *testing.T) {
		var applied string
		for id, i := range sent {
			if expectedCode(p, i) == "" {
				applied = id
				break
			}
		}
		_, missing, unexpected := CheckDLQ(p, sent, append(append([]DLQCopy(nil), copies...), DLQCopy{SourceID: applied, Code: "MAX_ATTEMPTS_EXCEEDED"}))
		require.Empty(t, missing)
		require.Len(t, unexpected, 1)
		require.Contains(t, unexpected[0], "must not end terminal")
	})
	t.Run("a message the redrive policy moved", func(t *testing.T) {
		var healthy string
		for id, i := range sent {
			if expectedCode(p, i) == "" {
				healthy = id
				break
			}
		}
		moved := append(append([]DLQCopy(nil), copies...), DLQCopy{SourceID: healthy, Code: dlq.CodeNone, Redrive: true})
		st, missing, unexpected := CheckDLQ(p, sent, moved)
		require.Empty(t, missing)
		require.Empty(t, unexpected, "not a terminal policy's copy: DeadLettered reports it")
		require.Equal(t, 1, st.Redriven)
		require.Equal(t, []string{healthy}, DeadLettered(p, sent, append(moved, moved[len(moved)-1])))

		// Poison moved by the redrive policy instead of the worker's copy:
		// its copy has no code.
		poison := append([]DLQCopy(nil), copies...)
		poison[0] = DLQCopy{SourceID: copies[0].SourceID, Code: dlq.CodeNone, Redrive: true}
		_, missing, _ = CheckDLQ(p, sent, poison)
		require.Len(t, missing, 1)
		require.Contains(t, missing[0], "a DLQ copy has "+dlq.CodeNone)
		require.Empty(t, DeadLettered(p, sent, poison), "poison is not healthy")
	})
	t.Run("a copy of a message nobody sent", func(t *testing.T) {
		_, _, unexpected := CheckDLQ(p, sent, append(append([]DLQCopy(nil), copies...), DLQCopy{SourceID: "other", Code: "X"}))
		require.Len(t, unexpected, 1)
		require.Contains(t, unexpected[0], "not a message this run sent")
	})
}

func TestExpectedCode(t *testing.T) {
	p, err := caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: 600, Seed: 3})
	require.NoError(t, err)
	got := map[string]int{}
	for i := range p.Messages {
		if c := expectedCode(p, i); c != "" {
			got[c]++
		}
	}
	require.Equal(t, p.TerminalMessages(), got, "expectedCode agrees with Plan.TerminalMessages")
}
