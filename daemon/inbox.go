package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
)

type inboxFlags struct {
	output string
	// get
	msgType   string
	rejection bool
	item      []string
	itemTable string
	// list
	aggregate  string
	status     string
	code       string
	since      string
	until      string
	limit      int
	cursor     string
	all        bool
	descending bool
}

func newInboxCmd(g *globals) *cobra.Command {
	f := &inboxFlags{}
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Read inbox records: one work item, an aggregate's history, failed or in-flight work",
		Long: `inbox reads the idempotency records the worker keeps per work item. "get"
reads one work item by its idempotency key; "list" reads one aggregate's history
through the aggregate index, or every record of one status (FAILED_TERMINAL,
FAILED_RETRYABLE, PROCESSING) through the sharded attention index, oldest first,
a page at a time. "reopen" is the one write: it gives FAILED_TERMINAL work
back to the retry path after its cause was fixed — one key, or every failure
of a code, an aggregate or a message type at once.`,
	}
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "output: table or json")

	get := &cobra.Command{
		Use:   "get KEY | rejected:SQS_MESSAGE_ID",
		Short: "Show the records of one idempotency key (every message type unless --type) and its rejected deliveries",
		Long: `get reads the records of one idempotency key, one per message type (or
--type's only), and lists the deliveries of that key that were rejected: a
message refused after its envelope named the key (IDEMPOTENCY_HASH_MISMATCH, a
field over its limit) is filed under its SQS message id, not under the key,
and is found through the aggregate and attention indexes. A key whose every
delivery was rejected has no record, only rejections.

"rejected:<SQS message id>", as "inbox list" names a rejection, reads that
rejection record (as --rejection <SQS message id> does).

A single-write route (ddbworker.SingleWrite) records only failures in the
inbox: its applied work lives in the domain item's fence, one per version
attribute (ddbworkerKey_<attr>, ddbworkerType_<attr>, ddbworkerHash_<attr>:
the key, message type and request hash of the work that set <attr>'s current
value). --item NAME=VALUE … reads that item and lists every fence on it,
saying for each which version attribute it fences and whether it names KEY
(of --type, when given), i.e. whether KEY's work set that attribute's current
value. A fence names only the newest version's work: for work it does
not name, it cannot tell "applied, then overtaken by a newer version" from
"superseded" or "not applied"; the inbox records say what failed.`,
		Example: examples(g.app.name(),
			"inbox get case-42:stage:7",
			"inbox get case-42:stage:7 --type StageChanged -o json",
			"inbox get rejected:5f0c…-sqs-message-id        # a rejection, as inbox list names it",
			"inbox get 5f0c…-sqs-message-id --rejection",
			"inbox get case-42:stage:7 --item PK=CASE#case-42 --item SK=CASE   # a single-write route: the item's fence"),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.rejection && f.msgType != "" {
				return errors.New("--type and --rejection exclude each other")
			}
			r, err := newInboxReader(cmd.Context(), g)
			if err != nil {
				return err
			}
			itemKey, err := parseItemKey(f.item)
			if err != nil {
				return err
			}
			recs, rejected, err := inboxGet(cmd.Context(), r, args[0], f.msgType, f.rejection)
			if err != nil && (len(itemKey) == 0 || !errors.Is(err, inbox.ErrNotFound)) {
				return err
			}
			var fence *itemFence
			if len(itemKey) > 0 {
				if fence, err = getFence(cmd.Context(), g, f.itemTable, itemKey, args[0], f.msgType); err != nil {
					return err
				}
			}
			if f.output == "json" {
				return inboxWriteDoc(cmd.OutOrStdout(), recs, rejected, "", fence)
			}
			w := cmd.OutOrStdout()
			if len(recs) == 0 {
				of := ""
				if f.msgType != "" {
					of = " of type " + f.msgType
				}
				fmt.Fprintf(w, "no record under %s%s: no delivery of it was accepted, or it applied on a single-write route, which records only failures (--item reads the domain item's fence)\n", args[0], of)
			}
			inboxPrintDetail(w, recs, time.Now())
			inboxPrintRejections(w, args[0], rejected, len(recs) > 0)
			if fence != nil {
				fmt.Fprintln(w)
				printFence(w, fence, args[0])
			}
			return nil
		},
	}
	get.Flags().StringVar(&f.msgType, "type", "", "message type (default: every type under KEY)")
	get.Flags().BoolVar(&f.rejection, "rejection", false, "KEY is the SQS message id of a message rejected before it had a key")
	get.Flags().StringArrayVar(&f.item, "item", nil, "a single-write route's domain item, by its key attributes NAME=VALUE (strings; repeat for each): show its fences (one per version attribute) and whether one names KEY — the work that set that attribute's current value")
	get.Flags().StringVar(&f.itemTable, "item-table", "", "the --item's table (default: the inbox's, as in a single-table application)")

	list := &cobra.Command{
		Use:   "list (--aggregate TYPE/ID | --status STATUS [--code C] [--since T] [--until T])",
		Short: "List one aggregate's records in order, or the records of one status across the attention shards",
		Long: `list --aggregate TYPE/ID lists what happened to one aggregate, in first-seen
order. list --status FAILED_TERMINAL|FAILED_RETRYABLE|PROCESSING lists the
records of that status in failure-time order (lease-expiry order for
PROCESSING, which is indexed only when the workers run with
--index-processing); --code keeps one failure code, --since and --until bound
the time (RFC3339, or a duration meaning that long ago: 1h, 30m).
Rejected messages are FAILED_TERMINAL records.

A page holds --limit records; "next page: --cursor C" resumes after it, and
--all follows every page to the end.`,
		Example: examples(g.app.name(),
			"inbox list --aggregate CASE/case-42",
			"inbox list --status FAILED_TERMINAL --code HANDLER_ERROR --since 24h",
			"inbox list --status PROCESSING --until 0s      # expired leases",
			"inbox list --status FAILED_RETRYABLE --all -o json"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			list, err := f.lister(cmd, g, time.Now())
			if err != nil {
				return err
			}
			page := inbox.Page{Limit: f.limit, Cursor: f.cursor, Descending: f.descending}
			var recs []*inbox.Record
			for {
				l, err := list(cmd.Context(), page)
				if err != nil {
					return err
				}
				recs = append(recs, l.Records...)
				page.Cursor = l.Next
				if !f.all || l.Next == "" {
					break
				}
			}
			if f.output == "json" {
				return inboxWriteJSON(cmd.OutOrStdout(), recs, page.Cursor)
			}
			inboxPrintTable(cmd.OutOrStdout(), recs, page.Cursor, time.Now())
			return nil
		},
	}
	fl := list.Flags()
	fl.StringVar(&f.aggregate, "aggregate", "", "list one aggregate: TYPE/ID (the ID may contain '/')")
	fl.StringVar(&f.status, "status", "", "list one status: FAILED_TERMINAL, FAILED_RETRYABLE or PROCESSING")
	fl.StringVar(&f.code, "code", "", "with --status: only this failure code")
	fl.StringVar(&f.since, "since", "", "with --status: from this time on (RFC3339, or a duration ago: 1h)")
	fl.StringVar(&f.until, "until", "", "with --status: before this time (RFC3339, or a duration ago: 10m)")
	fl.IntVar(&f.limit, "limit", inbox.DefaultPageLimit, fmt.Sprintf("records per page, 1..%d", inbox.MaxPageLimit))
	fl.StringVar(&f.cursor, "cursor", "", "resume after a previous page (its \"next page\" cursor)")
	fl.BoolVar(&f.all, "all", false, "follow every page to the end")
	fl.BoolVar(&f.descending, "descending", false, "newest first")

	reopen := newReopenCmd(g)

	cmd.AddCommand(get, list, reopen)
	return cmd
}

func defaultOperator() string {
	host, _ := os.Hostname()
	return cmp.Or(os.Getenv("USER"), "operator") + "@" + host
}

// rejectedPrefix names a rejection record in listings and in `inbox get`:
// rejected:<SQS message id>.
const rejectedPrefix = "rejected:"

// inboxGet reads what `inbox get NAME` shows: with byMessageID, the
// rejection of the SQS message NAME; else the records of the key NAME and
// its rejected deliveries, or — when the key has neither and NAME is
// rejected:<id> — that rejection. Nothing at all is an error that wraps
// inbox.ErrNotFound.
func inboxGet(ctx context.Context, r *inbox.Reader, name, messageType string, byMessageID bool) (recs, rejected []*inbox.Record, err error) {
	if byMessageID {
		rec, err := r.GetRejection(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		return []*inbox.Record{rec}, nil, nil
	}
	recs, err = r.Get(ctx, name, messageType)
	if err != nil && !errors.Is(err, inbox.ErrNotFound) {
		return nil, nil, err
	}
	notFound := err
	if rejected, err = r.Rejections(ctx, name, messageType, recs); err != nil {
		return nil, nil, err
	}
	if len(recs) > 0 || len(rejected) > 0 {
		return recs, rejected, nil
	}
	if id, ok := strings.CutPrefix(name, rejectedPrefix); ok && id != "" {
		rec, err := r.GetRejection(ctx, id)
		if err == nil {
			return []*inbox.Record{rec}, nil, nil
		}
		if !errors.Is(err, inbox.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w, and no rejection of SQS message %q", notFound, id)
	}
	return nil, nil, fmt.Errorf("%w (and no rejected delivery of it)", notFound)
}

// inboxPrintRejections lists the rejected deliveries of key, after its
// records (gap: a blank line first).
func inboxPrintRejections(w io.Writer, key string, rejected []*inbox.Record, gap bool) {
	if len(rejected) == 0 {
		return
	}
	if gap {
		fmt.Fprintln(w)
	}
	if len(rejected) == 1 {
		fmt.Fprintf(w, "1 rejected delivery of %s, filed under its SQS message id (`inbox get rejected:<id>` shows it):\n", key)
	} else {
		fmt.Fprintf(w, "%d rejected deliveries of %s, filed under their SQS message ids (`inbox get rejected:<id>` shows one):\n", len(rejected), key)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REJECTION\tTYPE\tCODE\tFAILED AT\tAGGREGATE\tMESSAGE")
	for _, r := range rejected {
		agg := "-"
		if r.AggregateType != "" || r.AggregateID != "" {
			agg = r.AggregateType + "/" + r.AggregateID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", inboxName(r), orDash(r.MessageType), orDash(r.FailureCode), orDash(r.FailedAt), agg,
			orDash(dlqExcerpt(r.FailureMessage, 80)))
	}
	_ = tw.Flush()
}

// lister checks the list flags and returns the listing they select.
func (f *inboxFlags) lister(cmd *cobra.Command, g *globals, now time.Time) (func(context.Context, inbox.Page) (inbox.Listing, error), error) {
	if (f.aggregate == "") == (f.status == "") {
		return nil, errors.New("give exactly one of --aggregate TYPE/ID or --status STATUS")
	}
	if f.limit < 1 || f.limit > inbox.MaxPageLimit {
		return nil, fmt.Errorf("--limit %d must be within 1..%d", f.limit, inbox.MaxPageLimit)
	}
	if f.aggregate != "" {
		for name, v := range map[string]string{"code": f.code, "since": f.since, "until": f.until} {
			if v != "" {
				return nil, fmt.Errorf("--%s applies to --status listings only", name)
			}
		}
		typ, id, ok := strings.Cut(f.aggregate, "/")
		if !ok || typ == "" || id == "" {
			return nil, fmt.Errorf("--aggregate %q: want TYPE/ID", f.aggregate)
		}
		r, err := newInboxReader(cmd.Context(), g)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, p inbox.Page) (inbox.Listing, error) {
			return r.ListAggregate(ctx, typ, id, p)
		}, nil
	}
	var filter inbox.AttentionFilter
	var err error
	if filter.Since, err = inboxParseTime("since", f.since, now); err != nil {
		return nil, err
	}
	if filter.Until, err = inboxParseTime("until", f.until, now); err != nil {
		return nil, err
	}
	filter.Code = f.code
	status := inbox.Status(strings.ToUpper(f.status))
	r, err := newInboxReader(cmd.Context(), g)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, p inbox.Page) (inbox.Listing, error) {
		return r.ListAttention(ctx, status, filter, p)
	}, nil
}

func newInboxReader(ctx context.Context, g *globals) (*inbox.Reader, error) {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	ddb, _ := g.clients(cfg, nil, nil)
	store, err := g.resolveStore(ctx, ddb)
	if err != nil {
		return nil, err
	}
	return inbox.NewReader(ddb, inbox.ReaderConfig{Store: store})
}

// inboxParseTime reads --since/--until: RFC3339, or a duration before now.
func inboxParseTime(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC3339 time (2025-03-01T12:00:00Z) or a duration ago (1h, 30m)", flag, v)
	}
	return now.Add(-d), nil
}

// inboxJSONRecord is a record in JSON output; its field names are the
// DynamoDB attribute names and every field is always present.
type inboxJSONRecord struct {
	Key            string `json:"key"`
	MessageType    string `json:"messageType"`
	Status         string `json:"status"`
	Rejection      bool   `json:"rejection"`
	SQSMessageID   string `json:"sqsMessageId"`
	RequestHash    string `json:"requestHash"`
	SchemaVersion  int    `json:"schemaVersion"`
	AggregateType  string `json:"aggregateType"`
	AggregateID    string `json:"aggregateId"`
	CorrelationID  string `json:"correlationId"`
	CausationID    string `json:"causationId"`
	Producer       string `json:"producer"`
	FirstSeenAt    string `json:"firstSeenAt"`
	LastSeenAt     string `json:"lastSeenAt"`
	StartedAt      string `json:"startedAt"`
	CompletedAt    string `json:"completedAt"`
	FailedAt       string `json:"failedAt"`
	Attempts       int    `json:"attempts"`
	Deliveries     int    `json:"deliveries"`
	LeaseOwner     string `json:"leaseOwner"`
	LeaseToken     string `json:"leaseToken"`
	LeaseExpiresAt string `json:"leaseExpiresAt"` // inbox.TimeLayout, "" when none
	FailureCode    string `json:"failureCode"`
	FailureMessage string `json:"failureMessage"`
	Outcome        string `json:"outcome"`
	ResultRef      string `json:"resultRef"`
	ReopenedAt     string `json:"reopenedAt,omitempty"`
	ReopenedBy     string `json:"reopenedBy,omitempty"`
	ReopenReason   string `json:"reopenReason,omitempty"`
	DiscardedAt    string `json:"discardedAt,omitempty"`
	DiscardedBy    string `json:"discardedBy,omitempty"`
	DiscardReason  string `json:"discardReason,omitempty"`
	TTL            int64  `json:"ttl"` // epoch seconds
}

type inboxJSONDoc struct {
	Records []inboxJSONRecord `json:"records"`
	// Rejections are `inbox get`'s rejected deliveries of the key.
	Rejections []inboxJSONRecord `json:"rejections,omitempty"`
	Next       string            `json:"next"`
	// Fence is `inbox get --item`'s domain item and its fences.
	Fence *itemFence `json:"fence,omitempty"`
}

// getFence reads the fence of the domain item at key (in table, default
// the inbox's) as it bears on asked (of message type askedType; "": any).
func getFence(ctx context.Context, g *globals, table string, key map[string]string, asked, askedType string) (*itemFence, error) {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	ddb, _ := g.clients(cfg, nil, nil)
	if table == "" {
		store, err := g.resolveStore(ctx, ddb)
		if err != nil {
			return nil, err
		}
		table = store.Table
	}
	return readFence(ctx, ddb, table, key, asked, askedType)
}

func inboxWriteJSON(w io.Writer, recs []*inbox.Record, next string) error {
	return inboxWriteDoc(w, recs, nil, next, nil)
}

func inboxWriteDoc(w io.Writer, recs, rejected []*inbox.Record, next string, fence *itemFence) error {
	doc := inboxJSONDoc{Records: make([]inboxJSONRecord, 0, len(recs)), Next: next, Fence: fence}
	for _, r := range recs {
		doc.Records = append(doc.Records, inboxJSONOf(r))
	}
	for _, r := range rejected {
		doc.Rejections = append(doc.Rejections, inboxJSONOf(r))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func inboxJSONOf(r *inbox.Record) inboxJSONRecord {
	return inboxJSONRecord{
		Key: r.Key, MessageType: r.MessageType, Status: string(r.Status), Rejection: r.Rejection,
		SQSMessageID: r.SQSMessageID, RequestHash: r.RequestHash, SchemaVersion: r.SchemaVersion,
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, CorrelationID: r.CorrelationID,
		CausationID: r.CausationID, Producer: r.Producer, FirstSeenAt: r.FirstSeenAt, LastSeenAt: r.LastActivity(),
		StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, FailedAt: r.FailedAt, Attempts: r.Attempts,
		Deliveries: r.Deliveries, LeaseOwner: r.LeaseOwner, LeaseToken: r.LeaseToken,
		LeaseExpiresAt: inbox.FormatTime(r.LeaseExpiry), FailureCode: r.FailureCode,
		FailureMessage: r.FailureMessage, Outcome: r.Outcome, ResultRef: r.ResultRef, TTL: r.TTL,
		ReopenedAt: r.ReopenedAt, ReopenedBy: r.ReopenedBy, ReopenReason: r.ReopenReason,
		DiscardedAt: r.DiscardedAt, DiscardedBy: r.DiscardedBy, DiscardReason: r.DiscardReason,
	}
}

// inboxName is how a record is named in a table: its key, or
// rejected:<SQS message id> for a rejection (what `inbox get` takes).
func inboxName(r *inbox.Record) string {
	if r.Rejection {
		return rejectedPrefix + r.SQSMessageID
	}
	return r.Key
}

// inboxLease is a PROCESSING record's lease expiry, marked when past.
func inboxLease(r *inbox.Record, now time.Time) string {
	if r.Status != inbox.StatusProcessing || r.LeaseExpiry.IsZero() {
		return "-"
	}
	s := inbox.FormatTime(r.LeaseExpiry)
	if r.LeaseExpiry.Before(now) {
		s += " (expired)"
	}
	return s
}

func inboxPrintTable(w io.Writer, recs []*inbox.Record, next string, now time.Time) {
	if len(recs) == 0 {
		fmt.Fprintln(w, "no records")
	} else {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tTYPE\tSTATUS\tOUTCOME/CODE\tATTEMPTS\tDELIVERIES\tFIRST SEEN\tFAILED/COMPLETED\tLEASE EXPIRES\tAGGREGATE")
		for _, r := range recs {
			result, at := r.Outcome, r.CompletedAt
			if r.Status == inbox.StatusFailedTerminal || r.Status == inbox.StatusFailedRetryable {
				result, at = r.FailureCode, r.FailedAt
			}
			agg := "-"
			if r.AggregateType != "" || r.AggregateID != "" {
				agg = r.AggregateType + "/" + r.AggregateID
			}
			status := string(r.Status)
			if r.DiscardedAt != "" { // its DLQ message was removed: it will not run
				status += " (discarded)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", inboxName(r), orDash(r.MessageType), status,
				orDash(result), r.Attempts, r.Deliveries, orDash(r.FirstSeenAt), orDash(at), inboxLease(r, now), agg)
		}
		_ = tw.Flush()
	}
	if next != "" {
		fmt.Fprintf(w, "next page: --cursor %s\n", next)
	}
}

// inboxPrintDetail prints every set field of each record, one per line.
func inboxPrintDetail(w io.Writer, recs []*inbox.Record, now time.Time) {
	for i, r := range recs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		field := func(name, v string) {
			if v != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", name, v)
			}
		}
		num := func(name string, v int64) {
			if v != 0 {
				field(name, strconv.FormatInt(v, 10))
			}
		}
		field("key", r.Key)
		if r.Rejection {
			why := "yes: the message was refused and filed under its SQS message id"
			if r.Key != "" {
				why += ", not under its key (which it could not claim)"
			}
			field("rejection", why)
			field("sqsMessageId", r.SQSMessageID)
		}
		field("messageType", r.MessageType)
		field("status", string(r.Status))
		field("outcome", r.Outcome)
		field("resultRef", r.ResultRef)
		// A record that is not failed now keeps its last failure as history.
		past := ""
		if r.Status == inbox.StatusCompleted || r.Status == inbox.StatusProcessing {
			past = " (an earlier attempt)"
		}
		if r.FailureCode != "" {
			field("failureCode", r.FailureCode+past)
		}
		field("failureMessage", r.FailureMessage)
		if r.ReopenedAt != "" {
			field("reopened", r.ReopenedAt+" by "+r.ReopenedBy+": "+r.ReopenReason)
		}
		if r.DiscardedAt != "" {
			field("discarded", r.DiscardedAt+" by "+r.DiscardedBy+": "+r.DiscardReason+" (its DLQ message was removed; the work will not run)")
		}
		num("attempts", int64(r.Attempts))
		num("deliveries", int64(r.Deliveries))
		if r.AggregateType != "" || r.AggregateID != "" {
			field("aggregate", r.AggregateType+"/"+r.AggregateID)
		}
		field("firstSeenAt", r.FirstSeenAt)
		field("lastSeenAt", r.LastActivity())
		field("startedAt", r.StartedAt)
		field("completedAt", r.CompletedAt)
		if r.FailedAt != "" {
			field("failedAt", r.FailedAt+past)
		}
		field("leaseOwner", r.LeaseOwner)
		field("leaseToken", r.LeaseToken)
		if !r.LeaseExpiry.IsZero() {
			field("leaseExpiresAt", inboxLease(&inbox.Record{Status: inbox.StatusProcessing, LeaseExpiry: r.LeaseExpiry}, now))
		}
		field("requestHash", r.RequestHash)
		num("schemaVersion", int64(r.SchemaVersion))
		field("correlationId", r.CorrelationID)
		field("causationId", r.CausationID)
		field("producer", r.Producer)
		if !r.Rejection {
			field("sqsMessageId", r.SQSMessageID)
		}
		if r.TTL != 0 {
			field("ttl", time.Unix(r.TTL, 0).UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
	}
}
