package effects

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/attr"
)

// Key prefixes of effect records.
const (
	prefixEffect = "EFFECT#"
	effectSK     = "EFFECT"
	// attentionUnknown is the attention-index partition of UNKNOWN effects
	// (one partition: they are rare, and each is an operator's task).
	attentionUnknown = "EFFECT#UNKNOWN"
)

// pk is the partition key value of the effect key's record.
func pk(key string) string { return prefixEffect + key }

// hashVersion is the version of requestHash's canonical form, recorded
// with every hash so the form can change without false mismatches.
const hashVersion = 1

// requestHash is the hash of one call: SHA-256 (hex) over the hash version,
// provider, operation and the request in canonical JSON (object keys
// sorted, no insignificant whitespace, numbers as the request's JSON
// encoding writes them).
func requestHash(provider, operation string, request any) (string, error) {
	raw, err := json.Marshal(request)
	if err != nil {
		return "", fmt.Errorf("effects: request does not marshal to JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("effects: request: %w", err)
	}
	canon, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("effects: request: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "effects/v%d\n%s\n%s\n", hashVersion, provider, operation)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Effect is an effect record as read or written. Timestamps are in
// inbox.TimeLayout ("" when not set).
type Effect struct {
	Key         string
	Name        string
	WorkKey     string // the work's idempotency key
	MessageType string
	Provider    string
	Operation   string
	Idempotent  bool
	RequestHash string
	HashVersion int
	Status      Status
	// ProviderRef and Result are what the provider answered (COMPLETED).
	ProviderRef string
	Result      string
	// FailureCode and FailureMessage are the provider's refusal (FAILED).
	FailureCode    string
	FailureMessage string
	// LastError is the last call's error without a clear answer.
	LastError string
	// Calls counts the claims: calls started, including one cut short
	// (a crash) before it reached the provider.
	Calls int
	// WorkAttempt is the work's business attempt that made the last claim.
	WorkAttempt int
	// WorkLease is the token of the work's inbox lease that made the last
	// claim (empty on records written before 0.9): a claim of another
	// lease belongs to a holder that lost the work.
	WorkLease string
	// ClaimToken fences the writes of the last claim's holder.
	ClaimToken string
	// CallExpiresAt is the end of the last claim's call lease (zero when
	// no call is in progress).
	CallExpiresAt time.Time
	CreatedAt     string
	StartedAt     string
	CompletedAt   string
	FailedAt      string
	UnknownAt     string
	// CommittedAt is when the work's transaction carrying Write committed.
	CommittedAt string
	// Resolution, ResolvedAt, ResolvedBy and ResolveReason audit an
	// operator's Resolve.
	Resolution    string
	ResolvedAt    string
	ResolvedBy    string
	ResolveReason string
	// TTL is the record's expiry (epoch s; 0: none).
	TTL int64
	// Pending is set when Do could not make the completion durable at once
	// (DynamoDB failed after the provider answered): Write then carries the
	// completion into the work's transaction.
	Pending bool

	st *store // where Write writes (nil on a decoded-only record)
}

func (s store) key(effectKey string) map[string]types.AttributeValue {
	l := s.inbox.Layout
	return map[string]types.AttributeValue{
		l.PartitionKey: &types.AttributeValueMemberS{Value: pk(effectKey)},
		l.SortKey:      &types.AttributeValueMemberS{Value: effectSK},
	}
}

// decode reads an item; nil for an empty item.
func (s *store) decode(item map[string]types.AttributeValue) (*Effect, error) {
	if len(item) == 0 {
		return nil, nil
	}
	e := &Effect{st: s}
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	var errs []error
	num := func(name string) int64 {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return n
	}
	e.Key = str(attr.EffectKey)
	e.Name = str(attr.EffectName)
	e.WorkKey = str(attr.WorkKey)
	e.MessageType = str(attr.MessageType)
	e.Provider = str(attr.EffectProvider)
	e.Operation = str(attr.EffectOperation)
	if b, ok := item[attr.Idempotent].(*types.AttributeValueMemberBOOL); ok {
		e.Idempotent = b.Value
	}
	e.RequestHash = str(attr.RequestHash)
	e.HashVersion = int(num(attr.HashVersion))
	e.Status = Status(str(attr.Status))
	e.ProviderRef = str(attr.ProviderRef)
	e.Result = str(attr.EffectResult)
	e.FailureCode = str(attr.FailureCode)
	e.FailureMessage = str(attr.FailureMessage)
	e.LastError = str(attr.LastError)
	e.Calls = int(num(attr.Calls))
	e.WorkAttempt = int(num(attr.WorkAttempt))
	e.WorkLease = str(attr.WorkLease)
	e.ClaimToken = str(attr.ClaimToken)
	if ms := num(attr.CallExpiresAt); ms > 0 {
		e.CallExpiresAt = time.UnixMilli(ms).UTC()
	}
	e.CreatedAt = str(attr.CreatedAt)
	e.StartedAt = str(attr.StartedAt)
	e.CompletedAt = str(attr.CompletedAt)
	e.FailedAt = str(attr.FailedAt)
	e.UnknownAt = str(attr.UnknownAt)
	e.CommittedAt = str(attr.CommittedAt)
	e.Resolution = str(attr.Resolution)
	e.ResolvedAt = str(attr.ResolvedAt)
	e.ResolvedBy = str(attr.ResolvedBy)
	e.ResolveReason = str(attr.ResolveReason)
	e.TTL = num(s.inbox.Layout.TTL)
	if e.Key == "" || e.Status == "" {
		errs = append(errs, errors.New("not an effect record (no effectKey or status)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("effects: decode record %q: %w", e.Key, err)
	}
	return e, nil
}

// EffectError is Do's failure: what the log (or the call) says about the
// effect, as a failure the worker records. errors.Is matches its sentinel
// (ErrOutcomeUnknown, ErrRefused…) and failure.As its kind and code.
type EffectError struct {
	// Key is the effect key.
	Key string
	// Effect is the record as it stands (nil when there is none).
	Effect *Effect
	// Failure is the kind and code the work fails with.
	Failure *failure.Error
	// Sentinel is the package's sentinel for this case.
	Sentinel error
	// Err is the cause, if any (the call's error, a DynamoDB error).
	Err error
}

func (e *EffectError) Error() string {
	msg := fmt.Sprintf("effects: %s: %s", e.Key, e.Failure.Code)
	if e.Failure.Message != "" {
		msg += ": " + e.Failure.Message
	}
	return msg
}

// Unwrap returns the failure, the sentinel and the cause.
func (e *EffectError) Unwrap() []error {
	out := []error{e.Failure, e.Sentinel}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// AsError returns the *EffectError in err's chain.
func AsError(err error) (*EffectError, bool) {
	var e *EffectError
	ok := errors.As(err, &e)
	return e, ok
}

func effectErr(kind failure.Kind, code, key string, eff *Effect, sentinel, cause error, message string) *EffectError {
	return &EffectError{Key: key, Effect: eff, Sentinel: sentinel, Err: cause,
		Failure: &failure.Error{Kind: kind, Code: code, Message: message}}
}

// answer is what the call function said beyond success.
type answer struct {
	notDone bool
	code    string
	message string
	err     error
}

func (a *answer) Error() string {
	if a.notDone {
		return "effects: not done: " + a.err.Error()
	}
	return fmt.Sprintf("effects: refused %s: %s", a.code, a.message)
}

func (a *answer) Unwrap() error { return a.err }

// Refused is what a call function returns when the provider answered that
// it will not do the effect, for good (a declined card, an invalid
// address): the effect ends FAILED with code (a failure code: 1..64 of
// [A-Z0-9_]), Do returns a terminal failure with that code, and no retry
// calls the provider again. The handler may instead commit a domain record
// of the refusal with Effect.Write (see Do).
func Refused(code, message string) error {
	return &answer{code: code, message: message}
}

// NotDone is what a call function returns when the provider certainly did
// nothing (the request was refused before any effect: a 429, a 503 the
// provider documents as not applied, a connection that never opened): the
// effect is NOT_DONE, Do returns a retryable failure, and the next attempt
// calls again. Return NotDone only when sure; any other error is treated as
// "may have happened".
func NotDone(err error) error {
	if err == nil {
		err = errors.New("not done")
	}
	return &answer{notDone: true, err: err}
}
