package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
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
	// MaxRaces bounds how often one Acquire re-decides after another worker
	// changed the record between its read and its takeover. Default: 3.
	MaxRaces int
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// NewToken mints fencing tokens. Default: 128 random bits in hex.
	NewToken func() string
}

// Request describes the work item a delivery wants to claim.
type Request struct {
	inbox.Work
	// Attempts is the message's attempts policy; MaxAttempts 0 means
	// Config.MaxAttempts. A takeover it forbids ends the record as
	// FAILED_TERMINAL MAX_ATTEMPTS_EXCEEDED or RETRY_WINDOW_EXPIRED.
	Attempts failure.Policy
	// Lease, when set, is this delivery's lease length instead of the
	// policy's (a Lambda invocation's lease ends with its deadline).
	Lease time.Duration
	// HashAs, when set, returns this work's request hash in the canonical
	// form (version) of stored, a record's requestHash, so that a record
	// written by an older worker is compared like with like
	// (envelope.Envelope.HashLike). Without it, or when it fails, hashes
	// are compared as they are.
	HashAs func(stored string) (string, error)
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
	// Terminal: never run; apply the terminal policy with Decision.Code.
	Terminal
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
	// Code and Message describe a Terminal decision.
	Code, Message string
	// RetryAfter is how long an InFlight delivery should stay hidden.
	RetryAfter time.Duration
}

// Gate claims work items.
type Gate struct {
	api API
	cfg Config
}

// New validates cfg and returns a Gate.
func New(api API, cfg Config) (*Gate, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("gate: API is required"))
	}
	var err error
	if cfg.Store, err = cfg.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("gate: Config: %w", err))
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	if cfg.Policy, err = cfg.Policy.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = failure.DefaultMaxAttempts
	}
	if cfg.MaxAttempts < 1 || cfg.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("gate: Config.MaxAttempts %d must be within 1..100", cfg.MaxAttempts))
	}
	if cfg.MaxRaces == 0 {
		cfg.MaxRaces = 3
	}
	if cfg.MaxRaces < 1 {
		errs = append(errs, fmt.Errorf("gate: Config.MaxRaces %d must be at least 1", cfg.MaxRaces))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewToken == nil {
		cfg.NewToken = NewToken
	}
	if err := errors.Join(errs...); err != nil {
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

// Owner returns the leaseOwner this gate writes.
func (g *Gate) Owner() string { return g.cfg.Owner }

// ErrRaceLimit reports that the record kept changing under this delivery:
// retry later.
var ErrRaceLimit = errors.New("gate: record changed concurrently too many times")

// Acquire claims req: one conditional PutItem of a fresh PROCESSING record;
// when a record exists, the decision table on the record the condition
// returned, and for a takeover one fenced UpdateItem. Errors are the SDK's
// (throttling, timeouts; classify them with failure.Classify) or
// ErrRaceLimit; every decision is a Decision.
func (g *Gate) Acquire(ctx context.Context, req *Request) (Decision, error) {
	now := g.cfg.Now()
	token := g.cfg.NewToken()
	attempts := g.attempts(req)
	exp := g.expires(req, now)
	rec := g.freshRecord(req, token, now, exp)
	item := g.cfg.Store.Encode(rec)
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
		return Decision{Action: Acquired, Attempts: attempts, Lease: g.lease(req, token, 1, exp)}, nil
	}
	existing, cerr := g.conditionRecord(err)
	if cerr != nil {
		return Decision{}, fmt.Errorf("gate: put %s/%s: %w", req.Key, req.MessageType, cerr)
	}
	return g.resolve(ctx, req, existing, token, attempts)
}

// Resolve applies the decision table to a record that already exists (the
// fused commit path finds it in its cancellation reasons) and performs a
// takeover when the table says so.
func (g *Gate) Resolve(ctx context.Context, req *Request, existing *inbox.Record) (Decision, error) {
	return g.resolve(ctx, req, existing, g.cfg.NewToken(), g.attempts(req))
}

// expires is the end of a lease req acquires at now.
func (g *Gate) expires(req *Request, now time.Time) time.Time {
	if req.Lease > 0 {
		return now.Add(req.Lease).Truncate(time.Millisecond)
	}
	return g.cfg.Policy.ExpiresAt(now)
}

func (g *Gate) attempts(req *Request) failure.Policy {
	p := req.Attempts
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = g.cfg.MaxAttempts
	}
	return p
}

func (g *Gate) resolve(ctx context.Context, req *Request, rec *inbox.Record, token string, attempts failure.Policy) (Decision, error) {
	for range g.cfg.MaxRaces {
		now := g.cfg.Now()
		exp := g.expires(req, now) // of the lease a takeover claims
		v := Decide(g.cfg.Policy, req, rec, token, attempts, now)
		d := Decision{Verdict: v, Record: rec, Attempts: attempts}
		var t inbox.Transition
		var end *failure.Error
		switch v {
		case VerdictOwn:
			d.Action = Acquired
			d.Lease = g.lease(req, token, rec.Attempts, rec.LeaseExpiry)
			return d, nil
		case VerdictHashMismatch:
			d.Action, d.Code = Terminal, failure.CodeHashMismatch
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
			end = attempts.Before(rec.Attempts, now, rec.FailureCode, rec.FailureMessage)
			t = g.cfg.Store.End(rec, now, end.Code, end.Message, g.cfg.Policy.StaleBefore(now))
		default:
			t = g.cfg.Store.Takeover(rec, inbox.Claim{Token: token, Owner: g.cfg.Owner, Now: now, Expires: exp}, g.cfg.Policy.StaleBefore(now))
		}
		next, err := g.fencedUpdate(ctx, req, t)
		if err != nil {
			return Decision{}, err
		}
		if next != nil { // lost the race: decide again from what is there now
			rec = next
			continue
		}
		if end != nil {
			d.Action, d.Code, d.Message = Terminal, end.Code, end.Message
			return d, nil
		}
		d.Action = Acquired
		d.Lease = g.lease(req, token, rec.Attempts+1, exp)
		return d, nil
	}
	return Decision{}, fmt.Errorf("%w: %s/%s", ErrRaceLimit, req.Key, req.MessageType)
}

func (g *Gate) lease(req *Request, token string, attempts int, exp time.Time) inbox.Lease {
	return inbox.Lease{Key: req.Key, MessageType: req.MessageType, Token: token, Owner: g.cfg.Owner,
		Attempts: attempts, ExpiresAt: exp, RequestHash: req.RequestHash}
}

func (g *Gate) freshRecord(req *Request, token string, now, exp time.Time) *inbox.Record {
	rec := inbox.NewRecord(&req.Work, now)
	rec.Status = inbox.StatusProcessing
	rec.LeaseOwner, rec.LeaseToken, rec.LeaseExpiresAt = g.cfg.Owner, token, exp.UnixMilli()
	rec.TTL = g.cfg.Store.TTL.For(inbox.StatusProcessing, now)
	if g.cfg.Store.IndexProcessing {
		rec.GSI2PK = inbox.AttentionPK(inbox.StatusProcessing, inbox.Shard(req.Key, g.cfg.Store.AttentionShards))
		rec.GSI2SK = inbox.FormatTime(exp)
	}
	return rec
}

// fencedUpdate applies a transition decided on a record this delivery does
// not hold (inbox.Unchanged fences it). It returns the record as it is now
// when another worker got there first.
func (g *Gate) fencedUpdate(ctx context.Context, req *Request, t inbox.Transition) (*inbox.Record, error) {
	in, err := t.UpdateItem(g.cfg.Store.Table, g.cfg.Store.Key(req.Key, req.MessageType))
	if err != nil {
		return nil, fmt.Errorf("gate: takeover: %w", err)
	}
	_, err = g.api.UpdateItem(ctx, in)
	if err == nil {
		return nil, nil
	}
	now, cerr := g.conditionRecord(err)
	if cerr != nil {
		return nil, fmt.Errorf("gate: takeover %s/%s: %w", req.Key, req.MessageType, cerr)
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

// Rejection describes a message refused before it could be filed under its
// idempotency key: an invalid envelope, an unknown message type, or a hash
// mismatch (whose key already holds other work, which stays untouched).
type Rejection struct {
	SQSMessageID string
	Code         string
	Message      string
	// Whatever of the work's identity could be read (may be empty). With
	// the aggregate, the rejection is listed in the aggregate's history.
	Key           string
	MessageType   string
	RequestHash   string
	AggregateType string
	AggregateID   string
	CorrelationID string
}

// Reject records r as a FAILED_TERMINAL rejection record keyed by the SQS
// message id, in the attention index, so every refused message is accounted
// for in the inbox. Recording the same message again is a no-op.
func (g *Gate) Reject(ctx context.Context, r *Rejection) error {
	now := g.cfg.Now()
	ts := inbox.FormatTime(now)
	rec := &inbox.Record{
		Key: r.Key, MessageType: r.MessageType, RequestHash: r.RequestHash, SQSMessageID: r.SQSMessageID,
		AggregateType: r.AggregateType, AggregateID: r.AggregateID, CorrelationID: r.CorrelationID,
		Status: inbox.StatusFailedTerminal, FailureCode: r.Code, FailureMessage: truncate(r.Message, maxRejectionMessage),
		FirstSeenAt: ts, FailedAt: ts, TTL: g.cfg.Store.TTL.For(inbox.StatusFailedTerminal, now),
		GSI2PK: inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(r.SQSMessageID, g.cfg.Store.AttentionShards)),
		GSI2SK: ts,
	}
	// Listed in the aggregate's history when its keys fit DynamoDB's
	// limits (a rejection may be about an oversized field).
	if pk, sk := inbox.AggregatePK(r.AggregateType, r.AggregateID), inbox.AggregateSK(ts, r.MessageType, r.Key); r.AggregateType != "" && r.AggregateID != "" &&
		len(pk) <= 2048 && len(sk) <= 1024 {
		rec.GSI1PK, rec.GSI1SK = pk, sk
	}
	item := g.cfg.Store.Encode(rec)
	for k, v := range g.cfg.Store.RejectionKey(r.SQSMessageID) {
		item[k] = v
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(g.cfg.Store.Layout.PartitionKey))).Build()
	if err != nil {
		return fmt.Errorf("gate: build condition: %w", err)
	}
	_, err = g.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(g.cfg.Store.Table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("gate: record rejection of %s: %w", r.SQSMessageID, err)
	}
	return nil
}

// maxRejectionMessage bounds a rejection's failureMessage: a decoder error
// may quote what it refused.
const maxRejectionMessage = 512

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
