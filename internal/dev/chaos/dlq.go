package chaos

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
)

// DLQCopy is one message found in the DLQ.
type DLQCopy struct {
	// SourceID is the work queue's SQS message id: ddbworker.sourceMessageId
	// of a worker's copy; the message's own id when SQS's redrive policy
	// moved it (a moved message keeps its id).
	SourceID       string
	Code           string // ddbworker.failureCode, or dlq.CodeNone
	IdempotencyKey string
	// Redrive: SQS's redrive policy moved the message after
	// maxReceiveCount receives (it carries no ddbworker.failureCode).
	Redrive bool
}

// drainDLQ reads every DLQ copy; none is deleted, all stay for inspection.
func drainDLQ(ctx context.Context, q *sqs.Client, url string) ([]DLQCopy, error) {
	reader, err := dlq.New(q, dlq.Config{DLQURL: url})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	msgs, err := reader.Peek(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	out := make([]DLQCopy, len(msgs))
	for i, m := range msgs {
		out[i] = DLQCopy{SourceID: m.SourceMessageID, Code: m.FailureCode, IdempotencyKey: m.IdempotencyKey}
		if !m.FromWorker() {
			out[i].SourceID, out[i].Redrive = m.ID, true
		}
	}
	return out, nil
}

// DLQStats summarises the DLQ.
type DLQStats struct {
	Copies  int            `json:"copies"`
	Sources int            `json:"distinctSources"`
	ByCode  map[string]int `json:"copiesByCode"`
	// Extra copies of a source beyond its first: a worker killed after its
	// DLQ send and before its delete (or a delete that failed) leaves the
	// message in the queue, and the redelivery finds the record
	// FAILED_TERMINAL and sends another copy. Legitimate; counted, not a
	// violation.
	Extra int `json:"extraCopies"`
	// Expected is how many plan messages must end in the DLQ.
	Expected int `json:"expectedSources"`
	// Redriven are the copies SQS's redrive policy moved (no
	// ddbworker.failureCode): a message received maxReceiveCount times
	// without being deleted.
	Redriven int `json:"redrivePolicyCopies"`
}

// expectedCode is the failure code a plan message must end with, "" when
// it must not end terminal (see caseflow.Plan.TerminalMessages).
func expectedCode(p *caseflow.Plan, i int) string {
	m := p.Messages[i]
	switch {
	case m.Poison >= 0:
		return p.PoisonList[m.Poison].Code
	case m.Work >= 0 && p.Work[m.Work].Expect == caseflow.ExpectCaseNotFound:
		return caseflow.CodeCaseNotFound
	}
	return ""
}

// CheckDLQ checks the DLQ by source message id against the plan: sent maps
// each SQS message id the harness sent to its index in plan.Messages.
// Every message that must end terminal has at least one copy with its code
// and no copy with another (a copy the redrive policy moved has none); no
// other message (and no unknown source) has a copy from the worker's
// terminal policy. Several copies of one source are legitimate (counted in
// Extra). A message that must not end terminal but was moved by the redrive
// policy is not reported here: DeadLettered reports it.
func CheckDLQ(p *caseflow.Plan, sent map[string]int, copies []DLQCopy) (DLQStats, []string, []string) {
	st := DLQStats{Copies: len(copies), ByCode: map[string]int{}}
	bySource := map[string][]DLQCopy{}
	for _, c := range copies {
		st.ByCode[c.Code]++
		bySource[c.SourceID] = append(bySource[c.SourceID], c)
		if c.Redrive {
			st.Redriven++
		}
	}
	st.Sources = len(bySource)
	st.Extra = st.Copies - st.Sources

	var missing, unexpected []string
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		i := sent[id]
		want := expectedCode(p, i)
		got := bySource[id]
		if want != "" {
			st.Expected++
		}
		var fromWorker []DLQCopy
		for _, c := range got {
			if !c.Redrive {
				fromWorker = append(fromWorker, c)
			}
		}
		switch {
		case want != "" && len(got) == 0:
			missing = append(missing, fmt.Sprintf("message %s (plan #%d) must end in the DLQ with %s: no copy", id, i, want))
		case want == "" && len(fromWorker) > 0:
			unexpected = append(unexpected, fmt.Sprintf("message %s (plan #%d, %s) must not end terminal: %d DLQ copies, code %s",
				id, i, describe(p, i), len(fromWorker), fromWorker[0].Code))
		case want == "":
			// No copy, or only the redrive policy's: DeadLettered.
		default:
			for _, c := range got {
				if c.Code != want {
					missing = append(missing, fmt.Sprintf("message %s (plan #%d) must end with %s: a DLQ copy has %s", id, i, want, c.Code))
					break
				}
			}
		}
	}
	var unknown []string
	for src := range bySource {
		if _, ok := sent[src]; !ok {
			unknown = append(unknown, src)
		}
	}
	sort.Strings(unknown)
	for _, src := range unknown {
		unexpected = append(unexpected, fmt.Sprintf("DLQ copy of %q (code %s): not a message this run sent", src, bySource[src][0].Code))
	}
	return st, missing, unexpected
}

// DeadLettered returns the source ids of messages that must not end
// terminal and that SQS's redrive policy moved to the DLQ, sorted.
func DeadLettered(p *caseflow.Plan, sent map[string]int, copies []DLQCopy) []string {
	seen := map[string]bool{}
	for _, c := range copies {
		if i, ok := sent[c.SourceID]; ok && c.Redrive && expectedCode(p, i) == "" {
			seen[c.SourceID] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func describe(p *caseflow.Plan, i int) string {
	m := p.Messages[i]
	if m.Work >= 0 {
		w := p.Work[m.Work]
		return fmt.Sprintf("%s %s expect %s", w.MessageType, w.Key, w.Expect)
	}
	return "poison"
}
