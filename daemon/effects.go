package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/inbox"
)

type effectsFlags struct {
	output string
	table  string
	// list
	status   string
	provider string
	limit    int
	cursor   string
	all      bool
	// resolve
	completed bool
	notDone   bool
	ref       string
	result    string
	reason    string
	by        string
}

func newEffectsCmd(g *globals) *cobra.Command {
	f := &effectsFlags{}
	cmd := &cobra.Command{
		Use:   "effects",
		Short: "Read the external-effect log, and resolve effects whose outcome is unknown",
		Long: `effects reads the log handlers keep of their calls to outside providers
(package effects): one record per effect of a work item, keyed
MESSAGE_TYPE/IDEMPOTENCY_KEY/NAME — the key the provider received as its
idempotency key. "list" lists them (UNKNOWN ones from the attention index,
other statuses by scanning the table); "get" shows one; "resolve" settles an
UNKNOWN effect — a call to a provider without idempotency keys that may or may
not have happened — after an operator checked the provider's own records.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.output, "output", "o", "table", "output: table or json")
	pf.StringVar(&f.table, "effects-table", "", "table of the effect records (default: --table)")

	list := &cobra.Command{
		Use:   "list [--status STATUS] [--provider P]",
		Short: "List effects by status and provider (UNKNOWN ones wait for an operator)",
		Long: `list lists effect records a page at a time. --status UNKNOWN reads the
attention index (cheap); any other listing scans the table for effect records
(it reads the whole table: mind its size and use --limit).

Statuses: STARTED (a call may be in progress, or was cut short), COMPLETED,
FAILED (the provider refused), NOT_DONE (certainly not done; the next attempt
calls again), UNKNOWN (resolve it).`,
		Example: examples(g.app.name(),
			"effects list --status UNKNOWN",
			"effects list --status STARTED --provider payments -o json",
			"effects list --all"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.limit < 1 || f.limit > effects.MaxPageLimit {
				return fmt.Errorf("--limit %d must be within 1..%d", f.limit, effects.MaxPageLimit)
			}
			a, err := newEffectsAdmin(cmd, g, f)
			if err != nil {
				return err
			}
			filter := effects.Filter{Status: effects.Status(strings.ToUpper(f.status)), Provider: f.provider}
			page := effects.Page{Limit: f.limit, Cursor: f.cursor}
			var all []*effects.Effect
			for {
				l, err := a.List(cmd.Context(), filter, page)
				if err != nil {
					return err
				}
				all = append(all, l.Effects...)
				page.Cursor = l.Next
				if !f.all || l.Next == "" {
					break
				}
			}
			if f.output == "json" {
				return effectsWriteJSON(cmd.OutOrStdout(), all, page.Cursor)
			}
			effectsPrintTable(cmd.OutOrStdout(), all, page.Cursor)
			return nil
		},
	}
	fl := list.Flags()
	fl.StringVar(&f.status, "status", "", "only this status: STARTED, COMPLETED, FAILED, NOT_DONE or UNKNOWN")
	fl.StringVar(&f.provider, "provider", "", "only this provider")
	fl.IntVar(&f.limit, "limit", effects.DefaultPageLimit, fmt.Sprintf("effects per page, 1..%d", effects.MaxPageLimit))
	fl.StringVar(&f.cursor, "cursor", "", "resume after a previous page (its \"next page\" cursor)")
	fl.BoolVar(&f.all, "all", false, "follow every page to the end")

	get := &cobra.Command{
		Use:     "get KEY",
		Short:   "Show one effect record",
		Example: examples(g.app.name(), "effects get OrderPaymentRequested/order-42:payment/charge"),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			a, err := newEffectsAdmin(cmd, g, f)
			if err != nil {
				return err
			}
			e, err := a.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.output == "json" {
				return effectsWriteJSON(cmd.OutOrStdout(), []*effects.Effect{e}, "")
			}
			effectsPrintDetail(cmd.OutOrStdout(), e, time.Now())
			return nil
		},
	}

	resolve := &cobra.Command{
		Use:   "resolve KEY (--completed --ref REF [--result TEXT] | --not-done) --reason TEXT",
		Short: "Settle an UNKNOWN effect after checking the provider's records (fenced, audited)",
		Long: `resolve settles one effect whose outcome the log does not know: UNKNOWN, or
STARTED with its call lease over. Look the key up in the provider's own records
(it was sent as the idempotency key or reference), then:

  --completed --ref REF   the provider did it: REF is its reference. No attempt
                          of the work calls the provider for this effect again.
  --not-done              the provider did not do it: the next attempt calls
                          it again (with the same key).

The write is fenced on the record being exactly as read, and records who
(--by), when and why (--reason). The work itself failed with
EFFECT_OUTCOME_UNKNOWN: reopen it and redrive its message from the DLQ.`,
		Example: examples(g.app.name(),
			`effects resolve OrderPaymentRequested/order-42:payment/charge --completed --ref ch_3PqL… --reason "charge found in the provider dashboard"`,
			`inbox reopen order-42:payment --type OrderPaymentRequested --reason "effect resolved"`,
			"dlq redrive --filter code=EFFECT_OUTCOME_UNKNOWN --max 1"),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.completed == f.notDone {
				return errors.New("give exactly one of --completed (with --ref) or --not-done")
			}
			if f.completed && f.ref == "" {
				return errors.New("--completed needs --ref: the provider's reference of what it did")
			}
			if f.notDone && (f.ref != "" || f.result != "") {
				return errors.New("--not-done takes no --ref or --result")
			}
			if strings.TrimSpace(f.reason) == "" {
				return errors.New("--reason is required: say how you know")
			}
			a, err := newEffectsAdmin(cmd, g, f)
			if err != nil {
				return err
			}
			e, err := a.Resolve(cmd.Context(), args[0], effects.Resolution{Completed: f.completed, NotDone: f.notDone,
				Ref: f.ref, Result: f.result, By: f.by, Reason: f.reason})
			if err != nil {
				return err
			}
			if f.output == "json" {
				return effectsWriteJSON(cmd.OutOrStdout(), []*effects.Effect{e}, "")
			}
			out := cmd.OutOrStdout()
			effectsPrintDetail(out, e, time.Now())
			fmt.Fprintf(out, "resolved %s. Its work failed with %s: reopen it, then redrive its message, e.g.\n  %s inbox reopen %s --type %s --reason %q\n  %s dlq redrive --filter code=%s --max 1\n",
				e.Resolution, effects.CodeOutcomeUnknown, g.app.name(), e.WorkKey, e.MessageType, "effect "+e.Name+" resolved", g.app.name(), effects.CodeOutcomeUnknown)
			return nil
		},
	}
	rf := resolve.Flags()
	rf.BoolVar(&f.completed, "completed", false, "the provider did it (give --ref)")
	rf.BoolVar(&f.notDone, "not-done", false, "the provider did not do it: the next attempt calls again")
	rf.StringVar(&f.ref, "ref", "", "the provider's reference (with --completed)")
	rf.StringVar(&f.result, "result", "", "what else to record of the provider's answer (with --completed)")
	rf.StringVar(&f.reason, "reason", "", "how you know (recorded on the effect)")
	rf.StringVar(&f.by, "by", defaultOperator(), "who resolves it (recorded on the effect)")

	cmd.AddCommand(list, get, resolve)
	return cmd
}

func newEffectsAdmin(cmd *cobra.Command, g *globals, f *effectsFlags) (*effects.Admin, error) {
	ctx := cmd.Context()
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	ddb, _ := g.clients(cfg, nil, nil)
	store, err := g.resolveStore(ctx, ddb)
	if err != nil {
		return nil, err
	}
	return effects.NewAdmin(ddb, effects.AdminConfig{Inbox: store, Table: f.table})
}

// effectJSON is an effect in JSON output; every field is always present.
type effectJSON struct {
	Key            string `json:"effectKey"`
	Name           string `json:"effectName"`
	WorkKey        string `json:"workKey"`
	MessageType    string `json:"messageType"`
	Provider       string `json:"provider"`
	Operation      string `json:"operation"`
	Idempotent     bool   `json:"idempotent"`
	Status         string `json:"status"`
	ProviderRef    string `json:"providerRef"`
	Result         string `json:"result"`
	FailureCode    string `json:"failureCode"`
	FailureMessage string `json:"failureMessage"`
	LastError      string `json:"lastError"`
	Calls          int    `json:"calls"`
	WorkAttempt    int    `json:"workAttempt"`
	RequestHash    string `json:"requestHash"`
	HashVersion    int    `json:"hashVersion"`
	CallExpiresAt  string `json:"callExpiresAt"`
	CreatedAt      string `json:"createdAt"`
	StartedAt      string `json:"startedAt"`
	CompletedAt    string `json:"completedAt"`
	FailedAt       string `json:"failedAt"`
	UnknownAt      string `json:"unknownAt"`
	CommittedAt    string `json:"committedAt"`
	Resolution     string `json:"resolution"`
	ResolvedAt     string `json:"resolvedAt"`
	ResolvedBy     string `json:"resolvedBy"`
	ResolveReason  string `json:"resolveReason"`
	TTL            int64  `json:"ttl"`
}

func effectsWriteJSON(w io.Writer, es []*effects.Effect, next string) error {
	doc := struct {
		Effects []effectJSON `json:"effects"`
		Next    string       `json:"next"`
	}{Effects: make([]effectJSON, 0, len(es)), Next: next}
	for _, e := range es {
		doc.Effects = append(doc.Effects, effectJSON{Key: e.Key, Name: e.Name, WorkKey: e.WorkKey, MessageType: e.MessageType,
			Provider: e.Provider, Operation: e.Operation, Idempotent: e.Idempotent, Status: string(e.Status),
			ProviderRef: e.ProviderRef, Result: e.Result, FailureCode: e.FailureCode, FailureMessage: e.FailureMessage,
			LastError: e.LastError, Calls: e.Calls, WorkAttempt: e.WorkAttempt, RequestHash: e.RequestHash, HashVersion: e.HashVersion,
			CallExpiresAt: inbox.FormatTime(e.CallExpiresAt), CreatedAt: e.CreatedAt, StartedAt: e.StartedAt,
			CompletedAt: e.CompletedAt, FailedAt: e.FailedAt, UnknownAt: e.UnknownAt, CommittedAt: e.CommittedAt,
			Resolution: e.Resolution, ResolvedAt: e.ResolvedAt, ResolvedBy: e.ResolvedBy, ResolveReason: e.ResolveReason, TTL: e.TTL})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func effectsPrintTable(w io.Writer, es []*effects.Effect, next string) {
	if len(es) == 0 {
		fmt.Fprintln(w, "no effects")
	} else {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATUS\tPROVIDER\tOPERATION\tREF/CODE\tCALLS\tSTARTED\tSETTLED\tCOMMITTED")
		for _, e := range es {
			ref, at := e.ProviderRef, e.CompletedAt
			switch e.Status {
			case effects.StatusFailed:
				ref, at = e.FailureCode, e.FailedAt
			case effects.StatusUnknown:
				ref, at = "", e.UnknownAt
			case effects.StatusNotDone:
				ref, at = "", e.ResolvedAt
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Key, e.Status, e.Provider, e.Operation, orDash(ref),
				e.Calls, orDash(e.StartedAt), orDash(at), orDash(e.CommittedAt))
		}
		_ = tw.Flush()
	}
	if next != "" {
		fmt.Fprintf(w, "next page: --cursor %s\n", next)
	}
}

func effectsPrintDetail(w io.Writer, e *effects.Effect, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(name, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, v)
		}
	}
	field("effectKey", e.Key)
	field("status", string(e.Status))
	field("work", e.MessageType+" "+e.WorkKey)
	field("effectName", e.Name)
	field("provider", e.Provider+" "+e.Operation)
	field("idempotent", strconv.FormatBool(e.Idempotent))
	field("providerRef", e.ProviderRef)
	field("result", e.Result)
	field("failureCode", e.FailureCode)
	field("failureMessage", e.FailureMessage)
	field("lastError", e.LastError)
	field("calls", strconv.Itoa(e.Calls))
	field("workAttempt", strconv.Itoa(e.WorkAttempt))
	if !e.CallExpiresAt.IsZero() {
		s := inbox.FormatTime(e.CallExpiresAt)
		if !now.Before(e.CallExpiresAt) {
			s += " (over)"
		}
		field("callExpiresAt", s)
	}
	field("createdAt", e.CreatedAt)
	field("startedAt", e.StartedAt)
	field("completedAt", e.CompletedAt)
	field("failedAt", e.FailedAt)
	field("unknownAt", e.UnknownAt)
	field("committedAt", e.CommittedAt)
	if e.Resolution != "" {
		field("resolved", e.Resolution+" at "+e.ResolvedAt+" by "+e.ResolvedBy+": "+e.ResolveReason)
	}
	field("requestHash", fmt.Sprintf("%s (v%d)", e.RequestHash, e.HashVersion))
	if e.TTL != 0 {
		field("ttl", time.Unix(e.TTL, 0).UTC().Format(time.RFC3339))
	} else if e.Status == effects.StatusUnknown {
		field("ttl", "none (kept until resolved)")
	}
	_ = tw.Flush()
}
