package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/dlq"
)

type dlqFlags struct {
	dlqURL    string
	hide      time.Duration
	output    string
	max       int
	bodyChars int
	queueURL  string
	rate      float64
	maxAge    time.Duration
	drop      []string
	filters   []string
	dryRun    bool
	all       bool
}

func newDLQCmd(g *globals) *cobra.Command {
	f := &dlqFlags{}
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect the dead-letter queue, redrive it a few at a time, discard what can never be fixed",
		Long: `dlq reads a dead-letter queue without losing anything (every message it
receives is made visible again) and moves selected messages back to the work
queue. Redrive a few first, never all at once: --max defaults to ` + fmt.Sprint(dlq.DefaultMax) + `.
"discard" removes messages that can never be fixed, each recorded in the inbox
first.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.dlqURL, "dlq-url", "", "dead-letter queue URL (required)")
	pf.DurationVar(&f.hide, "hide", dlq.DefaultHide, "how long a scan holds received messages hidden before it makes them visible again")
	pf.StringVarP(&f.output, "output", "o", "table", "output: table or json")

	stats := &cobra.Command{
		Use:   "stats",
		Short: "Count DLQ messages by failure code and message type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.queue(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			st, err := q.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if f.output == "json" {
				return dlqWriteJSON(cmd.OutOrStdout(), st)
			}
			dlqPrintStats(cmd.OutOrStdout(), st)
			return nil
		},
	}

	// peek's own --max: a variable shared with redrive's would take
	// redrive's default (registered last), not the 50 its help shows.
	var peekMax int
	peek := &cobra.Command{
		Use:   "peek",
		Short: "Show DLQ messages and leave every one in the DLQ",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if peekMax < 1 {
				return fmt.Errorf("--max %d must be at least 1", peekMax)
			}
			q, err := f.queue(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			msgs, err := q.Peek(cmd.Context(), peekMax)
			if err != nil {
				return err
			}
			if f.output == "json" {
				views := make([]dlqPeekView, len(msgs))
				for i, m := range msgs {
					views[i] = newDLQPeekView(m)
				}
				return dlqWriteJSON(cmd.OutOrStdout(), views)
			}
			dlqPrintPeek(cmd.OutOrStdout(), msgs, f.bodyChars, peekMax)
			return nil
		},
	}
	peek.Flags().IntVar(&peekMax, "max", 50, "show at most this many messages")
	peek.Flags().IntVar(&f.bodyChars, "body-chars", 60, "body excerpt length in the table")

	redrive := &cobra.Command{
		Use:   "redrive",
		Short: "Move DLQ messages back to the work queue: filtered, bounded by --max, paced by --rate",
		Long: `redrive sends each selected message's original body and producer attributes
to the work queue, then deletes it from the DLQ. The consumer's idempotency gate
decides what it means: a COMPLETED work item comes back as a duplicate, a
terminal one fails the same way again and returns to the DLQ.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := dlqParseFilters(f.filters)
			if err != nil {
				return err
			}
			if f.all && cmd.Flags().Changed("max") {
				return errors.New("--all and --max exclude each other")
			}
			opts := dlq.RedriveOptions{Filter: filter, Max: f.max, All: f.all, Rate: f.rate, DryRun: f.dryRun, MaxAge: f.maxAge, DropAttributes: f.drop}
			if f.all {
				opts.Max = 0
			}
			if !f.dryRun && f.queueURL == "" {
				return errors.New("--queue-url (the work queue to redrive to) is required (or DDBWORKER_QUEUE_URL)")
			}
			if f.max < 1 && !f.all {
				return fmt.Errorf("--max %d must be at least 1 (or --all)", f.max)
			}
			q, err := f.queue(cmd.Context(), g, true)
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			opts.Progress = func(p dlq.RedriveProgress) {
				limit := "all"
				if p.Max > 0 {
					limit = fmt.Sprint(p.Max)
				}
				verb := "moved"
				if f.dryRun {
					verb = "would move"
				}
				fmt.Fprintf(errw, "[redrive] scanned %d, %s %d of %s, skipped %d, failed %d\n", p.Scanned, verb, p.Moved, limit, p.Skipped, p.Failed)
			}
			rep, err := q.Redrive(cmd.Context(), opts)
			if f.output == "json" {
				if jerr := dlqWriteJSON(cmd.OutOrStdout(), rep); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else {
				dlqPrintRedrive(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if len(rep.Failed) > 0 {
				return fmt.Errorf("dlq redrive: %d selected messages did not move", len(rep.Failed))
			}
			return nil
		},
	}
	rf := redrive.Flags()
	rf.StringVar(&f.queueURL, "queue-url", "", "work queue to redrive to (required unless --dry-run)")
	rf.IntVar(&f.max, "max", dlq.DefaultMax, "move at most this many messages")
	rf.Float64Var(&f.rate, "rate", dlq.DefaultRate, "send at most this many messages per second")
	rf.StringSliceVar(&f.drop, "drop-attribute", nil, "leave this producer attribute out of the copies (repeatable): name ones no route reads when a message carries too many for its copy to keep them all with ddbworker.firstSentAt (the redrive refuses it, step fit)")
	rf.DurationVar(&f.maxAge, "max-age", dlq.DefaultMaxAge, "leave in the DLQ messages whose work was first sent longer ago (keep it below the workers' COMPLETED-record TTL, 35 days by default: an older replay could apply twice)")
	rf.StringArrayVar(&f.filters, "filter", nil, "select by exact match: code=CODE or type=TYPE (repeatable, all must match)")
	rf.BoolVar(&f.dryRun, "dry-run", false, "list what would move; move nothing")
	rf.BoolVar(&f.all, "all", false, "no --max: move every selected message")

	cmd.AddCommand(stats, peek, redrive, newDiscardCmd(g, f))
	return cmd
}

// queue validates the shared flags and builds the dlq.Queue.
func (f *dlqFlags) queue(ctx context.Context, g *globals, redrive bool) (*dlq.Queue, error) {
	var errs []error
	if f.dlqURL == "" {
		errs = append(errs, errors.New("--dlq-url is required (or DDBWORKER_DLQ_URL)"))
	}
	if err := checkOutput(f.output); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	_, client := g.clients(cfg, nil, nil)
	dc := dlq.Config{DLQURL: f.dlqURL, Hide: f.hide}
	if redrive {
		dc.QueueURL = f.queueURL
	}
	return dlq.New(client, dc)
}

// dlqParseFilters reads --filter code=X / type=Y.
func dlqParseFilters(exprs []string) (dlq.Filter, error) {
	var f dlq.Filter
	for _, e := range exprs {
		k, v, ok := strings.Cut(e, "=")
		if !ok || v == "" {
			return dlq.Filter{}, fmt.Errorf("--filter %q: want code=CODE or type=TYPE", e)
		}
		var dst *string
		switch strings.TrimSpace(k) {
		case "code":
			dst = &f.Code
		case "type":
			dst = &f.Type
		default:
			return dlq.Filter{}, fmt.Errorf("--filter %q: %q is not a filter key; use code or type", e, k)
		}
		if *dst != "" && *dst != v {
			return dlq.Filter{}, fmt.Errorf("--filter %s given twice (%q and %q)", k, *dst, v)
		}
		*dst = v
	}
	return f, nil
}

func dlqWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func dlqTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

func dlqStamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// dlqSortedCounts returns m's keys, most frequent first.
func dlqSortedCounts(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	return keys
}

func dlqPrintStats(w io.Writer, st dlq.Stats) {
	scope := "the whole queue"
	if !st.Complete {
		scope = "stopped at the scan limit: counts are partial"
	}
	fmt.Fprintf(w, "DLQ %s\n", st.DLQURL)
	fmt.Fprintf(w, "scanned %d messages (%s); before the scan SQS counted ~%d visible, ~%d in flight, ~%d delayed\n",
		st.Scanned, scope, st.ApproximateVisible, st.ApproximateNotVisible, st.ApproximateDelayed)
	fmt.Fprintln(w, "messages in flight elsewhere (hidden by another reader) are not seen by a scan")
	if st.FIFO {
		fmt.Fprintln(w, "FIFO: a scan sees only the oldest message of each message group")
	}
	fmt.Fprintf(w, "oldest failure %s, oldest sent %s\n", dlqStamp(st.OldestFailedAt), dlqStamp(st.OldestSentAt))
	if st.Scanned == 0 {
		return
	}
	tw := dlqTable(w)
	fmt.Fprintln(tw, "\nCODE\tMESSAGES")
	for _, k := range dlqSortedCounts(st.ByCode) {
		fmt.Fprintf(tw, "%s\t%d\n", k, st.ByCode[k])
	}
	fmt.Fprintln(tw, "\nTYPE\tMESSAGES")
	for _, k := range dlqSortedCounts(st.ByType) {
		fmt.Fprintf(tw, "%s\t%d\n", k, st.ByType[k])
	}
	tw.Flush()
	tw = dlqTable(w)
	fmt.Fprintln(tw, "\nCODE\tTYPE\tMESSAGES")
	for _, c := range st.ByCodeType {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", c.Code, c.Type, c.Count)
	}
	tw.Flush()
}

// dlqPeekView is a message for JSON output, its attributes as strings.
type dlqPeekView struct {
	dlq.Message
	FromWorker bool              `json:"fromWorker"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

func newDLQPeekView(m dlq.Message) dlqPeekView {
	v := dlqPeekView{Message: m, FromWorker: m.FromWorker(), Attributes: map[string]string{}}
	for k, a := range m.Attributes {
		if a.StringValue != nil {
			v.Attributes[k] = aws.ToString(a.StringValue)
		} else {
			v.Attributes[k] = fmt.Sprintf("(%s, %d bytes)", aws.ToString(a.DataType), len(a.BinaryValue))
		}
	}
	return v
}

// dlqKeyChars bounds idempotency keys in tables (JSON has them whole).
const dlqKeyChars = 48

// dlqExcerpt is s on one line, at most n runes.
func dlqExcerpt(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:max(n, 0)]) + "…"
	}
	return s
}

func dlqPrintPeek(w io.Writer, msgs []dlq.Message, bodyChars, limit int) {
	tw := dlqTable(w)
	fmt.Fprintln(tw, "ID\tCODE\tTYPE\tKEY\tFAILED AT\tRECEIVES\tWRAPPER\tBODY")
	wrapped := false
	for _, m := range msgs {
		// The body a route reads: an SNS notification's Message, an
		// EventBridge event's detail (JSON output has the whole body too).
		body := m.Body
		if m.Wrapper != "" {
			body, wrapped = m.Payload, true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.FailureCode, m.MessageType, orDash(dlqExcerpt(m.IdempotencyKey, dlqKeyChars)),
			dlqStamp(m.FailedAt), m.ReceiveCount, orDash(m.Wrapper), dlqExcerpt(body, bodyChars))
	}
	tw.Flush()
	if wrapped {
		fmt.Fprintln(w, "BODY is what a route reads: inside an SNS notification its Message, inside an EventBridge event its detail (-o json shows the whole body)")
	}
	more := ""
	if len(msgs) == limit {
		more = fmt.Sprintf(" (--max %d reached: there may be more)", limit)
	}
	fmt.Fprintf(w, "%d messages shown%s; all of them are still in the DLQ\n", len(msgs), more)
}

func dlqPrintRedrive(w io.Writer, rep dlq.RedriveReport) {
	verb := "moved"
	if rep.DryRun {
		verb = "would move"
	}
	tw := dlqTable(w)
	fmt.Fprintln(tw, "RESULT\tDLQ ID\tNEW ID\tCODE\tTYPE\tKEY\tERROR")
	for _, m := range rep.Moved {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t-\n", verb, m.ID, orDash(m.NewID), m.Code, m.Type, orDash(dlqExcerpt(m.Key, dlqKeyChars)))
	}
	for _, m := range rep.Failed {
		fmt.Fprintf(tw, "failed (%s)\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Step, m.ID, orDash(m.NewID), m.Code, m.Type, orDash(dlqExcerpt(m.Key, dlqKeyChars)), m.Error)
	}
	tw.Flush()
	for _, m := range rep.Moved {
		if len(m.DroppedAttributes) > 0 { // a copy that drops attributes says which
			fmt.Fprintf(w, "%s %s without the attributes SQS's limits left no room for: %s\n", verb, m.ID, strings.Join(m.DroppedAttributes, ", "))
		}
	}
	limit := "all"
	if rep.Max > 0 {
		limit = fmt.Sprintf("at most %d", rep.Max)
	}
	fmt.Fprintf(w, "%s %d (%s) at ≤ %g/s; skipped %d (filter), %d over the limit, %d arrived during the redrive, %d too old to replay safely, failed %d; scanned %d, %d matching, in %s\n",
		verb, len(rep.Moved), limit, rep.Rate, rep.Skipped, rep.OverMax, rep.Arrived, rep.TooOld, len(rep.Failed), rep.Scanned, rep.Matched, rep.Duration.Round(time.Millisecond))
	if len(rep.Moved) > 0 {
		var by []string
		for _, k := range dlqSortedCounts(rep.MovedByCode) {
			by = append(by, fmt.Sprintf("%s %d", k, rep.MovedByCode[k]))
		}
		fmt.Fprintf(w, "%s by code: %s\n", verb, strings.Join(by, ", "))
		by = by[:0]
		for _, k := range dlqSortedCounts(rep.MovedByType) {
			by = append(by, fmt.Sprintf("%s %d", k, rep.MovedByType[k]))
		}
		fmt.Fprintf(w, "%s by type: %s\n", verb, strings.Join(by, ", "))
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing moved; every message is still in the DLQ")
	}
	fmt.Fprintln(w, dlqRemaining(rep))
}

// dlqRemaining says what a redrive left of the matching messages, only as
// sure as the scan allows: the redrive scans past --max until one more
// matching message (some remain) or the end of the DLQ (none remain).
func dlqRemaining(rep dlq.RedriveReport) string {
	seen := fmt.Sprintf("scanned %d, %d matching", rep.Scanned, rep.Matched)
	switch {
	case rep.LimitReached:
		more := fmt.Sprintf("at least %d more matching messages remain", rep.OverMax)
		if rep.OverMax == 1 {
			more = "at least 1 more matching message remains"
		}
		return fmt.Sprintf("--max reached: %s in the DLQ (%s); check the outcome, then redrive more", more, seen)
	case !rep.Complete:
		return fmt.Sprintf("the scan stopped at its limit (%s): more matching messages may remain in the DLQ", seen)
	case rep.Matched == 0:
		return fmt.Sprintf("no message in the DLQ matched (%s)", seen)
	case rep.TooOld+rep.Arrived+len(rep.Failed) > 0:
		return fmt.Sprintf("the whole DLQ was scanned (%s): the matching messages left are the too old, the newly arrived and the failed above", seen)
	}
	verb := "moved"
	if rep.DryRun {
		verb = "would be moved"
	}
	return fmt.Sprintf("the whole DLQ was scanned (%s): every matching message %s", seen, verb)
}
