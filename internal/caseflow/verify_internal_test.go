package caseflow

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
)

// How a stage change of the single-write route is judged from its counter
// in the case item, its inbox record (a redelivery's) and what the workers
// reported: every history a kill, a duplicate or a late version can leave
// is accepted, and nothing else.
func TestSingleWriteState(t *testing.T) {
	w := WorkItem{Key: "stage-1", MessageType: TypeStageChanged, CaseID: "c1", Version: 2, Stage: "review", RequestHash: "v2:aa"}
	record := func(status inbox.Status, outcome, code string) *inbox.Record {
		return &inbox.Record{Status: status, Outcome: outcome, FailureCode: code, RequestHash: w.RequestHash}
	}
	applied, superseded := record(inbox.StatusCompleted, inbox.OutcomeApplied, ""), record(inbox.StatusCompleted, inbox.OutcomeSuperseded, "")
	tests := []struct {
		name     string
		rec      *inbox.Record
		got      int64 // its counter in the case item
		newest   int64 // its case's newest version
		reported map[string]int
		probes   int
		state    string
		problem  string // "" none; else a substring
		kind     problemKind
	}{
		{"fresh path: applied, no record", nil, 1, 2, map[string]int{"applied": 1}, 0, "APPLIED", "", problemNone},
		{"applied, then duplicates acked", nil, 1, 3, map[string]int{"applied": 1, "duplicate": 2, "superseded": 1}, 0, "APPLIED", "", problemNone},
		{"killed after the write: the redelivery found the fence", applied, 1, 2, map[string]int{"duplicate": 1}, 0, "APPLIED", "", problemNone},
		{"killed after the write, a newer version followed", superseded, 1, 3, map[string]int{"superseded": 1}, 0, "APPLIED", "", problemNone},
		{"the outcomes not known", nil, 1, 2, nil, 0, "APPLIED", "", problemNone},
		{"superseded on the fresh path", nil, 0, 3, map[string]int{"superseded": 2}, 0, "SUPERSEDED", "", problemNone},
		{"superseded on the gated path", superseded, 0, 3, map[string]int{"superseded": 1}, 0, "SUPERSEDED", "", problemNone},
		{"superseded on the gated path, then a copy found the record", superseded, 0, 3, map[string]int{"superseded": 1, "duplicate": 1}, 0, "SUPERSEDED", "", problemNone},
		{"superseded on the gated path, killed before its log line; the redelivery found the record", superseded, 0, 3, map[string]int{"duplicate": 1}, 0, "SUPERSEDED", "", problemNone},
		{"the newest probed: its probe's delivery is terminal", nil, 1, 2, map[string]int{"applied": 1, "terminal": 1}, 1, "APPLIED", "", problemNone},

		{"applied twice", nil, 2, 2, map[string]int{"applied": 1}, 0, "APPLIED", "applied 2 times", problemTwice},
		{"reported applied twice: the report is wrong, not the work", nil, 1, 2, map[string]int{"applied": 2}, 0, "APPLIED", "reported applied 2 times", problemReport},
		{"the newest not applied", nil, 0, 2, map[string]int{"superseded": 1}, 0, "no record", "newest stage change was not applied", problemState},
		{"acked as applied, not in the item: lost", nil, 0, 3, map[string]int{"applied": 1}, 0, "SUPERSEDED", "lost", problemState},
		{"acked as a duplicate, not in the item: lost", nil, 0, 3, map[string]int{"duplicate": 1, "superseded": 1}, 0, "SUPERSEDED", "lost", problemState},
		{"not applied and never reported superseded", nil, 0, 3, map[string]int{}, 0, "SUPERSEDED", "no record, and none of its messages reported superseded", problemState},
		{"an APPLIED record without the counter", applied, 0, 3, map[string]int{"duplicate": 1}, 0, "APPLIED", "not applied, yet its record is APPLIED", problemState},
		{"SUPERSEDED record for the newest", superseded, 1, 2, map[string]int{"superseded": 1}, 0, "APPLIED", "its record is SUPERSEDED", problemState},
		{"left PROCESSING", record(inbox.StatusProcessing, "", ""), 1, 3, nil, 0, "APPLIED", "its record is PROCESSING", problemState},
		{"terminal", record(inbox.StatusFailedTerminal, "", "CASE_NOT_FOUND"), 0, 3, map[string]int{"terminal": 1}, 0, "FAILED_TERMINAL:CASE_NOT_FOUND", "ended terminal", problemState},
		{"a record of other work under its key", &inbox.Record{Status: inbox.StatusFailedTerminal, FailureCode: "IDEMPOTENCY_HASH_MISMATCH", RequestHash: "v2:bb"},
			1, 2, map[string]int{"applied": 1, "terminal": 1}, 1, "FAILED_TERMINAL:IDEMPOTENCY_HASH_MISMATCH", "record hash", problemState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, problem, kind := singleWriteState(w, tt.rec, tt.got, tt.newest, tt.reported, tt.probes)
			require.Equal(t, tt.state, state)
			if tt.problem == "" {
				require.Empty(t, problem)
			} else {
				require.Contains(t, problem, tt.problem)
			}
			require.Equal(t, tt.kind, kind)
		})
	}
}

// A case item on the single-write route carries its newest stage change's
// fence and stage, and counts applications of its own versions only.
func TestCaseFence(t *testing.T) {
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	newest := WorkItem{Key: "stage-9", Version: 3, Stage: "appeal", RequestHash: "v2:cc"}
	ok := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{AttrStage: str("appeal"), AttrStageVersion: num("3"),
			ddbworker.FenceKeyAttr(AttrStageVersion): str("stage-9"), ddbworker.FenceHashAttr(AttrStageVersion): str("v2:cc"),
			StageApplicationsAttr(1): num("1"), StageApplicationsAttr(3): num("1")}
	}
	versions := map[int64]bool{1: true, 2: true, 3: true}
	require.Empty(t, caseFence("c1", ok(), newest, versions))

	it := ok()
	it[ddbworker.FenceKeyAttr(AttrStageVersion)] = str("stage-8")
	require.Len(t, caseFence("c1", it, newest, versions), 1, "fenced by other work")
	it = ok()
	it[ddbworker.FenceHashAttr(AttrStageVersion)] = str("v2:dd")
	require.Len(t, caseFence("c1", it, newest, versions), 1, "fenced by this key with another payload")
	it = ok()
	it[AttrStage] = str("intake")
	require.Len(t, caseFence("c1", it, newest, versions), 1, "another stage")
	it = ok()
	it[StageApplicationsAttr(4)] = num("1")
	require.Len(t, caseFence("c1", it, newest, versions), 1, "a version no stage change has")
	require.Empty(t, caseFence("c2", map[string]types.AttributeValue{AttrStage: str("intake")}, WorkItem{}, nil), "no stage change, no fence")
	require.Len(t, caseFence("c2", ok(), WorkItem{}, nil), 3, "a fence and counters without stage changes")
}
