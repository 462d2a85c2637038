package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/slots"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/worker"
)

type runFlags struct {
	queueURL          string
	dlqURL            string
	concurrency       int
	batchSize         int
	waitTime          time.Duration
	visibility        time.Duration
	clockSkew         time.Duration
	messageTimeout    time.Duration
	drainTimeout      time.Duration
	startupTimeout    time.Duration
	maxAttempts       int
	maxTakeovers      int
	terminalPolicy    string
	metricsAddr       string
	depthInterval     time.Duration
	callTimeout       time.Duration
	maxWCU            float64
	healthFailures    int
	healthWindow      time.Duration
	probeMaxInterval  time.Duration
	parkVisibility    time.Duration
	parkMaxVisibility time.Duration
	hotKeyMaxThrottle time.Duration
	payloadMaxBytes   int64
	s3PathStyle       bool
	faults            daemonext.Inject // the extension's fault flags (none in a team's binary)
}

// register adds run's flags. Every default is the library's own constant
// (worker.DefaultX, s3payload.DefaultMaxBytes), never a restated literal;
// a 0 default means the worker computes the value, as the help says.
func (f *runFlags) register(cmd *cobra.Command, ext daemonext.Extension) {
	fl := cmd.Flags()
	fl.StringVar(&f.queueURL, "queue-url", "", "work queue URL (required)")
	fl.StringVar(&f.dlqURL, "dlq-url", "", "DLQ URL (required with --terminal-policy dlq)")
	fl.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "messages in flight at most")
	fl.IntVar(&f.batchSize, "batch-size", 0, "messages per receive, 1..10 (0: min(10, --concurrency))")
	fl.DurationVar(&f.waitTime, "wait-time", worker.DefaultWaitTime, "long-poll wait, at most 20s")
	fl.DurationVar(&f.visibility, "visibility-timeout", worker.DefaultVisibilityTimeout, "visibility timeout set on receive; also the lease length")
	fl.DurationVar(&f.clockSkew, "clock-skew", worker.DefaultClockSkew, "clock-skew margin before an expired lease may be taken over (0: none)")
	fl.DurationVar(&f.messageTimeout, "message-timeout", worker.DefaultMessageTimeout, "per-message deadline (the lease is renewed until then)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", worker.DefaultDrainTimeout, "on SIGTERM, how long in-flight work may take to finish (0: cancel it at once)")
	fl.DurationVar(&f.startupTimeout, "startup-timeout", 2*time.Minute, "how long to wait at start for the table and queue to answer before exiting non-zero (0: forever)")
	fl.IntVar(&f.maxAttempts, "max-attempts", worker.DefaultMaxAttempts, "business attempts unless a message's attemptPolicy sets its own")
	fl.IntVar(&f.maxTakeovers, "max-takeovers", worker.DefaultMaxTakeovers, "how often a work item's lease may expire without any outcome (its worker crashed, hung, or lost the database) and be taken over; the expiry after that ends the work FAILED_TERMINAL MAX_TAKEOVERS_EXCEEDED, so a message that kills its worker every time does not loop forever (a lease given back on shutdown or infrastructure trouble is not counted), 1..100")
	fl.StringVar(&f.terminalPolicy, "terminal-policy", string(worker.DefaultTerminalPolicy), "terminal failures: dlq, quarantine or redrive")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:9090", "address of /metrics, /healthz and /readyz (empty: off)")
	fl.DurationVar(&f.depthInterval, "depth-interval", 15*time.Second, "how often to read queue and DLQ depth for metrics (0: never)")
	fl.DurationVar(&f.callTimeout, "call-timeout", 0, fmt.Sprintf("bound of each DynamoDB call, its SDK retries included (a timeout is infrastructure trouble, never a business attempt); below --visibility-timeout (0: %s, or half of --visibility-timeout when that is shorter)", worker.DefaultCallTimeout))
	fl.Float64Var(&f.maxWCU, "max-wcu", 0, "pace this worker's DynamoDB writes to this many write capacity units per second (0: unpaced; a fleet of N workers sharing a budget B sets B/N)")
	fl.IntVar(&f.healthFailures, "health-min-failures", worker.DefaultHealthMinFailures, "database health gate: infrastructure failures (throttling, 5xx, timeouts) in --health-window, and at least half of the calls, that pause receiving")
	fl.DurationVar(&f.healthWindow, "health-window", worker.DefaultHealthWindow, "database health gate: how far back call outcomes count")
	fl.DurationVar(&f.probeMaxInterval, "probe-max-interval", worker.DefaultProbeMaxInterval, fmt.Sprintf("database health gate: longest wait between two probes of an unhealthy database (the first waits %s)", worker.DefaultProbeInterval))
	fl.DurationVar(&f.parkVisibility, "park-visibility", worker.DefaultParkVisibility, "database health gate: the visibility a parked message is kept at, renewed every third of it while the pause lasts, so a worker that dies while paused leaves its parked messages hidden this long (1s..1h)")
	fl.DurationVar(&f.parkMaxVisibility, "park-max-visibility", worker.DefaultParkMaxVisibility, "database health gate: the longest hiding of a record parked under Lambda, where each receive while the database is unhealthy hides it longer (--park-visibility..12h)")
	fl.DurationVar(&f.hotKeyMaxThrottle, "hot-key-max-throttled", worker.DefaultHotKeyMaxThrottled, "a hot key (an aggregate or FIFO group DynamoDB throttles by key range) is parked alone, probed at most 5 times a second; a message that waits on it longer than this ends HOT_KEY_THROTTLED (its terminal policy, no business attempt)")
	fl.Int64Var(&f.payloadMaxBytes, "payload-max-bytes", s3payload.DefaultMaxBytes, "largest payload fetched by S3 reference (payloadRef, SQS Extended Client); larger ones end terminal PAYLOAD_TOO_LARGE")
	fl.BoolVar(&f.s3PathStyle, "s3-path-style", false, "address S3 path-style (emulators, MinIO); the endpoint comes from AWS_ENDPOINT_URL_S3")
	f.faults = ext.Faults(fl)
}

func (f *runFlags) workerConfig(store inbox.Store) worker.Config {
	return worker.Config{
		Store: store, QueueURL: f.queueURL, DLQURL: f.dlqURL,
		Concurrency: f.concurrency, BatchSize: f.batchSize, WaitTime: f.waitTime,
		VisibilityTimeout: f.visibility, ClockSkew: explicit(f.clockSkew), MessageTimeout: f.messageTimeout,
		DrainTimeout: explicit(f.drainTimeout), MaxAttempts: f.maxAttempts, MaxTakeovers: f.maxTakeovers,
		TerminalPolicy: worker.TerminalPolicy(f.terminalPolicy), CallTimeout: f.callTimeout, MaxWCU: f.maxWCU,
		Health: worker.HealthConfig{MinFailures: f.healthFailures, Window: f.healthWindow, ProbeMaxInterval: f.probeMaxInterval,
			ParkVisibility: f.parkVisibility, ParkMaxVisibility: f.parkMaxVisibility},
		HotKey:  worker.HotKeyConfig{MaxThrottled: f.hotKeyMaxThrottle},
		Payload: s3payload.Config{MaxBytes: f.payloadMaxBytes},
	}
}

// poolFor sizes the HTTP connection pool of the worker's clients to its
// concurrency: every message in flight may hold a DynamoDB and an SQS call,
// and the pollers' long polls hold their own. The SDK's default keeps 10
// idle connections per host, so a busier worker would open and close
// connections on every call.
func poolFor(concurrency int) func(*http.Transport) {
	conns := concurrency + slots.Pollers(concurrency, min(10, concurrency)) + 4
	return func(t *http.Transport) {
		t.MaxIdleConns = 2 * conns
		t.MaxIdleConnsPerHost = conns
	}
}

// explicit maps a flag's 0 (which a person means literally: no skew, no
// drain) to worker.Zero; the library reads a zero field as "the default".
func explicit(d time.Duration) time.Duration {
	if d == 0 {
		return worker.Zero
	}
	return d
}

func newRunCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the worker until SIGTERM: receive, gate, handle, commit, ack",
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(os.Stderr)
			if err != nil {
				return err
			}
			return runDaemon(cmd.Context(), g, f, log)
		},
	}
	f.register(cmd, g.app.Extension)
	if g.app.Flags != nil {
		g.app.Flags(cmd.Flags())
	}
	return cmd
}

// runDaemon serves metrics and health, checks the table and queues (at
// once for what will not heal, until --startup-timeout for what may), then
// runs the worker until ctx ends.
func runDaemon(ctx context.Context, g *globals, f *runFlags, log *slog.Logger) error {
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
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(poolFor(f.concurrency))
	ddb, q := g.clients(cfg, opts.DynamoDB, opts.SQS)
	// Payloads by reference are read from S3 (AWS_ENDPOINT_URL_S3 names an
	// emulator's endpoint).
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = f.s3PathStyle })
	reg := prometheus.NewRegistry()
	metrics, err := registerRun(reg, g.app)
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	if g.app.Register == nil {
		return errors.New("daemon: App.Register is required: the service registers its handlers there")
	}
	// The worker's configuration is checked before anything is called
	// (its handlers are registered once the table's store is read).
	if _, err := f.workerConfig(store).WithDefaults(); err != nil {
		return flagErrors(err)
	}
	var running atomic.Pointer[worker.Worker]
	if f.metricsAddr != "" {
		stopOps, err := serveOps(f.metricsAddr, reg, func() bool { w := running.Load(); return w != nil && w.Ready() }, log)
		if err != nil {
			return err
		}
		defer stopOps()
	}
	// The inbox settings and layout the table records win over defaults
	// (and must match explicit flags); a table without a record gets
	// this one.
	// The table's description (mergeStore's) also says its consistency
	// mode: on an MRSC global table the worker refuses the routes that
	// need transactions.
	var consistency ddbtypes.MultiRegionConsistency
	resolve := func(ctx context.Context) (merged, error) {
		m, err := g.mergeStore(ctx, ddb, true)
		if m.table != nil {
			consistency = m.table.MultiRegionConsistency
		}
		return m, err
	}
	if store, err = checkStartup(ctx, ddb, q, resolve, store.Table, f.queueURL, f.dlqURL, worker.TerminalPolicy(f.terminalPolicy),
		f.startupTimeout, g.app.name(), log); err != nil {
		return err
	}
	if err := g.recordStore(ctx, ddb, store, false); err != nil {
		return err
	}
	// The handlers see the store the workers write with: its layout is
	// the table's (an effects log writes under it).
	handlers := ddbworker.NewRegistry()
	env := Env{Store: store, AWS: cfg, DynamoDB: ddb, Logger: log, Registerer: reg, Metrics: metrics}
	if traces.On() {
		env.TracerProvider = traces.Provider
	}
	if err := g.app.Register(handlers, env); err != nil {
		return fmt.Errorf("registering the handlers: %w", err)
	}
	deps := worker.Deps{DynamoDB: ddb, SQS: q, S3: s3c, Handlers: handlers, Logger: log, Metrics: metrics}
	if traces.On() {
		deps.TracerProvider = traces.Provider // nil interface when off: no tracing work at all
	}
	wcfg := f.workerConfig(store)
	wcfg.MultiRegionConsistency = consistency
	w, err := worker.New(deps, wcfg)
	if err != nil {
		return flagErrors(err)
	}
	if err := metrics.Err(); err != nil { // the worker's instruments, and the handlers'
		return err
	}
	if f.depthInterval > 0 {
		go watchDepth(ctx, q, f.queueURL, f.dlqURL, f.depthInterval, reg, log)
	}
	running.Store(w)
	stopped := make(chan struct{})
	defer close(stopped)
	go logShutdown(ctx, stopped, f.drainTimeout, log)
	log.Info("worker started", "table", g.table, "queueUrl", f.queueURL, "concurrency", f.concurrency,
		"visibilityTimeout", f.visibility.String(), "terminalPolicy", f.terminalPolicy, "types", handlers.Types(), "version", g.app.version())
	err = w.Run(ctx)
	if err != nil {
		log.Error("worker stopped", "error", err.Error())
	} else {
		log.Info("worker stopped")
	}
	return err
}

// logShutdown says when the shutdown signal arrives (SIGTERM, SIGINT: the
// context's cause names it), not only when the drain has ended.
func logShutdown(ctx context.Context, stopped <-chan struct{}, drain time.Duration, log *slog.Logger) {
	select {
	case <-stopped:
	case <-ctx.Done():
		log.Info("shutting down: receiving stopped, in-flight work draining", "cause", context.Cause(ctx).Error(), "drainTimeout", drain.String())
	}
}

// serveOps serves /metrics, /healthz (the process answers) and /readyz
// (ready reports it) until stop, which shuts the server down within 5s.
func serveOps(addr string, reg *prometheus.Registry, ready func() bool, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err.Error())
		}
	}()
	log.Info("serving /metrics, /healthz, /readyz", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// watchDepth exports the queue's backlog and the DLQ's depth.
func watchDepth(ctx context.Context, q *sqs.Client, queueURL, dlqURL string, every time.Duration, reg prometheus.Registerer, log *slog.Logger) {
	depth := newQueueDepth()
	if err := reg.Register(depth); err != nil {
		log.Warn("queue depth metric not registered", "error", err.Error())
		return
	}
	read := func(name, url string) {
		if url == "" {
			return
		}
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			log.Warn("queue depth", "queue", name, "error", err.Error())
			return
		}
		for state, attr := range map[string]sqstypes.QueueAttributeName{"visible": sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			"in_flight": sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, "delayed": sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
			n, _ := strconv.ParseFloat(out.Attributes[string(attr)], 64)
			depth.WithLabelValues(name, state).Set(n)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		read("work", queueURL)
		read("dlq", dlqURL)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
