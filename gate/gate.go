package gate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/stale"
)

// API is what the gate needs of DynamoDB.
type API interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Config configures a Gate.
type Config struct {
	// Store is the inbox. Required (Table).
	Store inbox.Store
	// Owner names this worker in leaseOwner. Default: hostname/pid.
	Owner string
	// Policy is the lease policy. Default: stale.Policy{} with its defaults.
	Policy stale.Policy
	// MaxAttempts is the business-attempt limit when a message's
	// attemptPolicy does not set one. Default: failure.DefaultMaxAttempts.
	MaxAttempts int
	// MaxTakeovers bounds the takeovers of leases that expired without an
	// outcome (Decide). Default: DefaultMaxTakeovers.
	MaxTakeovers int
	// MaxRaces bounds how often one Acquire re-decides after another worker
	// changed the record between its read and its takeover. Default:
	// DefaultMaxRaces.
	MaxRaces int
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// NewToken mints fencing tokens. Default: 128 random bits in hex.
	NewToken func() string
}

// The defaults of Config, applied by WithDefaults.
const (
	// DefaultMaxTakeovers is Config.MaxTakeovers's default: the one
	// source of the takeover bound (worker.DefaultMaxTakeovers, the
	// daemon's --max-takeovers and the Lambda adapter's
	// DDBWORKER_MAX_TAKEOVERS read it).
	DefaultMaxTakeovers = 5
	// DefaultMaxRaces is Config.MaxRaces's default.
	DefaultMaxRaces = 3
)

// WithDefaults returns c with every zero field set to its default. The
// Store and Policy get theirs too; what they cannot fix, validate (New)
// reports.
func (c Config) WithDefaults() Config {
	c.Store, _ = c.Store.WithDefaults()
	c.Policy, _ = c.Policy.WithDefaults()
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	c.MaxAttempts = cmp.Or(c.MaxAttempts, failure.DefaultMaxAttempts)
	c.MaxTakeovers = cmp.Or(c.MaxTakeovers, DefaultMaxTakeovers)
	c.MaxRaces = cmp.Or(c.MaxRaces, DefaultMaxRaces)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewToken == nil {
		c.NewToken = NewToken
	}
	return c
}

// validate returns every problem of a Config with its defaults applied
// (New joins them).
func (c Config) validate() []error {
	var errs []error
	if _, err := c.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("gate: Config: %w", err))
	}
	if _, err := c.Policy.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("gate: Config.MaxAttempts %d must be within 1..100", c.MaxAttempts))
	}
	if c.MaxTakeovers < 1 || c.MaxTakeovers > 100 {
		errs = append(errs, fmt.Errorf("gate: Config.MaxTakeovers %d must be within 1..100", c.MaxTakeovers))
	}
	if c.MaxRaces < 1 {
		errs = append(errs, fmt.Errorf("gate: Config.MaxRaces %d must be at least 1", c.MaxRaces))
	}
	return errs
}

// Request describes the work item a delivery wants to claim.
type Request struct {
	inbox.Work
	// Attempts is the message's attempts policy; MaxAttempts 0 means
	// Config.MaxAttempts. A takeover it forbids is an Exhausted decision
	// (MAX_ATTEMPTS_EXCEEDED or RETRY_WINDOW_EXPIRED).
	Attempts failure.Policy
	// LeaseUntil, when set, is when this delivery's lease ends instead of
	// the policy's lease length from now (a Lambda invocation's lease ends
	// with its deadline).
	LeaseUntil time.Time
	// HashAs, when set, returns this work's request hash in the canonical
	// form (version) of stored, a record's requestHash, so that a record
	// written by an older worker is compared like with like
	// (envelope.Envelope.HashLike). Without it, or when it fails, hashes
	// are compared as they are.
	HashAs func(stored string) (string, error)
	// Token, when set, is the token of a lease this delivery holds already
	// (it took the lease, and could not give it back because the database
	// was unhealthy): the claim presents it instead of minting one, and
	// gets that lease back — no takeover counted — while the record still
	// names it (VerdictOwn). A lease that ran out while its delivery
	// waited (or has less than half a lease left) is renewed first, by an
	// UpdateItem fenced on the token: a held lease is renewed before the
	// handler starts, or not used. Otherwise the table decides as for any
	// delivery.
	Token string
	// Owner, when set, names this delivery's holder in leaseOwner instead
	// of Config.Owner: a Lambda invocation, one of many an execution
	// environment runs at once (Lambda Managed Instances), each holding
	// its leases under its own name. A held lease (Token) whose record
	// names another owner is renewed under a new token and this owner, so
	// that two deliveries presenting one token cannot both hold it.
	Owner string
}

// SameWork reports whether a record whose requestHash is stored holds the
// work req asks for: the hashes are equal, or req's hash in stored's
// version is.
func (req *Request) SameWork(stored string) bool {
	if stored == req.RequestHash {
		return true
	}
	if req.HashAs == nil {
		return false
	}
	h, err := req.HashAs(stored)
	return err == nil && h == stored
}

// Action is what the caller must do with the delivery.
type Action int

const (
	// Acquired: run the handler and commit under Decision.Lease.
	Acquired Action = iota + 1
	// Duplicate: the work is COMPLETED; delete the message, do nothing else.
	Duplicate
	// InFlight: another worker holds a live lease; keep the message and
	// hide it for Decision.RetryAfter.
	InFlight
	// Terminal: the record is FAILED_TERMINAL already (Decision.Code):
	// never run; apply the terminal policy again.
	Terminal
	// Exhausted: the limits end the work before another run
	// (MAX_ATTEMPTS_EXCEEDED, RETRY_WINDOW_EXPIRED,
	// MAX_TAKEOVERS_EXCEEDED in Decision.Code): the caller records
	// Decision.Record FAILED_TERMINAL with it (fenced on the record as
	// read) and applies the terminal policy. The gate writes no failure.
	Exhausted
	// HashMismatch: the key already holds other work; the record is not
	// touched. The caller rejects this message (an alert).
	HashMismatch
)

func (a Action) String() string {
	switch a {
	case Acquired:
		return "acquired"
	case Duplicate:
		return "duplicate"
	case InFlight:
		return "in-flight"
	case Terminal:
		return "terminal"
	case Exhausted:
		return "exhausted"
	case HashMismatch:
		return "hash-mismatch"
	}
	return "unknown"
}

// Decision is the gate's answer for one delivery.
type Decision struct {
	Action Action
	// Verdict is the decision-table row (zero for a fresh record).
	Verdict Verdict
	// Lease is held when Action is Acquired.
	Lease inbox.Lease
	// Attempts is the effective attempts policy (MaxAttempts filled in).
	Attempts failure.Policy
	// Record is the existing record the decision was read from (nil when the
	// record was created fresh).
	Record *inbox.Record
	// Code and Message describe a Terminal, Exhausted or HashMismatch
	// decision.
	Code, Message string
	// RetryAfter is how long an InFlight delivery should stay hidden.
	RetryAfter time.Duration
}

// ErrClaim is the sentinel of *ClaimError.
var ErrClaim = errors.New("gate: claim not confirmed")

// ClaimError is a claim whose write got no answer that says whether it
// applied (throttling after the SDK's retries, a 5xx, a timeout, a lost
// response): Lease is the lease the write would have taken. The caller
// may give it back (a Release fenced on its token is a no-op when the
// write did not apply), or let it expire.
type ClaimError struct {
	Lease inbox.Lease
	Err   error
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("gate: claim of %s/%s not confirmed: %v", e.Lease.Key, e.Lease.MessageType, e.Err)
}

// Unwrap returns ErrClaim and the SDK's error.
func (e *ClaimError) Unwrap() []error { return []error{ErrClaim, e.Err} }

// Gate claims work items.
type Gate struct {
	api API
	cfg Config
}

// New applies cfg's defaults (WithDefaults), validates it and returns a
// Gate; every problem is reported, joined.
func New(api API, cfg Config) (*Gate, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("gate: API is required"))
	}
	cfg = cfg.WithDefaults()
	if err := errors.Join(append(errs, cfg.validate()...)...); err != nil {
		return nil, err
	}
	return &Gate{api: api, cfg: cfg}, nil
}

// NewToken returns a fencing token: 128 random bits in hex.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Policy returns the lease policy in effect.
func (g *Gate) Policy() stale.Policy { return g.cfg.Policy }

// Owner returns the leaseOwner this gate writes for a Request that names
// none.
func (g *Gate) Owner() string { return g.cfg.Owner }

// owner is the leaseOwner req's leases name.
func (g *Gate) owner(req *Request) string { return cmp.Or(req.Owner, g.cfg.Owner) }

// ErrRaceLimit reports that the record kept changing under this delivery:
// retry later.
var ErrRaceLimit = errors.New("gate: record changed concurrently too many times")

// Acquire claims req: one conditional PutItem of a fresh PROCESSING record;
// when a record exists, the decision table on the record the condition
// returned, and for a takeover — or the renewal of a held lease that ran
// out (Request.Token) — one fenced UpdateItem. No business attempt
// is counted here (see Decide). Errors are a *ClaimError when a claim's
// write may have applied, the SDK's otherwise (classify them with
// failure.Classify), or ErrRaceLimit; every decision is a Decision.
func (g *Gate) Acquire(ctx context.Context, req *Request) (Decision, error) {
	now := g.cfg.Now()
	token := cmp.Or(req.Token, g.cfg.NewToken())
	limits := g.limits(req)
	exp := g.expires(req, now)
	item := g.cfg.Store.Encode(g.freshRecord(req, token, now, exp))
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(g.cfg.Store.Layout.PartitionKey))).Build()
	if err != nil {
		return Decision{}, fmt.Errorf("gate: build condition: %w", err)
	}
	_, err = g.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(g.cfg.Store.Table),
		Item:                                item,
		ConditionExpression:                 cond.Condition(),
		ExpressionAttributeNames:            cond.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return Decision{Action: Acquired, Attempts: limits.Attempts, Lease: g.lease(req, token, 1, exp)}, nil
	}
	existing, cerr := g.conditionRecord(err)
	if cerr != nil {
		return Decision{}, g.claimError(req, token, exp, 1, fmt.Errorf("gate: put %s/%s: %w", req.Key, req.MessageType, cerr))
	}
	return g.resolve(ctx, req, existing, token, limits)
}

// Resolve applies the decision table to a record that already exists (the
// fused commit path finds it in its cancellation reasons) and performs a
// takeover when the table says so.
func (g *Gate) Resolve(ctx context.Context, req *Request, existing *inbox.Record) (Decision, error) {
	return g.resolve(ctx, req, existing, cmp.Or(req.Token, g.cfg.NewToken()), g.limits(req))
}

// claimError wraps the error of a claim's write as a *ClaimError when the
// write may have applied: not when DynamoDB refused it (a failed
// condition, a validation error), which says it did not.
func (g *Gate) claimError(req *Request, token string, exp time.Time, attempt int, err error) error {
	if failure.IsValidation(err) || errors.Is(err, ErrRecordMissing) || errors.Is(err, inbox.ErrDecode) {
		return err
	}
	return &ClaimError{Lease: g.lease(req, token, attempt, exp), Err: err}
}

// expires is the end of a lease req acquires at now.
func (g *Gate) expires(req *Request, now time.Time) time.Time {
	if !req.LeaseUntil.IsZero() {
		return req.LeaseUntil.Truncate(time.Millisecond)
	}
	return g.cfg.Policy.ExpiresAt(now)
}

func (g *Gate) limits(req *Request) Limits {
	p := req.Attempts
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = g.cfg.MaxAttempts
	}
	return Limits{Attempts: p, MaxTakeovers: g.cfg.MaxTakeovers}
}

func (g *Gate) resolve(ctx context.Context, req *Request, rec *inbox.Record, token string, limits Limits) (Decision, error) {
	for range g.cfg.MaxRaces {
		now := g.cfg.Now()
		v := Decide(g.cfg.Policy, req, rec, token, limits, now)
		d := Decision{Verdict: v, Record: rec, Attempts: limits.Attempts}
		switch v {
		case VerdictOwn:
			exp := g.expires(req, now)
			// The held token came to this delivery from another holder,
			// named on the record: a re-sent copy's attribute, which SQS
			// may deliver twice, to two invocations running at once. The
			// claim takes the lease under its own name and a new token, so
			// that of two deliveries presenting one token only the first
			// holds it; the other finds the lease live (InFlight).
			handed := req.Owner != "" && rec.LeaseOwner != req.Owner
			if !handed && !g.renews(rec, exp, now) {
				d.Action = Acquired
				d.Lease = g.lease(req, token, rec.Attempts+1, rec.LeaseExpiry)
				return d, nil
			}
			// A held lease (Request.Token) that ran out, or nearly, while its
			// delivery waited: renewed before it is used, fenced on its token,
			// so that the handler never starts under an expired lease (the
			// effect log refuses to call under one, and a takeover may be
			// under way). Another holder, or an outcome, got there first when
			// the fence fails: decide again from the record as it is now.
			held := g.lease(req, token, rec.Attempts+1, rec.LeaseExpiry)
			renewal, mine := g.cfg.Store.Renew(held, now, exp), token
			if handed {
				mine = g.cfg.NewToken()
				renewal.Update = renewal.Update.Set(expression.Name(attr.LeaseToken), expression.Value(mine)).
					Set(expression.Name(attr.LeaseOwner), expression.Value(req.Owner))
			}
			next, err := g.fencedUpdate(ctx, req, "renewal", renewal)
			if err != nil {
				return Decision{}, g.claimError(req, mine, exp, rec.Attempts+1, err)
			}
			if next != nil {
				rec = next
				continue
			}
			d.Action = Acquired
			d.Lease = g.lease(req, mine, rec.Attempts+1, exp)
			return d, nil
		case VerdictHashMismatch:
			d.Action, d.Code = HashMismatch, failure.CodeHashMismatch
			d.Message = fmt.Sprintf("idempotency key %q already holds %s work with another request hash (%.15s…, this one %.15s…)", req.Key, req.MessageType, rec.RequestHash, req.RequestHash)
			return d, nil
		case VerdictDuplicate:
			d.Action = Duplicate
			return d, nil
		case VerdictTerminalAgain:
			d.Action, d.Code, d.Message = Terminal, rec.FailureCode, rec.FailureMessage
			return d, nil
		case VerdictInFlight:
			d.Action = InFlight
			d.RetryAfter = g.cfg.Policy.Remaining(rec.LeaseExpiry, now)
			return d, nil
		case VerdictAttemptsExhausted, VerdictRetryWindowExpired:
			end := limits.Attempts.Before(rec.Attempts, now, rec.FailureCode, rec.FailureMessage)
			d.Action, d.Code, d.Message = Exhausted, end.Code, end.Message
			return d, nil
		case VerdictTakeoversExhausted:
			d.Action, d.Code = Exhausted, failure.CodeMaxTakeovers
			d.Message = fmt.Sprintf("the lease of this work expired without an outcome %d times (its worker crashed, hung or lost the database each time; last holder %s)",
				rec.Takeovers+1, orDash(rec.LeaseOwner))
			return d, nil
		}
		exp := g.expires(req, now)
		t := g.cfg.Store.Takeover(rec, inbox.Claim{Token: token, Owner: g.owner(req), Now: now, Expires: exp}, g.cfg.Policy.StaleBefore(now))
		next, err := g.fencedUpdate(ctx, req, "takeover", t)
		if err != nil {
			return Decision{}, g.claimError(req, token, exp, rec.Attempts+1, err)
		}
		if next != nil { // lost the race: decide again from what is there now
			rec = next
			continue
		}
		d.Action = Acquired
		d.Lease = g.lease(req, token, rec.Attempts+1, exp)
		return d, nil
	}
	return Decision{}, fmt.Errorf("%w: %s/%s", ErrRaceLimit, req.Key, req.MessageType)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (g *Gate) lease(req *Request, token string, attempt int, exp time.Time) inbox.Lease {
	return inbox.Lease{Key: req.Key, MessageType: req.MessageType, Token: token, Owner: g.owner(req),
		Attempt: attempt, ExpiresAt: exp, RequestHash: req.RequestHash}
}

func (g *Gate) freshRecord(req *Request, token string, now, exp time.Time) *inbox.Record {
	rec := inbox.NewRecord(&req.Work, now)
	rec.Status = inbox.StatusProcessing
	rec.LeaseOwner, rec.LeaseToken, rec.LeaseExpiresAt = g.owner(req), token, exp.UnixMilli()
	rec.TTL = g.cfg.Store.TTL.For(inbox.StatusProcessing, now)
	if g.cfg.Store.IndexProcessing {
		rec.GSI2PK = inbox.AttentionPK(inbox.StatusProcessing, inbox.Shard(req.Key, g.cfg.Store.AttentionShards))
		rec.GSI2SK = inbox.FormatTime(exp)
	}
	return rec
}

// renews reports whether a lease this delivery holds already (VerdictOwn
// on rec) must be renewed to exp before it is used: it has less than half
// a lease left at now — the heartbeat's renewal point — and exp is later.
// A lease the gate wrote a moment ago (a retried write whose response was
// lost) is used as it is.
func (g *Gate) renews(rec *inbox.Record, exp, now time.Time) bool {
	return rec.LeaseExpiry.Sub(now) < g.cfg.Policy.RenewAfter() && exp.After(rec.LeaseExpiry)
}

// fencedUpdate applies a transition (what names it in errors): one decided
// on a record this delivery does not hold (inbox.Unchanged fences it), or
// the renewal of a lease it holds (fenced on its token). It returns the
// record as it is now when another worker got there first.
func (g *Gate) fencedUpdate(ctx context.Context, req *Request, what string, t inbox.Transition) (*inbox.Record, error) {
	in, err := t.UpdateItem(g.cfg.Store.Table, g.cfg.Store.Key(req.Key, req.MessageType))
	if err != nil {
		return nil, fmt.Errorf("gate: %s: %w", what, err)
	}
	_, err = g.api.UpdateItem(ctx, in)
	if err == nil {
		return nil, nil
	}
	now, cerr := g.conditionRecord(err)
	if cerr != nil {
		return nil, fmt.Errorf("gate: %s %s/%s: %w", what, req.Key, req.MessageType, cerr)
	}
	return now, nil
}

// ErrRecordMissing reports a failed condition that returned no record (the
// record vanished, e.g. deleted by TTL, between two calls): retry.
var ErrRecordMissing = errors.New("gate: condition failed but no record came back")

// conditionRecord extracts the ALL_OLD record from a failed condition, or
// returns err unchanged when it is another error.
func (g *Gate) conditionRecord(err error) (*inbox.Record, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, err
	}
	if len(ccf.Item) == 0 {
		return nil, ErrRecordMissing
	}
	return g.cfg.Store.Decode(ccf.Item)
}
