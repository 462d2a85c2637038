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

// Verify reads the whole table and checks, against plan:
//   - every work item expected to apply was applied exactly once (its
//     application counter is 1 and its inbox record COMPLETED/APPLIED);
//   - out-of-order versions were applied or SUPERSEDED (counter 1 or absent)
//     and each case's stage version is the highest version sent: no rollback;
//   - deadline versions and balances equal what the applied work adds up to;
//   - no application counter exceeds 1 and none exists without its work;
//   - no record is left PROCESSING or FAILED_RETRYABLE;
//   - every poison message is accounted for by a rejection record with its
//     code, every CASE_NOT_FOUND work item is FAILED_TERMINAL;
//   - when dlq is given (failure code of each DLQ message), the DLQ holds
//     exactly the terminal messages the plan implies, by code.
func Verify(ctx context.Context, api ScanAPI, table string, plan *Plan, dlq []string) (*Report, error) {
	items, err := scanAll(ctx, api, table)
	if err != nil {
		return nil, err
	}
	r := &Report{WorkStates: map[string]int{}, Rejections: map[string]int{}, DLQ: map[string]int{}}
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

	var once, states, versions, sums, orphans []string
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
	for _, w := range plan.Work {
		if w.MessageType == TypeStageChanged && w.Expect == ExpectApplied && w.Version < newest[w.CaseID] {
			w.Expect = ExpectMaySupersede
		}
		id := w.Key + "|" + w.MessageType
		known[id] = true
		rec := records[id]
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
		if rec.RequestHash != w.RequestHash {
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
	r.check("deadline versions and balances add up", sums)
	r.check("no record left PROCESSING or FAILED_RETRYABLE", stuck)

	wantRejections := map[string]int{}
	for _, p := range plan.PoisonList {
		wantRejections[p.Code]++
	}
	r.check("every poison message has a rejection record with its code", diffCounts(wantRejections, r.Rejections))
	if dlq != nil {
		for _, code := range dlq {
			r.DLQ[code]++
		}
		r.check("the DLQ holds exactly the terminal messages, by code", diffCounts(plan.TerminalMessages(), r.DLQ))
	}
	return r, nil
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
