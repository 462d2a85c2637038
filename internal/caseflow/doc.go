// Package caseflow is ddbworker's example domain, shared by the demo, the
// tests and the benchmark: case-management work from the reference text.
//
//   - CaseDeadlineCalculationRequested computes an SLA deadline from the
//     stage and effectiveAt, updates the case (deadlineVersion + 1; the case
//     must exist, else terminal CASE_NOT_FOUND) and upserts a deadline item.
//   - CaseStageChanged carries aggregateVersion: the case's stageVersion only
//     moves forward; an older version arriving late completes as SUPERSEDED
//     and the state never rolls back.
//   - LedgerEntryRequested creates a ledger entry once per source event
//     (create-only) and adds its amount to the case balance.
//   - CaseNoteRecorded, the benchmark's message, updates the case item's
//     last note (Note), or keeps only the newest note by its version
//     (NoteInOrder, for the single-write route).
//
// With TrackApplications, every applied work item also increments its own
// application counter inside the same transaction, so a double apply is
// visible in the table. With SingleWriteStages, CaseStageChanged runs on
// the single-write route (ddbworker.SingleWrite), its counter an attribute
// of the case item (StageApplicationsAttr). The package also builds example messages and
// checks the exactly-once invariant against DynamoDB.
//
// It owns nothing of the protocol: it only returns writes to the worker.
package caseflow
