package explore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
)

type (
	ddbAV = ddbtypes.AttributeValue
	ddbS  = ddbtypes.AttributeValueMemberS
	ddbN  = ddbtypes.AttributeValueMemberN
)

// Invariant names a checked invariant.
type Invariant string

// The invariants. Each violation names one.
const (
	// AppliedTwice: a work item's counter is above 1, or two works that
	// share a reused key both applied.
	AppliedTwice Invariant = "applied-twice"
	// Lost: not applied, not superseded by a newer version, and nothing
	// accounts for it — no terminal record, no DLQ message, no message
	// left in the queue.
	Lost Invariant = "lost"
	// TerminalApplied: the work's record is FAILED_TERMINAL and its work
	// was applied anyway.
	TerminalApplied Invariant = "terminal-but-applied"
	// HealthyDeadLettered: a terminal record or a DLQ message with a code
	// the work's nature does not explain (healthy work failed for good),
	// or a DLQ message the redrive policy moved for work that is neither
	// applied nor terminal.
	HealthyDeadLettered Invariant = "healthy-dead-lettered"
	// AttemptWithoutFailure: business attempts counted on a record of
	// work that never failed by business (or more than it failed).
	AttemptWithoutFailure Invariant = "attempt-without-business-failure"
	// StuckProcessing: a record left PROCESSING with no message (in the
	// queue or the DLQ) that could still finish it.
	StuckProcessing Invariant = "stuck-processing"
	// UnknownDLQ: a DLQ message of no work the run sent.
	UnknownDLQ Invariant = "dlq-unexplained"
	// Backlog: the work queue did not drain within the recovery bound.
	Backlog Invariant = "backlog-not-drained"
)

// The invariants of the adopted variant (app.go): nothing of the
// application's changes.
const (
	// AdoptShared: tables.Plan with the default layout did not block the
	// application's own index of the layout's name and keys.
	AdoptShared Invariant = "adopt-shares-app-index"
	// AppItemChanged: an item under the application's keys is not as the
	// application last wrote it (an attribute changed, added or removed,
	// the item gone), or is one it never wrote.
	AppItemChanged Invariant = "app-item-changed"
	// AppIndexEntered: the application's index holds an item that is not
	// the application's (an inbox, rejection, settings or domain item).
	AppIndexEntered Invariant = "app-index-entered"
	// AppIndexChanged: the application's index's key schema or projection,
	// or the table's TTL, is not what it was before adoption (TTL off may
	// become TTL on the layout's own attribute, which no item of the
	// application's carries).
	AppIndexChanged Invariant = "app-index-or-ttl-changed"
	// AppWriteFailed: a write of the application's own failed on the
	// adopted table.
	AppWriteFailed Invariant = "app-write-failed"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant Invariant `json:"invariant"`
	WID       string    `json:"wid,omitempty"`
	Detail    string    `json:"detail"`
}

func (v Violation) String() string {
	if v.WID == "" {
		return fmt.Sprintf("%s: %s", v.Invariant, v.Detail)
	}
	return fmt.Sprintf("%s %s: %s", v.Invariant, v.WID, v.Detail)
}

// state is what DynamoDB holds at the end.
type state struct {
	records map[string]*inbox.Record // key/type
	// rejections are the codes of messages refused before they had a
	// record, by SQS message id (a DLQ move keeps the id).
	rejections map[string]string
	rejected   []*inbox.Record
	aggs       map[string]aggregate
}

type aggregate struct {
	version  int64
	counters map[string]int64 // wid → applications
}

// read scans the table: inbox records and aggregate items.
func (x *run) read(ctx context.Context) (*state, error) {
	store, err := x.store.WithDefaults()
	if err != nil {
		return nil, err
	}
	st := &state{records: map[string]*inbox.Record{}, rejections: map[string]string{}, aggs: map[string]aggregate{}}
	p := dynamodb.NewScanPaginator(x.admin, &dynamodb.ScanInput{TableName: aws.String(x.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			pk, _ := item["PK"].(*ddbS)
			sk, _ := item["SK"].(*ddbS)
			if pk == nil || sk == nil || strings.HasPrefix(pk.Value, appCustomer) {
				continue // the application's items: checkApp reads them
			}
			switch {
			case strings.HasPrefix(pk.Value, aggPrefix):
				a := aggregate{counters: map[string]int64{}}
				for k, v := range item {
					n, ok := v.(*ddbN)
					if !ok {
						continue
					}
					i, _ := strconv.ParseInt(n.Value, 10, 64)
					switch {
					case k == versionAttr:
						a.version = i
					case strings.HasPrefix(k, counterPref):
						a.counters[strings.TrimPrefix(k, counterPref)] = i
					}
				}
				st.aggs[strings.TrimPrefix(pk.Value, aggPrefix)] = a
			default:
				rec, err := store.Decode(item)
				switch {
				case err != nil:
				case rec.Rejection:
					st.rejections[rec.SQSMessageID] = rec.FailureCode
					st.rejected = append(st.rejected, rec)
				default:
					st.records[rec.Key+"/"+rec.MessageType] = rec
				}
			}
		}
	}
	return st, nil
}

// dlqCopy is a DLQ message as the checker reads it.
type dlqCopy struct {
	wid, code string
}

// Figures is what the end state held.
type Figures struct {
	Applied, Superseded, Terminal, DLQ, Records int
	// BeyondCover counts DLQ messages the redrive policy moved during an
	// outage longer than a FIFO queue's documented cover (not violations).
	BeyondCover int
}

// check reads DynamoDB and both queues (the hosts are stopped) and
// returns every violation.
func (x *run) check(ctx context.Context, backlog int) ([]Violation, Figures, error) {
	var fig Figures
	st, err := x.read(ctx)
	if err != nil {
		return nil, fig, err
	}
	dlqMsgs, err := x.receiveAll(ctx, x.qs.DLQURL)
	if err != nil {
		return nil, fig, err
	}
	left, err := x.receiveAll(ctx, x.qs.URL)
	if err != nil {
		return nil, fig, err
	}
	fig.Records, fig.DLQ = len(st.records), len(dlqMsgs)
	var vs []Violation
	add := func(inv Invariant, wid, format string, args ...any) {
		vs = append(vs, Violation{Invariant: inv, WID: wid, Detail: fmt.Sprintf(format, args...)})
	}
	if backlog > 0 || len(left) > 0 {
		add(Backlog, "", "%d messages left in the work queue after the recovery bound %s", max(backlog, len(left)), x.cfg.Recover)
	}
	queued := map[string]int{}
	for _, m := range left {
		queued[bodyWID(aws.ToString(m.Body))]++
	}
	copies := map[string][]dlqCopy{}
	for _, m := range dlqMsgs {
		c := dlqCopy{wid: bodyWID(aws.ToString(m.Body)), code: dlq.CodeNone}
		if v, ok := m.MessageAttributes[dlq.AttrFailureCode]; ok {
			c.code = aws.ToString(v.StringValue)
		} else if code, ok := st.rejections[aws.ToString(m.MessageId)]; ok {
			c.code = code // moved by the redrive policy after the worker refused it
		}
		if c.wid == "" {
			add(UnknownDLQ, "", "DLQ message %s (code %s) is of no work the run sent: %.120s", aws.ToString(m.MessageId), c.code, aws.ToString(m.Body))
			continue
		}
		copies[c.wid] = append(copies[c.wid], c)
	}
	byWID := map[string]*Work{}
	groups := map[string][]*Work{}
	for _, w := range x.s.Works {
		byWID[w.WID] = w
		if w.Reuse != "" {
			groups[w.Reuse+"/"+w.Type] = append(groups[w.Reuse+"/"+w.Type], w)
		}
	}
	for wid := range copies {
		if byWID[wid] == nil {
			add(UnknownDLQ, wid, "DLQ message of an unknown work id")
		}
	}
	for _, g := range groups {
		n := int64(0)
		for _, w := range g {
			n += st.aggs[w.Agg].counters[w.WID]
		}
		if n > 1 {
			add(AppliedTwice, g[0].WID, "the key %s was reused for %d payloads and %d of them applied", g[0].Key, len(g), n)
		}
	}
	for _, w := range x.s.Works {
		a := st.aggs[w.Agg]
		applied := a.counters[w.WID]
		rec := st.records[w.Key+"/"+w.Type]
		superseded := applied == 0 && a.version > w.Version
		codes := copies[w.WID]
		switch {
		case applied > 0:
			fig.Applied++
		case superseded:
			fig.Superseded++
		}
		if applied > 1 {
			add(AppliedTwice, w.WID, "%s %s applied %d times", w.Type, w.Key, applied)
		}
		otherApplied := false // a reused key's other payload applied: this one was refused
		for _, o := range groups[w.Reuse+"/"+w.Type] {
			otherApplied = otherApplied || (o != w && st.aggs[o.Agg].counters[o.WID] > 0)
		}
		terminal := rec != nil && rec.Status == inbox.StatusFailedTerminal
		// Reopened by the operator, its message not (yet) redriven: its
		// record still names the failure that ended it.
		reopened := rec != nil && rec.ReopenedAt != "" && rec.Status == inbox.StatusFailedRetryable && x.explains(w, rec.FailureCode)
		if terminal {
			fig.Terminal++
			if applied > 0 && w.Reuse == "" {
				add(TerminalApplied, w.WID, "%s %s (%s route) is recorded FAILED_TERMINAL %s and was applied", w.Type, w.Key, x.s.Modes[w.Type], rec.FailureCode)
			}
			if !x.explains(w, rec.FailureCode) {
				add(HealthyDeadLettered, w.WID, "%s %s (%s, %s route) ended FAILED_TERMINAL %s: %.160s", w.Type, w.Key, w.Kind, x.s.Modes[w.Type], rec.FailureCode, rec.FailureMessage)
			}
		}
		for _, c := range codes {
			switch {
			case c.code == dlq.CodeNone && (terminal || reopened || applied > 0 || otherApplied):
				// Moved by the redrive policy: the terminal record (the
				// redrive terminal policy) or a leftover copy of applied
				// work explains it.
			case c.code == dlq.CodeNone && x.beyondCover():
				// A FIFO queue's message is never re-sent: an outage
				// longer than the hidings before its last receive
				// (HealthConfig.OutageCover) walks it to the DLQ by
				// design.
				fig.BeyondCover++
			case c.code == dlq.CodeNone:
				add(HealthyDeadLettered, w.WID, "%s %s (%s, %s route) was dead-lettered by the redrive policy (maxReceiveCount %d) and is neither applied nor terminal (record %s)",
					w.Type, w.Key, w.Kind, x.s.Modes[w.Type], x.s.MaxReceive, recStatus(rec))
			case !x.explains(w, c.code):
				add(HealthyDeadLettered, w.WID, "%s %s (%s, %s route) is in the DLQ with %s", w.Type, w.Key, w.Kind, x.s.Modes[w.Type], c.code)
			}
		}
		// Refused before it had a record of its own (a rejection record,
		// by SQS message id): the codes the worker gave this key and type
		// (or this key, when the type could not be read).
		refused := 0
		for _, rj := range st.rejected {
			if rj.Key != w.Key || (rj.MessageType != w.Type && rj.MessageType != "") {
				continue
			}
			refused++
			if !x.explains(w, rj.FailureCode) && !(applied > 0 && rj.MessageType == "") {
				add(HealthyDeadLettered, w.WID, "%s %s (%s, %s route) was refused %s (rejection record of message %s, type %q): %.160s",
					w.Type, w.Key, w.Kind, x.s.Modes[w.Type], rj.FailureCode, rj.SQSMessageID, rj.MessageType, rj.FailureMessage)
			}
		}
		if applied == 0 && !superseded && !terminal && !reopened && len(codes) == 0 && refused == 0 && queued[w.WID] == 0 && !otherApplied {
			add(Lost, w.WID, "%s %s (%s, %s route) was not applied, not superseded, has no terminal record (record %s), no DLQ message and no message in the queue",
				w.Type, w.Key, w.Kind, x.s.Modes[w.Type], recStatus(rec))
		}
		if rec != nil && w.Reuse == "" {
			switch w.Kind {
			case KindOK:
				if rec.Attempts > 0 {
					add(AttemptWithoutFailure, w.WID, "%s %s (%s route) never fails by business, and its record counts %d attempts (%s %s)",
						w.Type, w.Key, x.s.Modes[w.Type], rec.Attempts, rec.Status, rec.FailureCode)
				}
			case KindFlaky:
				if rec.Attempts > w.Flaky {
					add(AttemptWithoutFailure, w.WID, "%s %s (%s route) failed by business %d times, and its record counts %d attempts (%s %s)",
						w.Type, w.Key, x.s.Modes[w.Type], w.Flaky, rec.Attempts, rec.Status, rec.FailureCode)
				}
			}
		}
		if rec != nil && rec.Status == inbox.StatusProcessing && len(codes) == 0 && queued[w.WID] == 0 {
			add(StuckProcessing, w.WID, "%s %s is left PROCESSING (owner %s) with no message in the queue or the DLQ", w.Type, w.Key, rec.LeaseOwner)
		}
	}
	return merged(vs), fig, nil
}

// merged keeps one violation per invariant and work item (the first
// found, the others' evidence appended), sorted.
func merged(vs []Violation) []Violation {
	slices.SortStableFunc(vs, func(a, b Violation) int { return compare(string(a.Invariant)+a.WID, string(b.Invariant)+b.WID) })
	var out []Violation
	for _, v := range vs {
		if n := len(out); n > 0 && v.WID != "" && out[n-1].Invariant == v.Invariant && out[n-1].WID == v.WID {
			out[n-1].Detail += "; also: " + v.Detail
			continue
		}
		out = append(out, v)
	}
	return out
}

// beyondCover reports whether the run is on a FIFO queue and one of its
// outages lasted longer than the workers' documented cover of it.
func (x *run) beyondCover() bool {
	if !x.s.FIFO {
		return false
	}
	cover := x.workerConfig("").Health.OutageCover(x.s.MaxReceive, true)
	for _, f := range x.s.Faults {
		if f.Kind == FaultOutage && f.For > cover {
			return true
		}
	}
	return false
}

// explains reports whether failure code code is what w's nature makes it
// end with.
func (x *run) explains(w *Work, code string) bool {
	switch {
	case w.Kind == KindPoison && code == codePoison:
		return true
	case w.Kind == KindFlaky && code == failure.CodeMaxAttempts && x.s.Terminal(w):
		return true
	case w.Reuse != "" && code == failure.CodeHashMismatch:
		return true
	}
	return false
}

func recStatus(rec *inbox.Record) string {
	if rec == nil {
		return "none"
	}
	s := string(rec.Status)
	if rec.FailureCode != "" {
		s += " " + rec.FailureCode
	}
	return s
}

var _ = types.Message{}
