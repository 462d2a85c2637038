package worker

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/internal/slots"
	"github.com/ddbworker/ddbworker/s3payload"
	"github.com/ddbworker/ddbworker/stale"
)

// TerminalPolicy says what happens to a message whose work failed for good.
type TerminalPolicy string

const (
	// PolicyDLQ sends a copy with the failure as message attributes to the
	// DLQ, then deletes the message. The default.
	PolicyDLQ TerminalPolicy = "dlq"
	// PolicyQuarantine records the failure in the inbox only and deletes.
	PolicyQuarantine TerminalPolicy = "quarantine"
	// PolicyRedrive leaves the message to the queue's redrive policy.
	PolicyRedrive TerminalPolicy = "redrive"
)

// Zero sets a Config field whose zero value means "the default" to an
// explicit zero: ClockSkew, MaxGuardRetries,
// DeleteFlushInterval, DrainTimeout and Backoff.Jitter (e.g. Config{ClockSkew: worker.Zero}).
// It is the same value as stale.Zero.
const Zero = -1

// The defaults of Config. The daemon's flags and the Lambda adapter's
// variables read these; nothing restates them.
const (
	DefaultConcurrency       = 16
	DefaultWaitTime          = 20 * time.Second
	DefaultVisibilityTimeout = stale.DefaultLease
	DefaultClockSkew         = stale.DefaultSkew
	DefaultMessageTimeout    = 2 * time.Minute
	DefaultMaxAttempts       = failure.DefaultMaxAttempts
	DefaultMaxTakeovers      = gate.DefaultMaxTakeovers
	DefaultMaxGuardRetries   = judge.DefaultMaxReruns
	DefaultTerminalPolicy    = PolicyDLQ
	// DefaultDeleteFlushInterval is a standard queue's;
	// DefaultFIFODeleteFlushInterval a FIFO queue's, where a pending
	// delete holds back the rest of its group.
	DefaultDeleteFlushInterval     = 250 * time.Millisecond
	DefaultFIFODeleteFlushInterval = 20 * time.Millisecond
	DefaultDrainTimeout            = 30 * time.Second
	// DefaultCallTimeout applies unless half of VisibilityTimeout is
	// shorter.
	DefaultCallTimeout  = 5 * time.Second
	DefaultCallAttempts = 3
	DefaultMaxDeferral  = 7 * 24 * time.Hour
	// MaxConcurrency bounds Concurrency.
	MaxConcurrency = 10000
)

// Config configures a Worker. Its zero fields take the defaults above
// (WithDefaults).
type Config struct {
	// Store is the inbox: its table (usually also the domain's), key and
	// index names, TTLs, attention shards and PROCESSING index — the same
	// configuration the operator commands use. Required (Table).
	Store inbox.Store
	// MultiRegionConsistency is the table's consistency mode as
	// DescribeTable reports it (TableDescription.MultiRegionConsistency):
	// empty for a single-Region table, EVENTUAL or STRONG for a global
	// table. A STRONG table (multi-Region strong consistency, MRSC)
	// refuses transactions: New refuses every route whose commit needs
	// one (*TransactionsRefusedError) — only SingleWrite with
	// SkipInboxCheck is served — and that route's redeliveries commit
	// without one. The daemon and the Lambda adapter set it from the
	// description they read at start; a program that builds its own
	// worker on an MRSC table must set it.
	MultiRegionConsistency ddbtypes.MultiRegionConsistency
	// QueueURL is the work queue. Required. A URL ending in ".fifo" turns
	// on FIFO group order.
	QueueURL string
	// DLQURL receives terminal messages under PolicyDLQ. Required then.
	DLQURL string
	// Concurrency caps messages in flight. The limit in effect adapts below
	// it: halved on throttling, 5xx and timeouts (at most once a second),
	// lowered gently when commit latency rises above twice its baseline,
	// grown back by one per round of successes. Default:
	// DefaultConcurrency.
	Concurrency int
	// BatchSize is the most messages one receive asks for (1..10). A poller
	// receives once half of that is free, waiting briefly for the rest.
	// Default: min(10, Concurrency).
	BatchSize int
	// Pollers is the number of concurrent long polls. Default:
	// ceil(Concurrency / (4·BatchSize)).
	Pollers int
	// WaitTime is the long-poll wait. Default: DefaultWaitTime.
	WaitTime time.Duration
	// VisibilityTimeout is set on every receive and is the lease length.
	// Default: DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// ClockSkew is the lease's clock-skew margin. Default:
	// DefaultClockSkew; Zero for none (only when every worker's clock is
	// exact).
	ClockSkew time.Duration
	// MessageTimeout is the per-message deadline for handler and commit;
	// leases are renewed (heartbeat) until it. Running past it is a
	// business failure (MESSAGE_TIMEOUT), except when the commit alone
	// ran past it after a handler that returned within the first half of
	// the time: the database's slowness, infrastructure (TIMEOUT), no
	// attempt. Default: DefaultMessageTimeout.
	MessageTimeout time.Duration
	// MaxAttempts is the business-attempt limit unless a message's
	// attemptPolicy sets one. A business attempt is counted when a
	// handler's failure is recorded, never when a lease is taken: trouble
	// with the infrastructure (throttling, 5xx, timeouts, conflicts, a
	// lost response, a shutdown) costs none. Default: DefaultMaxAttempts.
	MaxAttempts int
	// MaxTakeovers bounds how often a work item's lease may expire without
	// any outcome (its worker crashed, hung, or lost the database) and be
	// taken over: the expiry after that ends the work FAILED_TERMINAL
	// MAX_TAKEOVERS_EXCEEDED, so a message that kills its worker every
	// time does not loop forever. A lease given back (shutdown,
	// infrastructure trouble) is not counted. Default:
	// DefaultMaxTakeovers.
	MaxTakeovers int
	// MaxGuardRetries bounds handler re-runs after a Retry guard. Default:
	// DefaultMaxGuardRetries; Zero never re-runs (a lost optimistic race
	// fails retryably).
	MaxGuardRetries int
	// Backoff spaces retries by visibility. Default: see Backoff.
	Backoff Backoff
	// TerminalPolicy for failed-for-good work. Default:
	// DefaultTerminalPolicy.
	TerminalPolicy TerminalPolicy
	// DeleteFlushInterval is the longest a delete waits for its batch of 10
	// to fill. Waiting is safe (the work is committed) and keeps SQS calls
	// per message low. Default: DefaultDeleteFlushInterval, or
	// DefaultFIFODeleteFlushInterval on a FIFO queue. Zero sends every
	// delete at once (more SQS calls).
	DeleteFlushInterval time.Duration
	// DrainTimeout bounds graceful shutdown: in-flight work gets this long
	// to finish after Run's context ends. Default: DefaultDrainTimeout;
	// Zero cancels in-flight work at once (its leases are given back and
	// its messages made visible).
	DrainTimeout time.Duration
	// Owner names this worker in leases. Default: hostname/pid.
	Owner string
	// Envelope limits. Default: envelope.Config{} with its defaults, and
	// HashVersion Store.RequestHashVersion (a different one is an error).
	Envelope envelope.Config
	// CallTimeout bounds each DynamoDB call the worker makes, its SDK
	// attempts included; a call that times out is infrastructure trouble
	// (not a business attempt) and counts against the database's health.
	// It must be shorter than VisibilityTimeout: a call that hangs longer
	// than its message stays hidden hands the message to another receive.
	// Default: DefaultCallTimeout, or half of VisibilityTimeout when that
	// is shorter.
	CallTimeout time.Duration
	// CallAttempts is how many attempts the SDK makes of one DynamoDB call
	// (throttling, 5xx and transport errors are retried within the call,
	// waiting at most 1s between attempts). Default: DefaultCallAttempts.
	CallAttempts int
	// Health configures the database health gate. Default: see
	// HealthConfig.
	Health HealthConfig
	// HotKey configures the parking of a hot key: throttling DynamoDB
	// says is confined to one key range, or a conflict storm on one item,
	// parks that key's work alone instead of slowing the worker (see
	// HotKeyConfig). Default: see HotKeyConfig.
	HotKey HotKeyConfig
	// MaxWCU paces this worker's DynamoDB writes to this many write
	// capacity units per second, charged before each write from the item
	// sizes (AWS's rules: 1 per KB, 2 per KB in a transaction) and
	// corrected from the capacity DynamoDB reports. A fleet of N workers
	// sharing a table's budget B sets MaxWCU = B / N. Default: 0, unpaced.
	MaxWCU float64
	// Payload bounds and times fetches of payloads by S3 reference (an
	// envelope's payloadRef, an SQS Extended Client message). Default:
	// s3payload.Config's defaults, with a CallTimeout of
	// s3payload.DefaultCallTimeout or half of VisibilityTimeout when that
	// is shorter.
	Payload s3payload.Config
	// Fair shares the worker's concurrency and write budget among tenants
	// (fair.go). Default: see FairConfig.
	Fair FairConfig
	// MaxDeferral bounds attemptPolicy.notBefore: a message deferred
	// further than this into the future ends terminal
	// DEFERRAL_TOO_LONG. Default: DefaultMaxDeferral.
	MaxDeferral time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default, and
// every problem with the result, joined.
func (c Config) WithDefaults() (Config, error) {
	var errs []error
	var err error
	if c.Store, err = c.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("worker: Config.Store: %w", err))
	}
	// New records' request hashes are written in the store's version, the
	// one the table records: every worker sharing it reads that version.
	switch v := envelope.HashVersion(c.Store.RequestHashVersion); {
	case c.Envelope.HashVersion == 0:
		c.Envelope.HashVersion = v
	case c.Envelope.HashVersion != v:
		errs = append(errs, fmt.Errorf("worker: Config.Envelope.HashVersion %v differs from Config.Store.RequestHashVersion %d: leave it zero, the store's version (recorded in the table) is written", c.Envelope.HashVersion, c.Store.RequestHashVersion))
	}
	if c.QueueURL == "" {
		errs = append(errs, errors.New("worker: Config.QueueURL is required"))
	}
	if c.TerminalPolicy == "" {
		c.TerminalPolicy = DefaultTerminalPolicy
	}
	switch c.TerminalPolicy {
	case PolicyDLQ:
		if c.DLQURL == "" {
			errs = append(errs, errors.New("worker: Config.DLQURL is required with the dlq terminal policy"))
		}
	case PolicyQuarantine, PolicyRedrive:
	default:
		errs = append(errs, fmt.Errorf("worker: Config.TerminalPolicy %q must be dlq, quarantine or redrive", c.TerminalPolicy))
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("worker: Config.Concurrency %d must be within 1..%d", c.Concurrency, MaxConcurrency))
	}
	c.BatchSize = cmp.Or(c.BatchSize, min(10, max(c.Concurrency, 1)))
	if c.BatchSize < 1 || c.BatchSize > 10 || c.BatchSize > max(c.Concurrency, 1) {
		errs = append(errs, fmt.Errorf("worker: Config.BatchSize %d must be within 1..min(10, Concurrency)", c.BatchSize))
	}
	if c.Pollers == 0 && c.BatchSize > 0 {
		c.Pollers = slots.Pollers(c.Concurrency, c.BatchSize)
	}
	if c.Pollers < 1 {
		errs = append(errs, fmt.Errorf("worker: Config.Pollers %d must be at least 1", c.Pollers))
	}
	c.WaitTime = cmp.Or(c.WaitTime, DefaultWaitTime)
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second {
		errs = append(errs, fmt.Errorf("worker: Config.WaitTime %s must be within 0..20s", c.WaitTime))
	}
	c.VisibilityTimeout = cmp.Or(c.VisibilityTimeout, DefaultVisibilityTimeout)
	if c.VisibilityTimeout < time.Second || c.VisibilityTimeout > maxVisibility || c.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("worker: Config.VisibilityTimeout %s must be whole seconds within 1s..12h", c.VisibilityTimeout))
	}
	c.MessageTimeout = cmp.Or(c.MessageTimeout, DefaultMessageTimeout)
	if c.MessageTimeout < 0 {
		errs = append(errs, errors.New("worker: Config.MessageTimeout must not be negative"))
	}
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("worker: Config.MaxAttempts %d must be within 1..100", c.MaxAttempts))
	}
	c.MaxTakeovers = cmp.Or(c.MaxTakeovers, DefaultMaxTakeovers)
	if c.MaxTakeovers < 1 || c.MaxTakeovers > 100 {
		errs = append(errs, fmt.Errorf("worker: Config.MaxTakeovers %d must be within 1..100", c.MaxTakeovers))
	}
	c.MaxGuardRetries = withDefault(c.MaxGuardRetries, DefaultMaxGuardRetries)
	if c.MaxGuardRetries < 0 {
		errs = append(errs, errors.New("worker: Config.MaxGuardRetries must not be negative"))
	}
	if c.Backoff, err = c.Backoff.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	flush := DefaultDeleteFlushInterval
	if strings.HasSuffix(c.QueueURL, ".fifo") {
		flush = DefaultFIFODeleteFlushInterval
	}
	c.DeleteFlushInterval = withDefault(c.DeleteFlushInterval, flush)
	c.DrainTimeout = withDefault(c.DrainTimeout, DefaultDrainTimeout)
	if c.DeleteFlushInterval < 0 || c.DrainTimeout < 0 {
		errs = append(errs, errors.New("worker: Config.DeleteFlushInterval and DrainTimeout must not be negative"))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.CallTimeout = cmp.Or(c.CallTimeout, min(DefaultCallTimeout, max(c.VisibilityTimeout, time.Second)/2))
	if c.CallTimeout >= c.VisibilityTimeout && c.VisibilityTimeout > 0 {
		errs = append(errs, fmt.Errorf("worker: Config.CallTimeout %s must be shorter than VisibilityTimeout %s", c.CallTimeout, c.VisibilityTimeout))
	}
	c.CallAttempts = cmp.Or(c.CallAttempts, DefaultCallAttempts)
	if c.CallTimeout < 100*time.Millisecond || c.CallAttempts < 1 || c.CallAttempts > 10 {
		errs = append(errs, fmt.Errorf("worker: Config.CallTimeout %s must be at least 100ms and Config.CallAttempts %d within 1..10", c.CallTimeout, c.CallAttempts))
	}
	if c.MaxWCU < 0 {
		errs = append(errs, fmt.Errorf("worker: Config.MaxWCU %v must not be negative", c.MaxWCU))
	}
	c.MaxDeferral = cmp.Or(c.MaxDeferral, DefaultMaxDeferral)
	if c.MaxDeferral < time.Minute {
		errs = append(errs, fmt.Errorf("worker: Config.MaxDeferral %s must be at least 1m", c.MaxDeferral))
	}
	if c.Fair, err = c.Fair.WithDefaults(c.Concurrency); err != nil {
		errs = append(errs, err)
	}
	if c.Health, err = c.Health.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.HotKey, err = c.HotKey.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.Payload.CallTimeout == 0 && c.VisibilityTimeout > 0 {
		// A fetch before the gate (an Extended Client body) runs without a
		// heartbeat: it must end well within the message's visibility.
		c.Payload.CallTimeout = min(s3payload.DefaultCallTimeout, max(c.VisibilityTimeout/2, 100*time.Millisecond))
	}
	if c.Payload, err = c.Payload.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("worker: Config.Payload: %w", err))
	}
	return c, errors.Join(errs...)
}

// withDefault returns def for 0, 0 for Zero, and v otherwise.
func withDefault[T int | float64 | time.Duration](v, def T) T {
	switch v {
	case 0:
		return def
	case Zero:
		return 0
	}
	return v
}
