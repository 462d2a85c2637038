package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

type adoptFlags struct {
	wait          time.Duration
	stream        bool
	dryRun        bool
	yes           bool
	shareIndexes  []string
	scanAll       bool
	ttlExisting   bool
	output        string
	readCapacity  int64
	writeCapacity int64
	maxIndexes    int
}

func newAdoptCmd(g *globals) *cobra.Command {
	f := &adoptFlags{}
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Add what the inbox needs to an existing table (its indexes, TTL, the settings item), changing nothing of the application's",
		Long: `adopt makes an existing table — one that holds an application's items, its
own indexes, maybe a TTL attribute of its own — fit the inbox layout the flags
name, without writing any of its items. It prints the plan first: each change
in order, what it leaves alone, warnings, and what blocks it; then asks
"Apply these N changes? [y/N]" and applies exactly what it printed — unless
--dry-run (plan only) or --yes (no question; required when stdin is not a
terminal):

  - the layout's two indexes, KEYS_ONLY, each created with its own UpdateTable
    (DynamoDB creates one at a time) and waited for until its backfill ends
    (at most --wait each; the backfill goes on after that, and adopting again
    waits for it);
  - TTL on --ttl-attribute, unless TTL is on already: then --ttl-attribute
    must name the table's own TTL attribute (one per table, and DynamoDB
    forbids changing it while enabled);
  - the stream (NEW_IMAGE) with --stream;
  - the inbox settings item (DDBWORKER#CONFIG / INBOX), as tables create
    records it: the settings and the layout.

Nothing of the application's changes without a flag that says so; what would
change it blocks the plan, before anything is done, naming the flag that fixes
it, and the plan then ends with a layout of names the table does not use
(ddbworker-aggregate, ddbworkerGSI1PK, …, ddbworkerTTL):

  - an existing index of the layout's name that ddbworker did not create (not
    named ddbworker-…, and its first 100 items not all inbox records, or
    empty but not KEYS_ONLY), or an index of the application's keyed on
    attributes the inbox records write: the records would enter it.
    --share-index NAME shares it;
  - items of the application's (the first 1,000 read; --scan-all reads them
    all, with progress on stderr) carrying a key of an index to create with
    another type than a string: DynamoDB would refuse their writes;
  - items of the application's carrying the TTL attribute when TTL is off
    (the plan counts those DynamoDB would delete within about two days), or
    a table larger than the sample: --ttl-existing-items enables TTL anyway,
    --scan-all reads every item;
  - what cannot change: the table's key (a partition and a sort key of
    strings; their names come from its key schema), an index of the layout's
    name with other keys, a layout attribute the table types other than a
    string, a TTL on another attribute (--ttl-attribute), more indexes than
    the table's quota (--max-indexes).

The layout is recorded in the table with the settings item, and every
command (run, sweep, inbox, relay, the Lambda function) reads it from there:
after adopting, none of them needs a layout flag or DDBWORKER_* layout
variable, and one given a layout flag that disagrees with the record refuses,
naming both values. adopt itself plans for the recorded layout when the table
records one: adopting again with no layout flag changes nothing, and a layout
flag that disagrees is refused the same way.`,
		Example: examples(g.app.name(),
			"tables adopt --table orders --ttl-attribute expiresAt --dry-run",
			"tables adopt --table orders --ttl-attribute expiresAt --wait 3h",
			"tables adopt --table shop --aggregate-index ddbworker-aggregate --aggregate-pk-attribute ddbworkerGSI1PK --aggregate-sk-attribute ddbworkerGSI1SK --scan-all --yes"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdopt(cmd.Context(), g, f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.wait, "wait", tables.DefaultAdoptWait, "how long to wait for each index's backfill (and for the table to take each update)")
	fl.BoolVar(&f.stream, "stream", false, "also turn the table's DynamoDB Stream on (NEW_IMAGE), for `relay` (the outbox)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan only; change nothing")
	fl.BoolVarP(&f.yes, "yes", "y", false, "apply the plan as printed without asking (required when stdin is not a terminal)")
	fl.StringSliceVar(&f.shareIndexes, "share-index", nil, "share this existing index of the application's with the inbox records, which then enter it (repeatable)")
	fl.BoolVar(&f.scanAll, "scan-all", false, "read every item (not only the first 1,000) before creating an index or enabling TTL; progress on stderr")
	fl.BoolVar(&f.ttlExisting, "ttl-existing-items", false, "enable TTL on --ttl-attribute even though items of the application carry it: DynamoDB deletes those in the past within about two days")
	fl.StringVarP(&f.output, "output", "o", "table", "output: table or json (progress then goes to stderr)")
	fl.Int64Var(&f.readCapacity, "index-read-capacity", 0, "provisioned tables: each new index's RCU (0: the table's)")
	fl.Int64Var(&f.writeCapacity, "index-write-capacity", 0, "provisioned tables: each new index's WCU (0: the table's)")
	fl.IntVar(&f.maxIndexes, "max-indexes", tables.DefaultMaxIndexes, "the table's quota of global secondary indexes (DynamoDB's default: 20)")
	return cmd
}

// kindRecordSettings is the plan's last step, the daemon's own: recording
// the inbox settings in the table.
const kindRecordSettings = "record-settings"

// adoptDoc is the plan as printed: for people, or as JSON.
type adoptDoc struct {
	Table    string            `json:"table"`
	DryRun   bool              `json:"dryRun"`
	Layout   map[string]string `json:"layout"` // flag → value
	Changes  []adoptChangeDoc  `json:"changes"`
	Kept     []adoptKeptDoc    `json:"kept"`
	Warnings []string          `json:"warnings"`
	Blockers []adoptBlockerDoc `json:"blockers"`
	// Proposed are, when something blocks, the layout flags of names the
	// table does not use (empty when no name fixes a blocker).
	Proposed string `json:"proposed,omitempty"`
}

type adoptChangeDoc struct {
	Step   int    `json:"step"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Detail string `json:"detail"`
}

type adoptKeptDoc struct {
	Target string `json:"target"`
	Detail string `json:"detail"`
}

type adoptBlockerDoc struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
	Flag    string `json:"flag,omitempty"`    // the flag that would fix it (without its dashes)
	Suggest string `json:"suggest,omitempty"` // the value that fits: the table's, or a name it does not use
	Allow   string `json:"allow,omitempty"`   // the flag (and value) that allows it explicitly
}

func runAdopt(ctx context.Context, g *globals, f *adoptFlags, in io.Reader, out, errOut io.Writer) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	awsCfg, err := g.awsConfig(ctx)
	if err != nil {
		return err
	}
	ddb, _ := g.clients(awsCfg, nil, nil)
	// The plan is for the layout every other command would use: the one the
	// table records, where it records one (adopting again with no layout
	// flag then changes nothing), and the table's own key attributes. A
	// layout flag that disagrees with the record is refused here, naming
	// both: the records already written live under the recorded names.
	m, err := g.mergeStore(ctx, ddb, false)
	if err != nil {
		return err
	}
	g.newTableHash(&m)
	s := m.store
	cfg := tables.AdoptConfig{Name: s.Table, Layout: s.Layout, Stream: f.stream,
		IndexReadCapacity: f.readCapacity, IndexWriteCapacity: f.writeCapacity, MaxIndexes: f.maxIndexes,
		ShareIndexes: f.shareIndexes, ScanAll: f.scanAll, TTLExistingItems: f.ttlExisting}
	if f.scanAll {
		cfg.ScanProgress = scanProgress(errOut, s.Table)
	}
	plan, err := tables.Plan(ctx, ddb, cfg)
	if failure.APICode(err) == "ResourceNotFoundException" {
		return fmt.Errorf("table %q does not exist: `%s tables create` makes it, or set --table (DDBWORKER_TABLE)", s.Table, g.app.name())
	}
	if err != nil {
		return err
	}
	doc := newAdoptDoc(plan, f.dryRun)
	// The settings item lives under the table's key: it can be written
	// only when the key fits.
	var record *inbox.Store // the settings to record, when they must be
	if plan.KeyFits {
		doc.addSettings(m)
		if settingsNeeded(m) {
			record = &m.store
		}
	}
	progress := out
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
		progress = errOut
	} else {
		doc.print(out)
	}
	if len(plan.Blockers) > 0 {
		errs := make([]error, len(plan.Blockers))
		for i, b := range plan.Blockers {
			errs[i] = &adoptRefusal{AdoptError: b, hint: fixText(doc.Blockers[i])}
		}
		err := fmt.Errorf("table %s cannot be adopted; nothing was changed:\n%w", s.Table, errors.Join(errs...))
		if doc.Proposed != "" {
			err = fmt.Errorf("%w\n%s", err, proposedText(g, doc.Proposed))
		}
		return err
	}
	if f.dryRun || len(doc.Changes) == 0 {
		return nil
	}
	steps := len(doc.Changes) // the plan's, and the settings item
	if !f.yes {
		if err := confirm(in, progress, s.Table, steps); err != nil {
			return err
		}
	}
	err = tables.Adopt(ctx, ddb, plan, tables.AdoptOptions{Wait: f.wait, Progress: func(p tables.Progress) { printProgress(progress, p, steps) }})
	if errors.Is(err, tables.ErrNotActive) {
		return fmt.Errorf("%w (--wait %s): run `%s tables adopt` again with the same flags to wait for it and finish", err, f.wait, g.app.name())
	}
	if err != nil {
		return err
	}
	if record != nil {
		if err := g.recordStore(ctx, ddb, *record, true); err != nil {
			return err
		}
		fmt.Fprintf(progress, "  [%d/%d] %s %s — done\n", steps, steps, kindRecordSettings, settingsTarget)
	}
	fmt.Fprintf(progress, "table %s adopted: indexes %s and %s, TTL on %q\n", s.Table, s.Layout.AggregateIndex, s.Layout.AttentionIndex, s.Layout.TTL)
	fmt.Fprintf(progress, "inbox layout recorded in the table: %s\n", recordedLayoutFlags(s.Layout))
	fmt.Fprintf(progress, "every command on it (run, sweep, inbox, relay, the Lambda function) reads the layout from the table: give them no layout flag or DDBWORKER_* layout variable (one that disagrees with the record is refused)\n")
	return nil
}

// adoptRefusal is a blocker with the flag that would fix it.
type adoptRefusal struct {
	*tables.AdoptError
	hint string
}

func (e *adoptRefusal) Error() string { return e.Subject + ": " + e.Reason + e.hint }
func (e *adoptRefusal) Unwrap() error { return e.AdoptError }

// fixText names the flags that fix a blocker: the layout flag with the
// value that fits, and the flag that allows it explicitly.
func fixText(b adoptBlockerDoc) string {
	var fixes []string
	switch {
	case b.Flag != "" && b.Suggest != "":
		fixes = append(fixes, fmt.Sprintf("pass --%s %s (%s)", b.Flag, b.Suggest, envName(b.Flag)))
	case b.Flag != "":
		fixes = append(fixes, fmt.Sprintf("choose another name with --%s (%s)", b.Flag, envName(b.Flag)))
	}
	flag, _, _ := strings.Cut(b.Allow, " ")
	switch flag {
	case "":
	case "share-index":
		fixes = append(fixes, fmt.Sprintf("--%s to share it", b.Allow))
	case "ttl-existing-items":
		fixes = append(fixes, fmt.Sprintf("--%s to enable TTL on it anyway", b.Allow))
	case "scan-all":
		fixes = append(fixes, fmt.Sprintf("--%s to read every item", b.Allow))
	}
	if len(fixes) == 0 {
		return ""
	}
	return ": " + strings.Join(fixes, ", or ")
}

// allowFlag is the flag (and its value) of an AdoptConfig option that
// allows a blocker explicitly, "" for none.
func allowFlag(b *tables.AdoptError) string {
	switch b.Option {
	case "ShareIndexes":
		return "share-index " + b.OptionValue
	case "ScanAll":
		return "scan-all"
	case "TTLExistingItems":
		return "ttl-existing-items"
	}
	return ""
}

// proposedText says how to adopt the table with names it does not use.
func proposedText(g *globals, flags string) string {
	return fmt.Sprintf("names your table does not use (adopting records them in the table, for every command on it): %s — plan with them: `%s tables adopt --dry-run %s`", flags, g.app.name(), flags)
}

// errNotConfirmed ends an adoption the operator did not confirm.
var errNotConfirmed = errors.New("tables adopt: not confirmed; nothing was changed")

// confirm asks whether to apply the plan's steps, on a terminal; without
// one it refuses, naming --yes.
func confirm(in io.Reader, w io.Writer, table string, steps int) error {
	if !isTerminal(in) {
		return fmt.Errorf("%w: stdin is not a terminal to ask on — pass --yes to apply the %d changes as printed, or --dry-run to only plan", errNotConfirmed, steps)
	}
	fmt.Fprintf(w, "Apply these %d changes to table %s? Only y or yes applies them. [y/N] ", steps, table)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return fmt.Errorf("%w: no answer (%v) — pass --yes to apply the %d changes as printed, or --dry-run to only plan", errNotConfirmed, err, steps)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w (answered %q)", errNotConfirmed, strings.TrimSpace(line))
}

// isTerminal reports whether in is a terminal (a character device: a
// closed or redirected stdin is not, and /dev/null answers nothing).
func isTerminal(in io.Reader) bool {
	f, ok := in.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// scanProgress prints the full scan's progress on w, at most once a
// second, and its end.
func scanProgress(w io.Writer, table string) func(tables.ScanProgress) {
	start, last := time.Now(), time.Time{}
	return func(p tables.ScanProgress) {
		if !p.Done && time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		state := "reading"
		if p.Done {
			state = "read"
		}
		pages := "pages"
		if p.Pages == 1 {
			pages = "page"
		}
		fmt.Fprintf(w, "  checking the items of %s: %d %s (%d %s, %s)\n", table, p.Read, state, p.Pages, pages, time.Since(start).Round(100*time.Millisecond))
	}
}

const settingsTarget = "DDBWORKER#CONFIG/INBOX"

// settingsNeeded reports whether the settings item must be written: the
// table records none, not all of them, or other values than the flags
// give explicitly.
func settingsNeeded(m merged) bool { return !m.complete || len(m.changed) > 0 }

func newAdoptDoc(plan tables.AdoptPlan, dryRun bool) *adoptDoc {
	doc := &adoptDoc{Table: plan.Table, DryRun: dryRun, Layout: map[string]string{},
		Changes: []adoptChangeDoc{}, Kept: []adoptKeptDoc{}, Warnings: append([]string{}, plan.Warnings...), Blockers: []adoptBlockerDoc{}}
	for _, lf := range layoutFlags(plan.Layout) {
		doc.Layout[lf.flag] = lf.value
	}
	for i, c := range plan.Changes {
		doc.Changes = append(doc.Changes, adoptChangeDoc{Step: i + 1, Kind: string(c.Kind), Target: c.Target, Detail: c.Detail})
	}
	for _, k := range plan.Kept {
		doc.Kept = append(doc.Kept, adoptKeptDoc{Target: k.Target, Detail: k.Detail})
	}
	for _, b := range plan.Blockers {
		doc.Blockers = append(doc.Blockers, adoptBlockerDoc{Subject: b.Subject, Reason: b.Reason, Flag: layoutFlag(b.Field), Suggest: b.Suggest, Allow: allowFlag(b)})
	}
	if len(plan.Blockers) > 0 && plan.Proposed != plan.Layout {
		doc.Proposed = layoutGiven(plan.Proposed)
	}
	return doc
}

// addSettings adds the settings item: a change when it must be written,
// else kept.
func (d *adoptDoc) addSettings(m merged) {
	if !settingsNeeded(m) {
		d.Kept = append(d.Kept, adoptKeptDoc{Target: "inbox settings", Detail: settingsFlags(m.store) + ": recorded in the table"})
		return
	}
	why := "none recorded yet"
	switch {
	case len(m.changed) > 0:
		why = "changed: " + strings.Join(m.changed, "; ") + " — restart every worker so that all of them use the new settings"
	case m.recorded:
		why = "the table's record lacks some of them"
	}
	d.Changes = append(d.Changes, adoptChangeDoc{Step: len(d.Changes) + 1, Kind: kindRecordSettings, Target: settingsTarget,
		Detail: fmt.Sprintf("PutItem %s (%s)", settingsFlags(m.store), why)})
}

func (d *adoptDoc) print(w io.Writer) {
	mode := "plan"
	if d.DryRun {
		mode = "plan (dry run: nothing is changed)"
	}
	fmt.Fprintf(w, "tables adopt %s for table %s, layout %s\n\n", mode, d.Table, layoutText(d.Layout))
	if len(d.Changes) == 0 && len(d.Blockers) == 0 {
		fmt.Fprintf(w, "nothing to change: the table fits the layout\n\n")
	} else if len(d.Changes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tCHANGE\tTARGET\tDETAIL")
		for _, c := range d.Changes {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.Step, c.Kind, c.Target, c.Detail)
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "LEFT ALONE\tDETAIL")
	for _, k := range d.Kept {
		fmt.Fprintf(tw, "%s\t%s\n", k.Target, k.Detail)
	}
	_ = tw.Flush()
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "\nwarning: %s\n", warn)
	}
	for _, b := range d.Blockers {
		fmt.Fprintf(w, "\nBLOCKED %s: %s%s\n", b.Subject, b.Reason, fixText(b))
	}
	if d.Proposed != "" {
		fmt.Fprintf(w, "\nnames your table does not use (adopting records them in the table, for every command on it): %s\n", d.Proposed)
	}
	fmt.Fprintln(w)
}

// printProgress prints one line of an applying change.
func printProgress(w io.Writer, p tables.Progress, steps int) {
	line := fmt.Sprintf("  [%d/%d] %s %s: ", p.Step, steps, p.Change.Kind, p.Change.Target)
	switch ix := p.Index; {
	case ix != nil && aws.ToString(ix.IndexName) != p.Change.Target:
		line += fmt.Sprintf("waiting for index %s (%s) to finish first", aws.ToString(ix.IndexName), ix.IndexStatus)
	case ix != nil:
		line += string(ix.IndexStatus)
		if aws.ToBool(ix.Backfilling) {
			line += ", backfilling"
		}
		if ix.ItemCount != nil || ix.IndexSizeBytes != nil {
			line += fmt.Sprintf(", %d items, %d bytes", aws.ToInt64(ix.ItemCount), aws.ToInt64(ix.IndexSizeBytes))
		}
	case p.TableStatus != "":
		line += "table " + string(p.TableStatus)
	}
	if p.Done {
		line = strings.TrimSuffix(strings.TrimSuffix(line, ": "), ", ")
		fmt.Fprintf(w, "%s — done in %s\n", line, p.Elapsed.Round(time.Second))
		return
	}
	fmt.Fprintf(w, "%s, %s elapsed\n", line, p.Elapsed.Round(time.Second))
}

// layoutFlag is a layout field's flag (without its dashes), "" for none.
func layoutFlag(field string) string {
	for _, lf := range layoutFlags(tables.Layout{}) {
		if lf.field == field {
			return lf.flag
		}
	}
	return ""
}

// layoutFlags are the layout's flags, each with the Layout field it sets
// and its value in l.
func layoutFlags(l tables.Layout) []struct{ field, flag, value string } {
	return []struct{ field, flag, value string }{
		{"PartitionKey", "pk-attribute", l.PartitionKey}, {"SortKey", "sk-attribute", l.SortKey},
		{"AggregateIndex", "aggregate-index", l.AggregateIndex}, {"AggregatePK", "aggregate-pk-attribute", l.AggregatePK},
		{"AggregateSK", "aggregate-sk-attribute", l.AggregateSK},
		{"AttentionIndex", "attention-index", l.AttentionIndex}, {"AttentionPK", "attention-pk-attribute", l.AttentionPK},
		{"AttentionSK", "attention-sk-attribute", l.AttentionSK},
		{"TTL", "ttl-attribute", l.TTL},
	}
}

// layoutGiven shows the layout's flags whose values are not the defaults.
func layoutGiven(l tables.Layout) string {
	d := layoutFlags(tables.DefaultLayout())
	var given []string
	for i, lf := range layoutFlags(l) {
		if lf.value != d[i].value {
			given = append(given, "--"+lf.flag+" "+lf.value)
		}
	}
	return strings.Join(given, " ")
}

// layoutText shows a layout compactly: key, indexes and TTL.
func layoutText(l map[string]string) string {
	return fmt.Sprintf("key (%s, %s), aggregate index %s (%s, %s), attention index %s (%s, %s), TTL %s",
		l["pk-attribute"], l["sk-attribute"], l["aggregate-index"], l["aggregate-pk-attribute"], l["aggregate-sk-attribute"],
		l["attention-index"], l["attention-pk-attribute"], l["attention-sk-attribute"], l["ttl-attribute"])
}
