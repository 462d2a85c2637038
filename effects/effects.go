package effects

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/metrics"
	"github.com/ddbworker/ddbworker/stale"
)

// Status is an effect record's status.
type Status string

// Statuses (see the package documentation for the transitions).
const (
	StatusStarted   Status = "STARTED"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusNotDone   Status = "NOT_DONE"
	StatusUnknown   Status = "UNKNOWN"
)

// statuses lists the statuses in a stable order.
func statuses() []Status {
	return []Status{StatusStarted, StatusCompleted, StatusFailed, StatusNotDone, StatusUnknown}
}

// Failure codes of Do's errors (the worker records them on the inbox
// record). The provider's own refusal codes (Refused) are recorded as given.
const (
	// CodeRequestMismatch (terminal): the effect key already holds another
	// request (another provider, operation or request body): the handler
	// asked for something else under the same work and name.
	CodeRequestMismatch = "EFFECT_REQUEST_MISMATCH"
	// CodeOutcomeUnknown (terminal): a call to a provider without
	// idempotency keys may or may not have happened; an operator resolves
	// the effect (`ddbworker effects resolve`), then reopens the work.
	CodeOutcomeUnknown = "EFFECT_OUTCOME_UNKNOWN"
	// CodeInProgress (retryable): another holder of the work is inside its
	// call right now (its call lease has not ended).
	CodeInProgress = "EFFECT_IN_PROGRESS"
	// CodeCallFailed (retryable): the call to an idempotent provider ended
	// without a clear answer; the next attempt calls again with the same key.
	CodeCallFailed = "EFFECT_CALL_FAILED"
	// CodeNotDone (retryable): the provider certainly did nothing (NotDone);
	// the next attempt calls again.
	CodeNotDone = "EFFECT_NOT_DONE"
	// CodeLeaseLost (retryable): the work's inbox lease is not this
	// attempt's any more (another delivery took it over), or the effect
	// record moved under this claim: this attempt stops without calling.
	// Its cause is an *inbox.LeaseLostError, by which the worker treats it
	// as a lost lease, not as a business attempt.
	CodeLeaseLost = "EFFECT_LEASE_LOST"
	// CodeNotLeased (terminal): the work has no PROCESSING inbox record —
	// Do was called from a Fused route (which has no PROCESSING phase) or
	// outside a worker. Effects need the gated path.
	CodeNotLeased = "EFFECT_NOT_LEASED"
	// CodeInvalidCall (terminal): the Call or the handler's use of Do is
	// wrong (no name, a request that does not marshal…).
	CodeInvalidCall = "EFFECT_INVALID_CALL"
)

// Sentinel errors, matched with errors.Is on Do's errors.
var (
	ErrRequestMismatch = errors.New("effects: the effect key holds another request")
	ErrOutcomeUnknown  = errors.New("effects: outcome unknown")
	ErrRefused         = errors.New("effects: refused by the provider")
	ErrNotDone         = errors.New("effects: not done by the provider")
	ErrInProgress      = errors.New("effects: a call is in progress under another claim")
	ErrCallFailed      = errors.New("effects: call ended without an answer")
	ErrLeaseLost       = errors.New("effects: lease lost")
	ErrNotLeased       = errors.New("effects: no PROCESSING inbox record")
	ErrInvalidCall     = errors.New("effects: invalid call")
	// ErrNotFound: Reader.Get or Resolve found no record under the key.
	ErrNotFound = errors.New("effects: no such effect")
	// ErrNotResolvable: Resolve found the effect in a status an operator
	// may not change (only UNKNOWN, and STARTED whose call lease ended).
	ErrNotResolvable = errors.New("effects: effect not resolvable")
)

// API is what a Log needs of DynamoDB (the SDK's exact signatures).
type API interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// The defaults of Config, applied by WithDefaults.
const (
	DefaultCallTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultSkew is added to a call lease: how far the clocks of two
	// workers may disagree (the inbox lease's margin, stale.DefaultSkew).
	DefaultSkew = stale.DefaultSkew
)

// Limits of an Outcome.
const (
	// maxResultBytes bounds Outcome.Result (it lives in the record).
	maxResultBytes = 4096
	// maxRefBytes bounds Outcome.Ref.
	maxRefBytes = 1024
)

// Config configures a Log.
type Config struct {
	// Inbox is the inbox store the worker runs with (daemon.Env.Store):
	// every claim of an effect is fenced on the work's inbox record being
	// PROCESSING under the handler's attempt. Required (its Table).
	Inbox inbox.Store
	// Table holds the effect records. Default: Inbox.Table (the records
	// use its Layout: key, TTL and attention-index attribute names).
	Table string
	// CallTimeout bounds one provider call: the context the call function
	// gets ends then, and another holder of the work waits out the call
	// lease (CallTimeout + Skew) before it treats the call as over.
	// Default: DefaultCallTimeout.
	CallTimeout time.Duration
	// Skew is added to call leases for clock differences between workers.
	// Default: DefaultSkew.
	Skew time.Duration
	// WriteTimeout bounds the write that records a call's outcome. It runs
	// even when the work's context has ended (the provider's answer must
	// not be lost). Default: DefaultWriteTimeout.
	WriteTimeout time.Duration
	// TTL is how long a settled record (COMPLETED, FAILED, NOT_DONE,
	// STARTED) lives after its last change: at least as long as the
	// work's COMPLETED and FAILED inbox records, or a very late
	// redelivery (or a reopened work item) could call the provider again.
	// UNKNOWN records never expire. Default: the longer of
	// Inbox.TTL.Completed and Inbox.TTL.Failed (35 days by default).
	TTL time.Duration
	// Logger for JSON logs. Default: discard.
	Logger *slog.Logger
	// Metrics is where the Log reports its figures (the
	// ddbworker_effect_* metrics; under the daemon, daemon.Env.Metrics).
	// Default: metrics.Discard. A second Log on the same Provider shares
	// the first one's instruments.
	Metrics metrics.Provider
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Log is the external-effect log. It is safe for concurrent use.
type Log struct {
	ddb     API
	cfg     Config
	store   store
	log     *slog.Logger
	metrics *instruments
}

// store is where and how records are written.
type store struct {
	table   string
	inbox   inbox.Store
	ttl     time.Duration
	now     func() time.Time
	attnIdx string
}

// WithDefaults returns c with every zero field set to its default: the
// Inbox's (when it names a table; what it cannot fix, validate reports),
// then Table and TTL, which derive from it.
func (c Config) WithDefaults() Config {
	if c.Inbox.Table != "" {
		c.Inbox, _ = c.Inbox.WithDefaults()
	}
	c.Table = cmp.Or(c.Table, c.Inbox.Table)
	c.CallTimeout = cmp.Or(c.CallTimeout, DefaultCallTimeout)
	c.Skew = cmp.Or(c.Skew, DefaultSkew)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.TTL = cmp.Or(c.TTL, minTTL(c.Inbox))
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Discard
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if c.Inbox.Table == "" {
		errs = append(errs, errors.New("effects: Config.Inbox is required (the worker's inbox store: claims are fenced on it)"))
	} else if _, err := c.Inbox.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("effects: Config.Inbox: %w", err))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"CallTimeout", c.CallTimeout}, {"Skew", c.Skew}, {"WriteTimeout", c.WriteTimeout}, {"TTL", c.TTL}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("effects: Config.%s %s must not be negative", d.name, d.v))
		}
	}
	if c.TTL > 0 && c.Inbox.TTL.Completed > 0 && c.TTL < c.Inbox.TTL.Completed {
		errs = append(errs, fmt.Errorf("effects: Config.TTL %s is shorter than the inbox's COMPLETED TTL %s: a late redelivery could find the work done but its effect forgotten", c.TTL, c.Inbox.TTL.Completed))
	} else if c.TTL > 0 && c.TTL < c.Inbox.TTL.Failed {
		errs = append(errs, fmt.Errorf("effects: Config.TTL %s is shorter than the inbox's FAILED TTL %s: work retried, or reopened and redriven, while its FAILED record lives could find its effect forgotten and call the provider again", c.TTL, c.Inbox.TTL.Failed))
	}
	return errs
}

// New returns a Log writing to ddb. It applies cfg's defaults
// (WithDefaults), validates it and reports every problem at once.
func New(ddb API, cfg Config) (*Log, error) {
	var errs []error
	if ddb == nil {
		errs = append(errs, errors.New("effects: a DynamoDB client is required"))
	}
	cfg = cfg.WithDefaults()
	errs = append(errs, cfg.validate()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Log{ddb: ddb, cfg: cfg, log: cfg.Logger, metrics: newInstruments(cfg.Metrics), store: store{
		table: cfg.Table, inbox: cfg.Inbox, ttl: cfg.TTL, now: cfg.Now, attnIdx: cfg.Inbox.Layout.AttentionIndex,
	}}, nil
}

// minTTL is the shortest TTL an effect record may have: as long as the
// inbox keeps a record of its work that lets the work be found done (a
// COMPLETED one) or run again (a FAILED one: retried, or reopened).
func minTTL(s inbox.Store) time.Duration {
	return max(s.TTL.Completed, s.TTL.Failed)
}

// Key is the effect key of the effect name of one work item: messageType,
// idempotency key and name joined by "/" (unambiguous: message types and
// names contain no "/"). It is the record's key and the idempotency key
// given to the provider.
func Key(messageType, idempotencyKey, name string) string {
	return messageType + "/" + idempotencyKey + "/" + name
}

// HashedKey is a short, stable stand-in for key (43 characters of
// [A-Za-z0-9_-]) for providers whose idempotency keys are shorter than an
// effect key may be (Key is up to ~700 bytes): pass HashedKey(key) to the
// provider, always, for that provider.
func HashedKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validName: 1..64 characters of [A-Za-z0-9._-] (names, providers and
// operations: they are parts of keys and metric labels).
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
