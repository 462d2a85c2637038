package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/tables"
)

type relayFlags struct {
	queueURL      string
	streamARN     string
	name          string
	shards        int
	leaseDuration time.Duration
	pollInterval  time.Duration
	discovery     time.Duration
	publishedTTL  time.Duration
	drainTimeout  time.Duration
	sweep         bool
	sweepAge      time.Duration
	sweepInterval time.Duration
	metricsAddr   string
	faults        daemonext.Inject // the extension's fault flags (none in a team's binary)
}

func (f *relayFlags) register(cmd *cobra.Command, ext daemonext.Extension) {
	fl := cmd.Flags()
	fl.StringVar(&f.queueURL, "queue-url", "", "queue of outbox records that name no destination (required)")
	fl.StringVar(&f.streamARN, "stream-arn", "", "the stream to read (default: the table's latest stream)")
	fl.StringVar(&f.name, "relay-name", relay.DefaultName, "relay group: instances with the same name share the stream's shards, one lease per shard")
	fl.IntVar(&f.shards, "outbox-shards", outbox.DefaultShards, "attention index partitions of PENDING outbox records (the producers' outbox.Config.Shards)")
	fl.DurationVar(&f.leaseDuration, "lease-duration", relay.DefaultLeaseDuration, "shard lease length: a crashed instance's shards are taken over after it")
	fl.DurationVar(&f.pollInterval, "poll-interval", relay.DefaultPollInterval, "wait after an empty GetRecords page")
	fl.DurationVar(&f.discovery, "discovery-interval", relay.DefaultDiscoveryInterval, "how often the stream's shards are listed and free leases taken")
	fl.DurationVar(&f.publishedTTL, "published-ttl", relay.DefaultPublishedTTL, "how long PUBLISHED outbox records live")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", relay.DefaultDrainTimeout, "on SIGTERM, how long the page in hand may take (send, mark, checkpoint) before the leases are released")
	fl.BoolVar(&f.sweep, "sweep", false, "sweep once and exit: publish PENDING records older than --sweep-age (records the stream cannot deliver any more)")
	fl.DurationVar(&f.sweepAge, "sweep-age", relay.DefaultSweepAge, "a sweep publishes PENDING records created longer ago than this")
	fl.DurationVar(&f.sweepInterval, "sweep-interval", 0, "while reading the stream, also sweep this often (0: never)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:9090", "address of /metrics, /healthz and /readyz (empty: off)")
	f.faults = ext.Faults(fl)
}

// config is the relay's configuration; layout is the table's (the one it
// records, else the flags').
func (f *relayFlags) config(g *globals, layout tables.Layout) relay.Config {
	return relay.Config{Table: g.table, Layout: layout, Shards: f.shards, QueueURL: f.queueURL, StreamARN: f.streamARN,
		Name: f.name, LeaseDuration: f.leaseDuration, PollInterval: f.pollInterval, DiscoveryInterval: f.discovery,
		PublishedTTL: f.publishedTTL, DrainTimeout: f.drainTimeout, SweepAge: f.sweepAge, SweepInterval: f.sweepInterval}
}

func newRelayCmd(g *globals) *cobra.Command {
	f := &relayFlags{}
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Publish the table's outbox records to SQS from its DynamoDB Stream until SIGTERM (or --sweep once)",
		Long: `Publish the table's outbox records to SQS from its DynamoDB Stream until
SIGTERM: shards are leased in the table (several instances share them),
records are sent in batches, marked PUBLISHED (fenced on PENDING) and
checkpointed. A crash re-sends, never loses: the consumer's gate absorbs
the duplicate.

The stream must be on (tables create --stream). Its endpoint is the SDK's:
AWS_ENDPOINT_URL_DYNAMODB_STREAMS (DynamoDB Local serves streams on its
DynamoDB endpoint).

With --sweep it publishes, once, the PENDING records older than --sweep-age
and exits: for records a stream cannot deliver any more (retention is 24
hours).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(os.Stderr)
			if err != nil {
				return err
			}
			return runRelay(cmd.Context(), g, f, log, cmd)
		},
	}
	f.register(cmd, g.app.Extension)
	return cmd
}

// relayFlagErrors names flags in relay.New's "relay: Config.X …" errors.
func relayFlagErrors(err error) error {
	names := map[string]string{"Table": "--table", "QueueURL": "--queue-url", "Shards": "--outbox-shards", "Name": "--relay-name",
		"LeaseDuration": "--lease-duration", "PollInterval": "--poll-interval", "DiscoveryInterval": "--discovery-interval",
		"PublishedTTL": "--published-ttl", "DrainTimeout": "--drain-timeout", "SweepAge": "--sweep-age", "SweepInterval": "--sweep-interval"}
	s := err.Error()
	for field, flag := range names {
		s = strings.ReplaceAll(s, "relay: Config."+field+" ", flag+" ("+envName(strings.TrimPrefix(flag, "--"))+") ")
	}
	return errors.New(s)
}

// runRelay serves metrics and health, then runs the relay until ctx ends
// (or sweeps once).
func runRelay(ctx context.Context, g *globals, f *relayFlags, log *slog.Logger, cmd *cobra.Command) error {
	cfg, err := g.awsConfig(ctx)
	if err != nil {
		return err
	}
	ctx, opts, err := f.faults(ctx, log)
	if err != nil {
		return err
	}
	traces, log, stopTraces, err := g.traceExport(ctx, log)
	if err != nil {
		return err
	}
	defer stopTraces()
	ddb, q := g.clients(cfg, opts.DynamoDB, opts.SQS)
	streams := dynamodbstreams.NewFromConfig(cfg)
	reg := prometheus.NewRegistry()
	metrics, err := registerRelay(reg, g.app)
	if err != nil {
		return err
	}
	deps := relay.Deps{DynamoDB: ddb, Streams: streams, SQS: q, Logger: log, Metrics: metrics}
	if traces.On() {
		deps.TracerProvider = traces.Provider
	}
	// The outbox records live under the layout the table records (its
	// attention index, TTL attribute); a layout flag that disagrees is
	// refused.
	layout := g.layout
	if g.table != "" {
		m, err := g.mergeStore(ctx, ddb, true)
		switch code := failure.APICode(err); {
		case code == "AccessDeniedException" || code == "AccessDenied":
			// A role granted before the layout was recorded: the flags name
			// it, as before.
			log.Warn("cannot read the inbox layout recorded in the table: the layout flags name it; grant dynamodb:DescribeTable and dynamodb:GetItem on the table",
				"table", g.table, "error", err.Error())
		case err != nil:
			return err
		default:
			layout = m.store.Layout
		}
	}
	r, err := relay.New(deps, f.config(g, layout))
	if err != nil {
		return relayFlagErrors(err)
	}
	if f.sweep {
		res, err := r.Sweep(ctx)
		fmt.Fprintf(cmd.OutOrStdout(), "swept: %d PENDING records older than %s, %d published, %d failed\n", res.Found, f.sweepAge, res.Published, res.Failed)
		if err == nil && res.Failed > 0 {
			err = fmt.Errorf("relay: %d records could not be published; they stay PENDING for the next sweep", res.Failed)
		}
		return err
	}
	var ready atomic.Bool
	if f.metricsAddr != "" {
		stopOps, err := serveOps(f.metricsAddr, reg, ready.Load, log)
		if err != nil {
			return err
		}
		defer stopOps()
	}
	if _, err := r.StreamARN(ctx); err != nil {
		if errors.Is(err, relay.ErrNoStream) {
			return fmt.Errorf("%w (run `%s tables create --stream`, or enable a NEW_IMAGE stream on the table)", err, g.app.name())
		}
		return err
	}
	ready.Store(true)
	return r.Run(ctx)
}
