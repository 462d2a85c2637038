package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/tables"
)

// envPrefix: every flag --some-flag can also be set as DDBWORKER_SOME_FLAG.
const envPrefix = "DDBWORKER_"

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// globals are the flags every command shares.
type globals struct {
	app         App
	cmd         *cobra.Command // the command being run (its flags say what was given)
	region      string
	ddbEndpoint string
	sqsEndpoint string
	logLevel    string
	table       string
	// The inbox store: every command reads and writes it the same way.
	layout          tables.Layout
	shards          int
	indexProcessing bool
	ttl             inbox.TTL
	requestHash     string // --request-hash-version: v2 or v3
}

// store is the inbox store the flags describe.
func (g *globals) store() (inbox.Store, error) {
	if g.table == "" {
		return inbox.Store{}, errors.New("--table (DDBWORKER_TABLE) is required: the inbox table")
	}
	hash, err := parseRequestHash(g.requestHash)
	if err != nil {
		return inbox.Store{}, err
	}
	s, err := inbox.Store{Table: g.table, Layout: g.layout, TTL: g.ttl, AttentionShards: g.shards, IndexProcessing: g.indexProcessing,
		RequestHashVersion: hash}.WithDefaults()
	if err != nil {
		return inbox.Store{}, fmt.Errorf("inbox store flags (--table, --*-attribute, --*-index, --attention-shards, --*-ttl): %w", err)
	}
	return s, nil
}

func newRootCmd(app App) *cobra.Command {
	g := &globals{app: app}
	short := app.Short
	if short == "" {
		short = "Exactly-once effects from SQS into DynamoDB"
	}
	root := &cobra.Command{
		Use:     app.name(),
		Short:   short,
		Version: app.version(),
		Long: short + `, built on ddbworker: the domain write and the inbox
PROCESSING → COMPLETED flip commit in one TransactWriteItems, fenced by a
lease token.

Every flag can also be set through the environment: --queue-url is
DDBWORKER_QUEUE_URL. AWS credentials, region and endpoints also come from the
SDK's own variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS…).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.cmd = cmd
			warnUnknownEnv(cmd.Root(), cmd.ErrOrStderr())
			return bindEnv(cmd)
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&g.region, "region", "", "AWS region (default: the SDK's, e.g. AWS_REGION)")
	pf.StringVar(&g.ddbEndpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL (default: the SDK's, e.g. AWS_ENDPOINT_URL_DYNAMODB)")
	pf.StringVar(&g.sqsEndpoint, "sqs-endpoint", "", "SQS endpoint URL (default: the SDK's, e.g. AWS_ENDPOINT_URL_SQS)")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	pf.StringVar(&g.table, "table", app.Table, tableUsage(app.Table))
	d := tables.DefaultLayout()
	pf.StringVar(&g.layout.PartitionKey, "pk-attribute", d.PartitionKey, "the table's partition key attribute (an existing table's key schema names it)")
	pf.StringVar(&g.layout.SortKey, "sk-attribute", d.SortKey, "the table's sort key attribute (an existing table's key schema names it)")
	pf.StringVar(&g.layout.AggregateIndex, "aggregate-index", d.AggregateIndex, "the inbox's aggregate index (KEYS_ONLY); recorded in the table, whose record wins when unset")
	pf.StringVar(&g.layout.AggregatePK, "aggregate-pk-attribute", d.AggregatePK, "the aggregate index's partition key attribute")
	pf.StringVar(&g.layout.AggregateSK, "aggregate-sk-attribute", d.AggregateSK, "the aggregate index's sort key attribute")
	pf.StringVar(&g.layout.AttentionIndex, "attention-index", d.AttentionIndex, "the inbox's attention index (KEYS_ONLY, sparse); recorded in the table, whose record wins when unset")
	pf.StringVar(&g.layout.AttentionPK, "attention-pk-attribute", d.AttentionPK, "the attention index's partition key attribute")
	pf.StringVar(&g.layout.AttentionSK, "attention-sk-attribute", d.AttentionSK, "the attention index's sort key attribute")
	pf.StringVar(&g.layout.TTL, "ttl-attribute", d.TTL, "the table's TTL attribute; recorded in the table, whose record wins when unset")
	pf.IntVar(&g.shards, "attention-shards", inbox.DefaultAttentionShards, "attention index partitions per status (1..100)")
	pf.BoolVar(&g.indexProcessing, "index-processing", false, "also index PROCESSING records by lease expiry, so sweep pages an index instead of scanning (two index writes per message)")
	pf.DurationVar(&g.ttl.Completed, "completed-ttl", inbox.DefaultCompletedTTL, "how long COMPLETED records live: longer than queue + DLQ retention, or a late redelivery applies twice (at least 672h)")
	pf.DurationVar(&g.ttl.Failed, "failed-ttl", inbox.DefaultFailedTTL, "how long FAILED records live")
	pf.DurationVar(&g.ttl.Processing, "processing-ttl", inbox.DefaultProcessingTTL, "how long abandoned PROCESSING records live")
	pf.StringVar(&g.requestHash, "request-hash-version", "v2", "the request hash version new inbox records are written in (v2 or v3); recorded in the table, whose record wins when unset. "+
		"v3 only once every worker runs a release that reads it (`tables create` records v3 for a new table)")

	root.AddCommand(newRunCmd(g), newTablesCmd(g), newQueuesCmd(g), newDLQCmd(g), newInboxCmd(g), newSweepCmd(g),
		newEffectsCmd(g), newRelayCmd(g), newEnvelopeCmd())
	// The shared flags each command reads, which its help shows (a
	// subcommand not named reads what its parent's entry says).
	const (
		aws, ddb, sqs, log, table, layout = daemonext.GlobalsAWS, daemonext.GlobalsDynamoDB, daemonext.GlobalsSQS,
			daemonext.GlobalsLog, daemonext.GlobalsTable, daemonext.GlobalsLayout
		shards, ttl, indexing = daemonext.GlobalsShards, daemonext.GlobalsTTL, daemonext.GlobalsIndexing
		hash                  = daemonext.GlobalsRequestHash
	)
	for path, groups := range map[string][]string{
		"run":          {aws, ddb, sqs, log, table, layout, shards, ttl, indexing, hash},
		"sweep":        {aws, ddb, log, table, layout, shards, ttl, indexing},
		"relay":        {aws, ddb, sqs, log, table, layout},
		"tables":       {aws, ddb, table, layout, shards, ttl, indexing, hash},
		"queues":       {aws, sqs},
		"dlq":          {aws, sqs},
		"dlq discard":  {aws, ddb, sqs, table, layout, shards, ttl},
		"inbox":        {aws, ddb, table, layout, shards},
		"inbox reopen": {aws, ddb, table, layout, shards, ttl},
		"effects":      {aws, ddb, table, layout, shards},
		"envelope":     nil,
	} {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.CommandPath() != root.Name()+" "+path {
			panic("daemon: no command " + path) // the table above names every command
		}
		daemonext.Uses(c, groups...)
	}
	root.AddCommand(app.Extension.Commands(extGlobals{g})...)
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		showGlobals(cmd)
		defaultsFromEnv(cmd)
		defaultHelp(cmd, args)
	})
	return root
}

// globalGroups names the group (daemonext.Globals*) of each shared flag.
var globalGroups = map[string]string{
	"region": daemonext.GlobalsAWS, "dynamodb-endpoint": daemonext.GlobalsDynamoDB, "sqs-endpoint": daemonext.GlobalsSQS,
	"log-level":    daemonext.GlobalsLog,
	"table":        daemonext.GlobalsTable,
	"pk-attribute": daemonext.GlobalsLayout, "sk-attribute": daemonext.GlobalsLayout, "aggregate-index": daemonext.GlobalsLayout,
	"aggregate-pk-attribute": daemonext.GlobalsLayout, "aggregate-sk-attribute": daemonext.GlobalsLayout,
	"attention-index": daemonext.GlobalsLayout, "attention-pk-attribute": daemonext.GlobalsLayout,
	"attention-sk-attribute": daemonext.GlobalsLayout, "ttl-attribute": daemonext.GlobalsLayout,
	"attention-shards": daemonext.GlobalsShards, "index-processing": daemonext.GlobalsIndexing, "completed-ttl": daemonext.GlobalsTTL,
	"failed-ttl": daemonext.GlobalsTTL, "processing-ttl": daemonext.GlobalsTTL,
	"request-hash-version": daemonext.GlobalsRequestHash,
}

// globalsUsed are the groups of shared flags cmd reads: its annotation,
// else its nearest ancestor's; a command with subcommands, what any of
// them reads.
func globalsUsed(cmd *cobra.Command) map[string]bool {
	used := map[string]bool{}
	own := func(c *cobra.Command) (string, bool) {
		for ; c != nil; c = c.Parent() {
			if v, ok := c.Annotations[daemonext.GlobalsAnnotation]; ok {
				return v, true
			}
		}
		return "", false
	}
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		if v, ok := own(c); ok {
			for _, grp := range strings.Split(v, ",") {
				if grp != "" {
					used[grp] = true
				}
			}
		}
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(cmd)
	return used
}

// showGlobals hides from cmd's help the shared flags it does not read
// (help prints once and exits: the flags are not shown again).
func showGlobals(cmd *cobra.Command) {
	if !cmd.HasParent() {
		return // the root's help shows them all
	}
	used := globalsUsed(cmd)
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if grp, ok := globalGroups[f.Name]; ok && !used[grp] {
			f.Hidden = true
		}
	})
}

// defaultsFromEnv shows, as the default of each of cmd's flags, its
// DDBWORKER_* value when the environment sets one: what the command would
// run with.
func defaultsFromEnv(cmd *cobra.Command) {
	show := func(f *pflag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !f.Changed && !f.Hidden {
			f.DefValue = v
			f.Usage += " (set by " + envName(f.Name) + ")"
		}
	}
	cmd.LocalFlags().VisitAll(show)
	cmd.InheritedFlags().VisitAll(show)
}

// extGlobals is what an extension's commands see of the shared flags.
type extGlobals struct{ g *globals }

func (e extGlobals) AWSConfig(ctx context.Context) (aws.Config, error) { return e.g.awsConfig(ctx) }
func (e extGlobals) Endpoints() (dynamoDB, sqs string)                 { return e.g.ddbEndpoint, e.g.sqsEndpoint }
func (e extGlobals) Table() string                                     { return e.g.table }

// warnUnknownEnv warns about DDBWORKER_* variables that name no flag of any
// command: a typo (DDBWORKER_CONCURENCY) would otherwise be ignored
// silently. (Variables of other commands are normal: one environment
// serves run, sweep and inbox alike.)
func warnUnknownEnv(root *cobra.Command, w io.Writer) {
	known := map[string]bool{}
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
		}
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(root)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, envPrefix) && !known[k] && !strings.HasPrefix(k, envPrefix+"EMULATORS_") && k != envPrefix+"REQUIRE_EMULATORS" {
			fmt.Fprintf(w, "%s: warning: %s names no flag of any command; it is ignored (a typo?)\n", root.Name(), k)
		}
	}
}

// bindEnv sets every flag not given on the command line from its
// DDBWORKER_* variable.
func bindEnv(cmd *cobra.Command) error {
	var errs []string
	set := func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", envName(f.Name), v, err))
			}
		}
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// awsConfig loads the SDK configuration, honouring --region.
func (g *globals) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if g.region != "" {
		opts = append(opts, config.WithRegion(g.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return cfg, nil
}

// clients builds the DynamoDB and SQS clients; --*-endpoint set the SDK's
// BaseEndpoint.
func (g *globals) clients(cfg aws.Config, ddbOpts []func(*dynamodb.Options), sqsOpts []func(*sqs.Options)) (*dynamodb.Client, *sqs.Client) {
	if g.ddbEndpoint != "" {
		ddbOpts = append(ddbOpts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(g.ddbEndpoint) })
	}
	if g.sqsEndpoint != "" {
		sqsOpts = append(sqsOpts, func(o *sqs.Options) { o.BaseEndpoint = aws.String(g.sqsEndpoint) })
	}
	return dynamodb.NewFromConfig(cfg, ddbOpts...), sqs.NewFromConfig(cfg, sqsOpts...)
}

// checkOutput validates an --output value: every listing prints a table
// for people or JSON for machines.
func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return fmt.Errorf("--output %q must be table or json", o)
	}
	return nil
}

// tableUsage is --table's help: required when the app gives it no default
// (a team's binary), which the help then says, since cobra shows none.
func tableUsage(def string) string {
	const u = "DynamoDB table of the inbox records (and, usually, of the service's items)"
	if def == "" {
		return u + "; required (no default)"
	}
	return u
}

// examples formats a command's examples as invocations of the app: each
// line is a command line without the program's name.
func examples(app string, lines ...string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  " + app + " " + l
	}
	return strings.Join(out, "\n")
}

// orDash shows an empty table cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// logger returns a JSON logger at --log-level.
func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", g.logLevel, err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
}
