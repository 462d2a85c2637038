package caseflow

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
)

// ScanAPI is what Verify needs of DynamoDB.
type ScanAPI interface {
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Report is the invariant check of a plan against the table (and the DLQ).
type Report struct {
	// Work items by final state: APPLIED, SUPERSEDED, FAILED_TERMINAL:<code>…
	WorkStates map[string]int
	// Rejection records by code.
	Rejections map[string]int
	// SingleWrite are the stage changes of the single-write route
	// (VerifyOptions.SingleWriteStages) by state and inbox record: a
	// record only when a redelivery took the gated path.
	SingleWrite map[string]int
	// DLQ messages by failure code.
	DLQ map[string]int
	// Checks run and violations found.
	Checks     []string
	Violations []string
}

// OK reports whether every invariant held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) check(name string, violations []string) {
	status := "ok"
	if len(violations) > 0 {
		status = fmt.Sprintf("FAILED (%d)", len(violations))
		if len(violations) > 10 {
			violations = append(violations[:10], fmt.Sprintf("… and %d more", len(violations)-10))
		}
		r.Violations = append(r.Violations, violations...)
	}
	r.Checks = append(r.Checks, name+": "+status)
}

// VerifyOptions say how a plan was consumed and what else was observed.
type VerifyOptions struct {
	// DLQ is the failure code of each DLQ message; nil: not checked.
	DLQ []string
	// SingleWriteStages says the stage changes ran on the single-write
	// route with their application counters in the case item
	// (Handlers.SingleWriteStages with TrackApplications).
	SingleWriteStages bool
	// Outcomes are the final outcomes the workers reported for the
	// messages of each idempotency key (their log lines), how often each;
	// nil: not checked. With SingleWriteStages they decide what the table
	// alone cannot: see VerifyWith.
	Outcomes map[string]map[string]int
}

// Verify is VerifyWith with the DLQ's failure codes (nil: not checked)
// and the default routes.
func Verify(ctx context.Context, api ScanAPI, table string, plan *Plan, dlq []string) (*Report, error) {
	return VerifyWith(ctx, api, table, plan, VerifyOptions{DLQ: dlq})
}

// VerifyWith reads the whole table and checks, against plan:
//   - every work item expected to apply was applied exactly once (its
//     application counter is 1 and its inbox record COMPLETED/APPLIED);
//   - out-of-order versions were applied or SUPERSEDED (counter 1 or absent)
//     and each case's stage version is the highest version sent: no rollback;
//   - deadline versions and balances equal what the applied work adds up to;
//   - no application counter exceeds 1 and none exists without its work;
//   - no record is left PROCESSING or FAILED_RETRYABLE;
//   - every poison message is accounted for by a rejection record with its
//     code, every CASE_NOT_FOUND work item is FAILED_TERMINAL;
//   - when the DLQ is given (failure code of each DLQ message), it holds
//     exactly the terminal messages the plan implies, by code.
//
// With SingleWriteStages a stage change has no inbox record unless a
// redelivery took the gated path, and its application counter is the case
// item's StageApplicationsAttr of its version. A stage change is then
// applied exactly once when its counter is 1 and its record, if any, is
// COMPLETED (APPLIED, or SUPERSEDED when a redelivery found a newer version
// there); it is superseded when its counter is absent, its version is not
// its case's newest and its record, if any, is SUPERSEDED. A case's newest
// stage change must be applied, and the case item must carry its fence
// (ddbworker.FenceKeyAttr and FenceHashAttr of AttrStageVersion: the
// stage version's own), its version and its stage. With Outcomes, a
// superseded stage change must have been reported applied by none of its
// messages; without a record, also duplicate by none (only the fence
// reports that then, naming this work; with one, the gate reports any
// COMPLETED record a duplicate) and superseded by at least one (the fresh
// path's verdict is then its only account; with one, the record SUPERSEDED
// is). A message reported done whose work is not in the table is lost. An
// applied one reported applied more than once breaks its own check: the
// table shows one application, so a worker's account of the others is
// wrong (the worker once reported its own completion of a duplicate,
// after a lost response, as an application).
func VerifyWith(ctx context.Context, api ScanAPI, table string, plan *Plan, opts VerifyOptions) (*Report, error) {
	items, err := scanAll(ctx, api, table)
	if err != nil {
		return nil, err
	}
	r := &Report{WorkStates: map[string]int{}, Rejections: map[string]int{}, DLQ: map[string]int{}, SingleWrite: map[string]int{}}
	store, err := inbox.Store{Table: table}.WithDefaults() // the example table: ddbworker's default layout
	if err != nil {
		return nil, err
	}
	records := map[string]*inbox.Record{} // key|type
	apps := map[string]int64{}            // key|type → applications
	cases := map[string]map[string]types.AttributeValue{}
	var stuck []string
	for _, it := range items {
		pk, sk := s(it, AttrPK), s(it, AttrSK)
		switch {
		case strings.HasPrefix(pk, "IDEMP#") || strings.HasPrefix(pk, "REJECT#"):
			rec, err := store.Decode(it)
			if err != nil {
				return nil, err
			}
			if rec.Rejection {
				r.Rejections[rec.FailureCode]++
				continue
			}
			records[rec.Key+"|"+rec.MessageType] = rec
			if rec.Status == inbox.StatusProcessing || rec.Status == inbox.StatusFailedRetryable {
				stuck = append(stuck, fmt.Sprintf("%s %s is %s", rec.Key, rec.MessageType, rec.Status))
			}
		case strings.HasPrefix(pk, "CASE#") && sk == "CASE":
			cases[strings.TrimPrefix(pk, "CASE#")] = it
		case strings.HasPrefix(pk, "CASE#") && strings.HasPrefix(sk, "APPLIED#"):
			typ, key, _ := strings.Cut(strings.TrimPrefix(sk, "APPLIED#"), "#")
			apps[key+"|"+typ] = n(it, AttrApplications)
		}
	}

	var once, states, versions, sums, orphans, fences, reports []string
	wantStage := map[string]int64{}
	wantDeadlines := map[string]int64{}
	wantBalance := map[string]int64{}
	known := map[string]bool{}
	// Any stage change but a case's newest may be overtaken by a newer one
	// processed first (concurrency, redelivery order): it must then be
	// SUPERSEDED, never applied after the newer one. The newest must apply.
	newest := map[string]int64{}
	for _, w := range plan.Work {
		if w.MessageType == TypeStageChanged {
			newest[w.CaseID] = max(newest[w.CaseID], w.Version)
		}
	}
	newestWork := map[string]WorkItem{}
	probes := map[string]int{} // key → the hash-mismatch probes that reuse it
	for _, p := range plan.PoisonList {
		if p.Key != "" {
			probes[p.Key]++
		}
	}
	for _, w := range plan.Work {
		if w.MessageType == TypeStageChanged && w.Expect == ExpectApplied && w.Version < newest[w.CaseID] {
			w.Expect = ExpectMaySupersede
		}
		id := w.Key + "|" + w.MessageType
		known[id] = true
		rec := records[id]
		if opts.SingleWriteStages && w.MessageType == TypeStageChanged {
			if w.Version == newest[w.CaseID] {
				newestWork[w.CaseID] = w
			}
			got := n(cases[w.CaseID], StageApplicationsAttr(w.Version))
			var reported map[string]int
			if opts.Outcomes != nil {
				reported = opts.Outcomes[w.Key]
				if reported == nil {
					reported = map[string]int{}
				}
			}
			state, problem, kind := singleWriteState(w, rec, got, newest[w.CaseID], reported, probes[w.Key])
			r.WorkStates[state]++
			held := "no record"
			if rec != nil {
				held = "record " + string(rec.Status)
				if rec.Outcome != "" {
					held += " " + rec.Outcome
				}
			}
			r.SingleWrite[state+", "+held]++
			switch {
			case kind == problemTwice:
				once = append(once, problem)
			case kind == problemState:
				states = append(states, problem)
			case kind == problemReport:
				reports = append(reports, problem)
			}
			wantStage[w.CaseID] = max(wantStage[w.CaseID], w.Version)
			if got := apps[id]; got != 0 {
				once = append(once, fmt.Sprintf("%s %s: an application item (=%d) beside the single write", w.Key, w.MessageType, got))
			}
			continue
		}
		if rec == nil {
			states = append(states, fmt.Sprintf("%s %s: no inbox record (work lost)", w.Key, w.MessageType))
			continue
		}
		state := string(rec.Status)
		if rec.Status == inbox.StatusCompleted {
			state = rec.Outcome
		} else if rec.FailureCode != "" {
			state += ":" + rec.FailureCode
		}
		r.WorkStates[state]++
		got := apps[id]
		switch w.Expect {
		case ExpectApplied, ExpectMaySupersede:
			applied := rec.Status == inbox.StatusCompleted && rec.Outcome == inbox.OutcomeApplied
			superseded := rec.Status == inbox.StatusCompleted && rec.Outcome == inbox.OutcomeSuperseded
			switch {
			case applied && got != 1:
				once = append(once, fmt.Sprintf("%s %s: APPLIED but applied %d times", w.Key, w.MessageType, got))
			case superseded && w.Expect == ExpectMaySupersede && got != 0:
				once = append(once, fmt.Sprintf("%s: SUPERSEDED but applied %d times", w.Key, got))
			case !applied && !(superseded && w.Expect == ExpectMaySupersede):
				states = append(states, fmt.Sprintf("%s %s: %s, want %s", w.Key, w.MessageType, state, w.Expect))
			}
			if applied {
				switch w.MessageType {
				case TypeDeadline:
					wantDeadlines[w.CaseID]++
				case TypeLedger:
					wantBalance[w.CaseID] += w.AmountCents
				}
			}
			if w.MessageType == TypeStageChanged {
				wantStage[w.CaseID] = max(wantStage[w.CaseID], w.Version)
			}
		case ExpectCaseNotFound:
			if rec.Status != inbox.StatusFailedTerminal || rec.FailureCode != CodeCaseNotFound || got != 0 {
				states = append(states, fmt.Sprintf("%s: %s (applied %d), want FAILED_TERMINAL CASE_NOT_FOUND", w.Key, state, got))
			}
		}
		if !w.HashIs(rec.RequestHash) {
			states = append(states, fmt.Sprintf("%s: record hash %.12s differs from the work's %.12s", w.Key, rec.RequestHash, w.RequestHash))
		}
	}
	for id, cnt := range apps {
		if !known[id] {
			orphans = append(orphans, fmt.Sprintf("application counter %s (=%d) belongs to no work item", id, cnt))
		} else if cnt > 1 {
			once = append(once, fmt.Sprintf("%s applied %d times", id, cnt))
		}
	}
	for _, c := range plan.CaseIDs {
		it := cases[c]
		if it == nil {
			versions = append(versions, "case "+c+" missing")
			continue
		}
		if opts.SingleWriteStages {
			fences = append(fences, caseFence(c, it, newestWork[c], stageVersions(plan, c))...)
		}
		if got := n(it, AttrStageVersion); got != wantStage[c] {
			versions = append(versions, fmt.Sprintf("case %s stageVersion %d, want %d (the highest version sent)", c, got, wantStage[c]))
		}
		if got := n(it, AttrDeadlineVersion); got != wantDeadlines[c] {
			sums = append(sums, fmt.Sprintf("case %s deadlineVersion %d, want %d applied deadline requests", c, got, wantDeadlines[c]))
		}
		if got := n(it, AttrBalanceCents); got != wantBalance[c] {
			sums = append(sums, fmt.Sprintf("case %s balance %d, want %d", c, got, wantBalance[c]))
		}
	}
	r.check("every work item applied exactly once (application counters)", once)
	r.check("every work item in its expected final state (inbox)", states)
	r.check("no application without its work item", orphans)
	r.check("stage versions never rolled back", versions)
	if opts.SingleWriteStages {
		r.check("every case item fenced by its newest stage change, no other version counted (single-write)", fences)
		if opts.Outcomes != nil {
			r.check("every single-write stage change reported applied at most once (worker logs)", reports)
		}
	}
	r.check("deadline versions and balances add up", sums)
	r.check("no record left PROCESSING or FAILED_RETRYABLE", stuck)

	wantRejections := map[string]int{}
	for _, p := range plan.PoisonList {
		wantRejections[p.Code]++
	}
	r.check("every poison message has a rejection record with its code", diffCounts(wantRejections, r.Rejections))
	if dlq := opts.DLQ; dlq != nil {
		for _, code := range dlq {
			r.DLQ[code]++
		}
		r.check("the DLQ holds exactly the terminal messages, by code", diffCounts(plan.TerminalMessages(), r.DLQ))
	}
	return r, nil
}

// Final outcomes a worker reports (worker.Outcome*: the example does not
// import the worker).
const (
	reportedApplied    = "applied"
	reportedDuplicate  = "duplicate"
	reportedSuperseded = "superseded"
	reportedTerminal   = "terminal"
)

// singleWriteState judges a stage change of the single-write route from
// its application counter in the case item (got), its inbox record (nil
// unless a redelivery took the gated path), its case's newest version,
// what the workers reported of its messages (nil: not known) and how many
// hash-mismatch probes reuse its key. It returns the work's state for the
// report and a problem ("" none) of its kind.
func singleWriteState(w WorkItem, rec *inbox.Record, got, newest int64, reported map[string]int, probes int) (state, problem string, kind problemKind) {
	who := fmt.Sprintf("%s %s v%d", w.Key, w.MessageType, w.Version)
	recState := "no record"
	if rec != nil {
		recState = string(rec.Status)
		if rec.Status == inbox.StatusCompleted {
			recState = rec.Outcome
		} else if rec.FailureCode != "" {
			recState += ":" + rec.FailureCode
		}
		if !w.HashIs(rec.RequestHash) {
			return recState, fmt.Sprintf("%s: record hash %.12s differs from the work's %.12s", who, rec.RequestHash, w.RequestHash), problemState
		}
	}
	completed := func(outcome string) bool {
		return rec != nil && rec.Status == inbox.StatusCompleted && rec.Outcome == outcome
	}
	for o, c := range reported {
		switch {
		case o == reportedApplied || o == reportedDuplicate || o == reportedSuperseded:
		case o == reportedTerminal && c <= probes: // the probes' own deliveries
		default:
			return recState, fmt.Sprintf("%s: %d of its messages ended %s", who, c, o), problemState
		}
	}
	switch {
	case got > 1:
		return inbox.OutcomeApplied, fmt.Sprintf("%s: applied %d times (the case item's %s)", who, got, StageApplicationsAttr(w.Version)), problemTwice
	case got == 1:
		// A record only when a redelivery took the gated path: it found
		// the fence (APPLIED) or, after a newer version, superseded it.
		if rec != nil && !completed(inbox.OutcomeApplied) && !(completed(inbox.OutcomeSuperseded) && w.Version < newest) {
			return inbox.OutcomeApplied, fmt.Sprintf("%s: applied once, but its record is %s", who, recState), problemState
		}
		if reported[reportedApplied] > 1 {
			// The table counts one application: the workers' report of
			// the others is wrong, not the work.
			return inbox.OutcomeApplied, fmt.Sprintf("%s: applied once, reported applied %d times", who, reported[reportedApplied]), problemReport
		}
		return inbox.OutcomeApplied, "", problemNone
	}
	switch {
	case w.Version == newest:
		return recState, fmt.Sprintf("%s: its case's newest stage change was not applied (%s)", who, recState), problemState
	case rec != nil && !completed(inbox.OutcomeSuperseded):
		return recState, fmt.Sprintf("%s: not applied, yet its record is %s", who, recState), problemState
	case reported[reportedApplied] > 0 || rec == nil && reported[reportedDuplicate] > 0:
		// Without a record only the fence reports a duplicate: it named
		// this work. (With one, the gate does, for any COMPLETED record.)
		return inbox.OutcomeSuperseded, fmt.Sprintf("%s: reported %d× applied and %d× duplicate, yet not applied (lost)", who,
			reported[reportedApplied], reported[reportedDuplicate]), problemState
	case reported != nil && rec == nil && reported[reportedSuperseded] == 0:
		// Without a record only the fresh path's verdict accounts for it.
		return inbox.OutcomeSuperseded, fmt.Sprintf("%s: not applied, no record, and none of its messages reported superseded", who), problemState
	}
	return inbox.OutcomeSuperseded, "", problemNone
}

// problemKind is what a problem singleWriteState finds breaks: exactly
// once (an application too many), the work's state (lost, or a state it
// cannot be in), or only the workers' report of it (the work applied once).
type problemKind int

const (
	problemNone problemKind = iota
	problemTwice
	problemState
	problemReport
)

// stageVersions are the versions of case c's stage changes.
func stageVersions(plan *Plan, c string) map[int64]bool {
	out := map[int64]bool{}
	for _, w := range plan.Work {
		if w.MessageType == TypeStageChanged && w.CaseID == c {
			out[w.Version] = true
		}
	}
	return out
}

// caseFence checks a case item against its newest stage change (zero: it
// has none) on the single-write route: the fence names that work, the
// stage and version are its, and no other version is counted.
func caseFence(c string, it map[string]types.AttributeValue, newest WorkItem, versions map[int64]bool) []string {
	var out []string
	for attr := range it {
		v, err := strconv.ParseInt(strings.TrimPrefix(attr, AttrStageApplications), 10, 64)
		if strings.HasPrefix(attr, AttrStageApplications) && (err != nil || !versions[v]) {
			out = append(out, fmt.Sprintf("case %s counts applications of %s, which no stage change has", c, attr))
		}
	}
	key, hash := s(it, ddbworker.FenceKeyAttr(AttrStageVersion)), s(it, ddbworker.FenceHashAttr(AttrStageVersion))
	if newest.Key == "" {
		if key != "" || hash != "" {
			out = append(out, fmt.Sprintf("case %s has no stage change, yet its fence names %q", c, key))
		}
		return out
	}
	if key != newest.Key || !newest.HashIs(hash) {
		out = append(out, fmt.Sprintf("case %s: fence %q %.12s, want its newest stage change %q %.12s", c, key, hash, newest.Key, newest.RequestHash))
	}
	if got := s(it, AttrStage); got != newest.Stage {
		out = append(out, fmt.Sprintf("case %s: stage %q, want %q of its newest stage change", c, got, newest.Stage))
	}
	return out
}

func diffCounts(want, got map[string]int) []string {
	var out []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if want[k] != got[k] {
			out = append(out, fmt.Sprintf("%s: %d, want %d", k, got[k], want[k]))
		}
	}
	return out
}

func scanAll(ctx context.Context, api ScanAPI, table string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := api.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("caseflow: scan %s: %w", table, err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func s(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func n(it map[string]types.AttributeValue, k string) int64 {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}
