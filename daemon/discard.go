package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/mutation"
)

// newDiscardCmd is `dlq discard`: the filtered, dry-run-first removal of
// DLQ messages that can never be fixed, each recorded in the inbox first.
func newDiscardCmd(g *globals, f *dlqFlags) *cobra.Command {
	// Its own selection flags: flag variables shared between commands
	// take the default of whichever registered last.
	var (
		reason, by  string
		filters     []string
		max         int
		all, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "discard --filter code=CODE|type=TYPE … --reason TEXT [--dry-run] [--max N | --all]",
		Short: "Remove DLQ messages that can never be fixed, each recorded in the inbox first (filtered, bounded by --max)",
		Long: `discard removes selected messages from the DLQ for good — a type no release
will handle, work nobody wants any more — after recording each removal in the
inbox, so that every message stays accounted for:

  - a message whose work has a FAILED_TERMINAL record (the worker's DLQ copy
    names its key and type): that record gets discardedAt, discardedBy and
    discardReason, fenced on it being the failure read; it stays
    FAILED_TERMINAL, so a later delivery of the same work is refused again;
  - a rejected message (no work record; its rejection record is filed under
    the SQS message id the worker failed): its rejection record, the same way;
  - a message with neither (SQS's redrive policy moved it, or a copy from
    before the inbox knew it): a rejection record is created under its DLQ
    message id, with its failure code, then marked the same way.

A message whose work record is not FAILED_TERMINAL is left in the DLQ and
reported: COMPLETED work makes its redriven copy a harmless duplicate
(redrive it), and reopened or running work may still run.

A filter is required (the DLQ is never discarded unfiltered), --max defaults
to ` + fmt.Sprint(dlq.DefaultMax) + ` and --all lifts it. Run --dry-run first: it lists what would be
removed and what would be recorded, reading the inbox and writing nothing.
"inbox get" and "inbox list --status FAILED_TERMINAL" then show each removal.`,
		Example: examples(g.app.name(),
			`dlq discard --dlq-url "$DLQ_URL" --filter code=UNKNOWN_MESSAGE_TYPE --filter type=OrderCancelled --dry-run`,
			`dlq discard --dlq-url "$DLQ_URL" --filter code=UNKNOWN_MESSAGE_TYPE --filter type=OrderCancelled --all --reason "OrderCancelled is not ours"`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := dlqParseFilters(filters)
			if err != nil {
				return err
			}
			var errs []error
			if filter.IsZero() {
				errs = append(errs, errors.New("--filter is required: name what can never be fixed (code=CODE, type=TYPE); the DLQ is never discarded unfiltered"))
			}
			if all && cmd.Flags().Changed("max") {
				errs = append(errs, errors.New("--all and --max exclude each other"))
			}
			if max < 1 && !all {
				errs = append(errs, fmt.Errorf("--max %d must be at least 1 (or --all)", max))
			}
			if !dryRun && strings.TrimSpace(reason) == "" {
				errs = append(errs, errors.New("--reason is required: say why these messages can never be fixed (it is recorded on each record)"))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			q, err := f.queue(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			acc, err := newDiscardAccount(cmd.Context(), g, by, reason)
			if err != nil {
				return err
			}
			opts := dlq.DiscardOptions{Filter: filter, Max: max, All: all, DryRun: dryRun, Account: acc.account}
			if all {
				opts.Max = 0
			}
			errw := cmd.ErrOrStderr()
			opts.Progress = func(p dlq.DiscardProgress) {
				limit := "all"
				if p.Max > 0 {
					limit = fmt.Sprint(p.Max)
				}
				verb := "discarded"
				if dryRun {
					verb = "would discard"
				}
				fmt.Fprintf(errw, "[discard] scanned %d, %s %d of %s, skipped %d, failed %d\n", p.Scanned, verb, p.Discarded, limit, p.Skipped, p.Failed)
			}
			rep, err := q.Discard(cmd.Context(), opts)
			if f.output == "json" {
				if jerr := dlqWriteJSON(cmd.OutOrStdout(), rep); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else {
				dlqPrintDiscard(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if len(rep.Failed) > 0 {
				return fmt.Errorf("dlq discard: %d selected messages stayed in the DLQ (see above)", len(rep.Failed))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&filters, "filter", nil, "select by exact match: code=CODE or type=TYPE (repeatable, all must match; required)")
	fl.IntVar(&max, "max", dlq.DefaultMax, "remove at most this many messages")
	fl.BoolVar(&all, "all", false, "no --max: remove every selected message")
	fl.BoolVar(&dryRun, "dry-run", false, "list what would be removed and recorded; change nothing")
	fl.StringVar(&reason, "reason", "", "why they can never be fixed (recorded on each record; not needed with --dry-run)")
	fl.StringVar(&by, "by", defaultOperator(), "who removes them (recorded on each record)")
	return cmd
}

// discardAccount records DLQ removals in the inbox.
type discardAccount struct {
	ddb        *dynamodb.Client
	store      inbox.Store
	reader     *inbox.Reader
	committer  *mutation.Committer
	by, reason string
	now        func() time.Time
}

func newDiscardAccount(ctx context.Context, g *globals, by, reason string) (*discardAccount, error) {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	ddb, _ := g.clients(cfg, nil, nil)
	store, err := g.resolveStore(ctx, ddb)
	if err != nil {
		return nil, err
	}
	r, err := inbox.NewReader(ddb, inbox.ReaderConfig{Store: store})
	if err != nil {
		return nil, err
	}
	c, err := mutation.New(ddb, mutation.Config{Store: store})
	if err != nil {
		return nil, err
	}
	return &discardAccount{ddb: ddb, store: store, reader: r, committer: c, by: by, reason: reason, now: time.Now}, nil
}

// account finds where m's work is accounted for and marks its removal
// there (see newDiscardCmd): the work's record, else the rejection of the
// delivery the worker failed, else a new rejection record of m itself.
func (a *discardAccount) account(ctx context.Context, m dlq.Message, dryRun bool) (string, error) {
	if m.IdempotencyKey != "" && m.MessageType != dlq.TypeUnreadable {
		recs, err := a.reader.Get(ctx, m.IdempotencyKey, m.MessageType)
		switch {
		case err == nil:
			rec := recs[0]
			name := fmt.Sprintf("work record %s %s", rec.Key, rec.MessageType)
			if rec.Status != inbox.StatusFailedTerminal {
				return "", fmt.Errorf("its %s is %s, not FAILED_TERMINAL: %s", name, rec.Status, notTerminalAdvice(rec.Status))
			}
			return a.mark(ctx, rec, a.store.Key(rec.Key, rec.MessageType), name, dryRun)
		case !errors.Is(err, inbox.ErrNotFound):
			return "", err
		}
	}
	if m.SourceMessageID != "" {
		rec, err := a.reader.GetRejection(ctx, m.SourceMessageID)
		switch {
		case err == nil:
			return a.mark(ctx, rec, a.store.RejectionKey(m.SourceMessageID), "rejection record rejected:"+m.SourceMessageID, dryRun)
		case !errors.Is(err, inbox.ErrNotFound):
			return "", err
		}
	}
	name := "rejection record rejected:" + m.ID
	if rec, err := a.reader.GetRejection(ctx, m.ID); err == nil { // an earlier discard recorded it, then could not delete
		return a.mark(ctx, rec, a.store.RejectionKey(m.ID), name, dryRun)
	} else if !errors.Is(err, inbox.ErrNotFound) {
		return "", err
	}
	if dryRun {
		return "would create " + name + " (no inbox record of it), marked discarded", nil
	}
	typ := m.MessageType
	if typ == dlq.TypeUnreadable {
		typ = ""
	}
	if err := a.committer.Reject(ctx, &mutation.Rejection{SQSMessageID: m.ID, Code: m.FailureCode, Key: m.IdempotencyKey, MessageType: typ,
		Message: "discarded from the DLQ, where no inbox record accounted for it: " + m.FailureMessage}); err != nil {
		return "", err
	}
	rec, err := a.reader.GetRejection(ctx, m.ID)
	if err != nil {
		return "", err
	}
	note, err := a.mark(ctx, rec, a.store.RejectionKey(m.ID), name, false)
	return strings.Replace(note, "marked", "created and marked", 1), err
}

// mark sets the discard on rec (FAILED_TERMINAL), fenced on it being the
// failure read; one marked already (an earlier discard whose delete
// failed) is left as it is.
func (a *discardAccount) mark(ctx context.Context, rec *inbox.Record, key map[string]types.AttributeValue, name string, dryRun bool) (string, error) {
	switch {
	case rec.Status != inbox.StatusFailedTerminal:
		return "", fmt.Errorf("its %s is %s, not FAILED_TERMINAL: %s", name, rec.Status, notTerminalAdvice(rec.Status))
	case rec.DiscardedAt != "":
		return name + " (discarded already at " + rec.DiscardedAt + ")", nil
	case dryRun:
		return "would mark " + name + " discarded", nil
	}
	in, err := a.store.Discard(rec, a.now(), a.by, a.reason).UpdateItem(a.store.Table, key)
	if err != nil {
		return "", err
	}
	_, err = a.ddb.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return "", fmt.Errorf("its %s changed while it was being marked (a delivery or a reopen): read it again with `inbox get`", name)
	}
	if err != nil {
		return "", fmt.Errorf("mark %s discarded: %w", name, err)
	}
	return "marked " + name + " discarded", nil
}

func notTerminalAdvice(s inbox.Status) string {
	if s == inbox.StatusCompleted {
		return "its work completed, and a redriven copy is a harmless duplicate (`dlq redrive` it)"
	}
	return "it was reopened or is running and may still run: redrive it, or leave it"
}

func dlqPrintDiscard(w io.Writer, rep dlq.DiscardReport) {
	verb := "discarded"
	if rep.DryRun {
		verb = "would discard"
	}
	tw := dlqTable(w)
	fmt.Fprintln(tw, "RESULT\tDLQ ID\tCODE\tTYPE\tKEY\tRECORDED / ERROR")
	for _, d := range rep.Discarded {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", verb, d.ID, d.Code, d.Type, orDash(dlqExcerpt(d.Key, dlqKeyChars)), d.Recorded)
	}
	for _, d := range rep.Failed {
		what := d.Error
		if d.Step == "delete" {
			what = d.Recorded + "; not deleted: " + d.Error
		}
		fmt.Fprintf(tw, "failed (%s)\t%s\t%s\t%s\t%s\t%s\n", d.Step, d.ID, d.Code, d.Type, orDash(dlqExcerpt(d.Key, dlqKeyChars)), what)
	}
	tw.Flush()
	limit := "all"
	if rep.Max > 0 {
		limit = fmt.Sprintf("at most %d", rep.Max)
	}
	fmt.Fprintf(w, "%s %d (%s); skipped %d (filter), %d over the limit, %d arrived during the discard, failed %d; scanned %d, %d matching, in %s\n",
		verb, len(rep.Discarded), limit, rep.Skipped, rep.OverMax, rep.Arrived, len(rep.Failed), rep.Scanned, rep.Matched, rep.Duration.Round(time.Millisecond))
	if len(rep.Discarded) > 0 {
		var by []string
		for _, k := range dlqSortedCounts(rep.ByCode) {
			by = append(by, fmt.Sprintf("%s %d", k, rep.ByCode[k]))
		}
		fmt.Fprintf(w, "%s by code: %s\n", verb, strings.Join(by, ", "))
		by = by[:0]
		for _, k := range dlqSortedCounts(rep.ByType) {
			by = append(by, fmt.Sprintf("%s %d", k, rep.ByType[k]))
		}
		fmt.Fprintf(w, "%s by type: %s\n", verb, strings.Join(by, ", "))
	}
	switch {
	case rep.DryRun:
		fmt.Fprintln(w, "dry run: nothing removed or recorded; every message is still in the DLQ")
	case len(rep.Discarded) > 0:
		fmt.Fprintln(w, "each removal is recorded in the inbox (discardedAt, discardedBy, discardReason): `inbox get KEY` or `inbox get rejected:<id>` shows it")
	}
	switch {
	case rep.LimitReached:
		fmt.Fprintf(w, "--max reached: at least %d more matching messages remain in the DLQ\n", rep.OverMax)
	case !rep.Complete:
		fmt.Fprintln(w, "the scan stopped at its limit: more matching messages may remain in the DLQ")
	case rep.Matched == 0:
		fmt.Fprintln(w, "no message in the DLQ matched")
	case rep.Arrived+len(rep.Failed) > 0:
		fmt.Fprintln(w, "the whole DLQ was scanned: the matching messages left are the newly arrived and the failed above")
	case rep.DryRun:
		fmt.Fprintln(w, "the whole DLQ was scanned: every matching message would be removed")
	default:
		fmt.Fprintln(w, "the whole DLQ was scanned: every matching message was removed")
	}
}
