package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
)

// reopenFlags select the FAILED_TERMINAL work `inbox reopen` gives back.
type reopenFlags struct {
	msgType   string
	code      string
	aggregate string
	reason    string
	by        string
	output    string
	max       int
	all       bool
	dryRun    bool
}

// bulk reports whether the selection is by code, aggregate or type rather
// than one key.
func (f *reopenFlags) bulk(args []string) bool { return len(args) == 0 }

func newReopenCmd(g *globals) *cobra.Command {
	f := &reopenFlags{}
	cmd := &cobra.Command{
		Use:   "reopen (KEY [--type TYPE] | --code CODE | --aggregate TYPE/ID | --type TYPE) --reason TEXT [--dry-run] [--max N | --all]",
		Short: "Give FAILED_TERMINAL work back to the retry path after fixing what made it fail: one key, or in bulk (fenced, audited)",
		Long: `reopen turns FAILED_TERMINAL work items into FAILED_RETRYABLE with a fresh
attempts budget, each fenced on its record being exactly as read, and records
who reopened it, when and why (reopenedBy, reopenedAt, reopenReason). The next
delivery of each — redrive its message from the DLQ — runs the handler again
instead of failing the same way.

Select one work item by KEY (--type only when the key has records of several
message types), or many at once by --code, --aggregate TYPE/ID and --type
(combined, all must match): the FAILED_TERMINAL records of the attention
index, or of the aggregate's history. Rejected messages (filed under their SQS
message id) have no work to reopen and are left alone: fix the producer and
resend, or remove them with "dlq discard".

Run it with --dry-run first: it lists and counts what would reopen. A bulk
reopen reopens at most --max (default ` + fmt.Sprint(dlq.DefaultMax) + `) unless --all, and says when
more remain; progress goes to stderr.`,
		Example: examples(g.app.name(),
			`inbox reopen case-42:deadline:intake --reason "case 42 restored"`,
			`inbox reopen --code CASE_NOT_FOUND --dry-run`,
			`inbox reopen --code CASE_NOT_FOUND --all --reason "cases restored from backup"`,
			"dlq redrive --filter code=CASE_NOT_FOUND --max 10"),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(cmd, args); err != nil {
				return err
			}
			cfg, err := g.awsConfig(cmd.Context())
			if err != nil {
				return err
			}
			ddb, _ := g.clients(cfg, nil, nil)
			store, err := g.resolveStore(cmd.Context(), ddb)
			if err != nil {
				return err
			}
			r, err := inbox.NewReader(ddb, inbox.ReaderConfig{Store: store})
			if err != nil {
				return err
			}
			sel, err := f.selectRecords(cmd.Context(), r, args, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rep := reopenReport{DryRun: f.dryRun, Matched: len(sel.recs), More: sel.more, Rejections: sel.rejections,
				Reopened: []inboxJSONRecord{}, Failed: []reopenFailure{}}
			if f.dryRun {
				for _, rec := range sel.recs {
					rep.Reopened = append(rep.Reopened, inboxJSONOf(rec))
				}
			} else {
				reopenAll(cmd.Context(), ddb, store, sel.recs, f.by, f.reason, &rep, cmd.ErrOrStderr())
			}
			if !f.bulk(args) && !f.dryRun && len(rep.Failed) == 0 {
				// One key: the record as it is now, as `inbox get` shows it.
				recs, err := r.Get(cmd.Context(), sel.recs[0].Key, sel.recs[0].MessageType)
				if err != nil {
					return err
				}
				if f.output == "json" {
					return inboxWriteJSON(cmd.OutOrStdout(), recs, "")
				}
				inboxPrintDetail(cmd.OutOrStdout(), recs, time.Now())
				fmt.Fprintln(cmd.OutOrStdout())
			}
			if f.output == "json" {
				if err := dlqWriteJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printReopen(cmd.OutOrStdout(), g.app.name(), rep, f.limitText(args))
			}
			if len(rep.Failed) > 0 {
				return fmt.Errorf("inbox reopen: %d of %d selected records were not reopened (see above)", len(rep.Failed), rep.Matched)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.msgType, "type", "", "the message type: with KEY, needed only when the key has records of several types; alone, every FAILED_TERMINAL record of the type")
	fl.StringVar(&f.code, "code", "", "reopen the FAILED_TERMINAL records of this failure code")
	fl.StringVar(&f.aggregate, "aggregate", "", "reopen the FAILED_TERMINAL records of this aggregate: TYPE/ID")
	fl.StringVar(&f.reason, "reason", "", "why it may run again (recorded on each record; not needed with --dry-run)")
	fl.StringVar(&f.by, "by", defaultOperator(), "who reopens it (recorded on each record)")
	fl.StringVarP(&f.output, "output", "o", "table", "output: table or json")
	fl.IntVar(&f.max, "max", dlq.DefaultMax, "in bulk, reopen at most this many records")
	fl.BoolVar(&f.all, "all", false, "in bulk, no --max: reopen every selected record")
	fl.BoolVar(&f.dryRun, "dry-run", false, "list and count what would reopen; change nothing")
	return cmd
}

// check validates the flags, each error naming only the flag at fault.
func (f *reopenFlags) check(cmd *cobra.Command, args []string) error {
	var errs []error
	if err := checkOutput(f.output); err != nil {
		errs = append(errs, err)
	}
	if f.bulk(args) && f.code == "" && f.aggregate == "" && f.msgType == "" {
		errs = append(errs, errors.New("say what to reopen: a KEY, or --code, --aggregate or --type (with --dry-run first to see what they select)"))
	}
	if !f.bulk(args) && (f.code != "" || f.aggregate != "") {
		errs = append(errs, errors.New("--code and --aggregate select in bulk: give them without KEY"))
	}
	if f.aggregate != "" {
		if typ, id, ok := strings.Cut(f.aggregate, "/"); !ok || typ == "" || id == "" {
			errs = append(errs, fmt.Errorf("--aggregate %q: want TYPE/ID", f.aggregate))
		}
	}
	if f.all && cmd.Flags().Changed("max") {
		errs = append(errs, errors.New("--all and --max exclude each other"))
	}
	if f.max < 1 && !f.all {
		errs = append(errs, fmt.Errorf("--max %d must be at least 1 (or --all)", f.max))
	}
	if !f.dryRun && strings.TrimSpace(f.reason) == "" {
		errs = append(errs, errors.New("--reason is required: say why the work may run again (it is recorded on each record)"))
	}
	return errors.Join(errs...)
}

func (f *reopenFlags) limit(args []string) int {
	if !f.bulk(args) || f.all {
		return int(^uint(0) >> 1)
	}
	return f.max
}

func (f *reopenFlags) limitText(args []string) string {
	switch {
	case !f.bulk(args):
		return ""
	case f.all:
		return "all"
	}
	return fmt.Sprintf("at most %d", f.max)
}

// reopenSelection is what the flags select: the records to reopen, whether
// more matching ones remain beyond the limit, and how many rejections
// matched (left alone).
type reopenSelection struct {
	recs       []*inbox.Record
	more       bool
	rejections int
}

// selectRecords reads what the flags select. One KEY: its record of
// --type, or its only record (several types: refused, naming them). In
// bulk: the FAILED_TERMINAL records of the aggregate's history or of the
// attention index, filtered by code and type, up to the limit and one
// more (which says that more remain).
func (f *reopenFlags) selectRecords(ctx context.Context, r *inbox.Reader, args []string, progress io.Writer) (reopenSelection, error) {
	if !f.bulk(args) {
		key := args[0]
		recs, err := r.Get(ctx, key, f.msgType)
		if err != nil {
			return reopenSelection{}, err
		}
		if len(recs) > 1 {
			var names []string
			for _, rec := range recs {
				names = append(names, fmt.Sprintf("%s (%s)", rec.MessageType, rec.Status))
			}
			return reopenSelection{}, fmt.Errorf("%s has records of %d message types: %s; say which with --type", key, len(recs), strings.Join(names, ", "))
		}
		rec := recs[0]
		if rec.Status != inbox.StatusFailedTerminal {
			return reopenSelection{}, fmt.Errorf("%s %s is %s, not FAILED_TERMINAL: only work that failed for good is reopened", key, rec.MessageType, rec.Status)
		}
		return reopenSelection{recs: recs}, nil
	}
	var list func(context.Context, inbox.Page) (inbox.Listing, error)
	if f.aggregate != "" {
		typ, id, _ := strings.Cut(f.aggregate, "/")
		list = func(ctx context.Context, p inbox.Page) (inbox.Listing, error) {
			return r.ListAggregate(ctx, typ, id, p)
		}
	} else {
		list = func(ctx context.Context, p inbox.Page) (inbox.Listing, error) {
			return r.ListAttention(ctx, inbox.StatusFailedTerminal, inbox.AttentionFilter{Code: f.code}, p)
		}
	}
	var sel reopenSelection
	limit := f.limit(args)
	page := inbox.Page{Limit: inbox.MaxPageLimit}
	read := 0
	for {
		l, err := list(ctx, page)
		if err != nil {
			return reopenSelection{}, err
		}
		read += len(l.Records)
		for _, rec := range l.Records {
			if rec.Status != inbox.StatusFailedTerminal || (f.code != "" && rec.FailureCode != f.code) ||
				(f.msgType != "" && rec.MessageType != f.msgType) {
				continue
			}
			if rec.Rejection {
				sel.rejections++
				continue
			}
			if len(sel.recs) >= limit {
				sel.more = true
				return sel, nil
			}
			sel.recs = append(sel.recs, rec)
		}
		if l.Next != "" {
			fmt.Fprintf(progress, "[reopen] read %d records, %d selected\n", read, len(sel.recs))
		}
		if page.Cursor = l.Next; page.Cursor == "" {
			return sel, nil
		}
	}
}

// reopenFailure is a selected record that was not reopened.
type reopenFailure struct {
	Key         string `json:"key"`
	MessageType string `json:"messageType"`
	Error       string `json:"error"`
}

// reopenReport is what `inbox reopen` did (or, dry, would do).
type reopenReport struct {
	DryRun bool `json:"dryRun"`
	// Matched is how many records were selected (up to the limit).
	Matched int `json:"matched"`
	// More: matching records remain beyond the limit.
	More bool `json:"more"`
	// Rejections matched the selection and were left alone.
	Rejections int               `json:"rejectionsLeftAlone"`
	Reopened   []inboxJSONRecord `json:"reopened"`
	Failed     []reopenFailure   `json:"failed"`
}

// reopenAll reopens each record, fenced on it being as read; one that
// changed meanwhile is reported, and the others still reopen.
func reopenAll(ctx context.Context, ddb *dynamodb.Client, store inbox.Store, recs []*inbox.Record, by, reason string, rep *reopenReport, progress io.Writer) {
	for i, rec := range recs {
		now := time.Now()
		err := func() error {
			in, err := store.Reopen(rec, now, by, reason).UpdateItem(store.Table, store.Key(rec.Key, rec.MessageType))
			if err != nil {
				return err
			}
			_, err = ddb.UpdateItem(ctx, in)
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				return errors.New("changed while it was being reopened (a delivery took it, or another operator): read it again with `inbox get`")
			}
			return err
		}()
		if err != nil {
			rep.Failed = append(rep.Failed, reopenFailure{Key: rec.Key, MessageType: rec.MessageType, Error: err.Error()})
		} else {
			j := inboxJSONOf(rec)
			j.Status = string(inbox.StatusFailedRetryable)
			j.Attempts = 0
			j.ReopenedAt, j.ReopenedBy, j.ReopenReason = inbox.FormatTime(now), by, reason
			rep.Reopened = append(rep.Reopened, j)
		}
		if n := i + 1; len(recs) > 1 && (n%50 == 0 || n == len(recs)) {
			fmt.Fprintf(progress, "[reopen] %d of %d: reopened %d, failed %d\n", n, len(recs), len(rep.Reopened), len(rep.Failed))
		}
	}
}

func printReopen(w io.Writer, app string, rep reopenReport, limit string) {
	verb := "reopened"
	if rep.DryRun {
		verb = "would reopen"
	}
	if len(rep.Reopened)+len(rep.Failed) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "RESULT\tKEY\tTYPE\tCODE\tFAILED AT\tAGGREGATE\tERROR")
		for _, r := range rep.Reopened {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t-\n", verb, r.Key, r.MessageType, orDash(r.FailureCode), orDash(r.FailedAt), orDash(strings.Trim(r.AggregateType+"/"+r.AggregateID, "/")))
		}
		for _, r := range rep.Failed {
			fmt.Fprintf(tw, "failed\t%s\t%s\t-\t-\t-\t%s\n", r.Key, r.MessageType, r.Error)
		}
		_ = tw.Flush()
	}
	lim := ""
	if limit != "" {
		lim = " (" + limit + ")"
	}
	fmt.Fprintf(w, "%s %d%s, failed %d\n", verb, len(rep.Reopened), lim, len(rep.Failed))
	if rep.More {
		fmt.Fprintln(w, "--max reached: more FAILED_TERMINAL records match; reopen them next (or --all)")
	}
	if rep.Rejections > 0 {
		fmt.Fprintf(w, "%d matching rejections left alone: a rejected message has no work to reopen (fix the producer and resend, or `%s dlq discard` its DLQ copy)\n", rep.Rejections, app)
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
		return
	}
	if len(rep.Reopened) == 0 {
		return
	}
	codes := map[string]int{}
	for _, r := range rep.Reopened {
		codes[r.FailureCode]++
	}
	// A work item may have several copies in the DLQ (its duplicates
	// failed too): select them by code, not by count, dry run first.
	filter := "--filter code=CODE (each of " + strings.Join(slices.Sorted(maps.Keys(codes)), ", ") + ")"
	if len(codes) == 1 {
		filter = "--filter code=" + rep.Reopened[0].FailureCode
	}
	next := fmt.Sprintf("`%s dlq redrive --dlq-url \"$DLQ_URL\" %s --dry-run`, then with --queue-url \"$QUEUE_URL\" instead of --dry-run", app, filter)
	fmt.Fprintf(w, "their next delivery runs them again: redrive their messages from the DLQ: %s\n", next)
}
