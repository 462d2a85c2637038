package stale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
)

// Policy says how long a lease lasts and when it is stale.
type Policy struct {
	// Lease is how long an acquisition or renewal holds a record; keep it
	// equal to the queue's visibility timeout. Default: 30s.
	Lease time.Duration
	// Skew is the clock-skew margin: another worker treats a lease as
	// expired only Skew after its recorded end. Default: 2s; Zero for none.
	Skew time.Duration
}

// Zero sets a field whose zero value means "the default" to an explicit
// zero (Policy.Skew, SweepConfig.Grace).
const Zero = -1

// Defaults.
const (
	DefaultLease = 30 * time.Second
	DefaultSkew  = 2 * time.Second
)

// WithDefaults fills zero fields with their defaults and validates.
func (p Policy) WithDefaults() (Policy, error) {
	if p.Lease == 0 {
		p.Lease = DefaultLease
	}
	switch p.Skew {
	case 0:
		p.Skew = DefaultSkew
	case Zero:
		p.Skew = 0
	}
	var errs []error
	if p.Lease < time.Second {
		errs = append(errs, fmt.Errorf("stale: Policy.Lease %s must be at least 1s", p.Lease))
	}
	if p.Skew < 0 || p.Skew >= p.Lease {
		errs = append(errs, fmt.Errorf("stale: Policy.Skew %s must be within [0, Lease)", p.Skew))
	}
	return p, errors.Join(errs...)
}

// ExpiresAt is the end of a lease acquired or renewed at now, truncated to
// the millisecond it is stored with.
func (p Policy) ExpiresAt(now time.Time) time.Time {
	return now.Add(p.Lease).Truncate(time.Millisecond)
}

// Expired reports whether a lease that ends at expiresAt may be taken over at
// now: only after the skew margin, so a holder whose clock runs slightly
// behind is not fenced out while it still believes it holds the lease.
func (p Policy) Expired(expiresAt, now time.Time) bool {
	return now.After(expiresAt.Add(p.Skew))
}

// StaleBefore is the bound a condition compares leaseExpiresAt (epoch ms)
// against: a lease is expired exactly when leaseExpiresAt < StaleBefore(now),
// the same instant Expired says so. It rounds up, because the stored expiry
// is whole milliseconds and now is not.
func (p Policy) StaleBefore(now time.Time) int64 {
	t := now.Add(-p.Skew)
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// Remaining is how long until a lease ending at expiresAt may be taken over
// (zero when it already may): the time a second receiver should stay away.
func (p Policy) Remaining(expiresAt, now time.Time) time.Duration {
	d := expiresAt.Add(p.Skew).Sub(now)
	if d < 0 {
		return 0
	}
	return d
}

// RenewAfter is how long after acquisition a holder should renew: half the
// lease, so one lost renewal still leaves time for another.
func (p Policy) RenewAfter() time.Duration { return p.Lease / 2 }

// TTL holds how long records live after their last write, per status. TTL is
// garbage collection only.
type TTL struct {
	// Processing records of abandoned work disappear after this. It must be
	// far beyond any lease. Default: 7 days.
	Processing time.Duration
	// Completed records must outlive every possible redelivery: SQS retention
	// (≤ 14 days) + DLQ retention (≤ 14 days) + margin. Default: 35 days.
	Completed time.Duration
	// Failed records (retryable and terminal) stay for investigation and
	// redrive. Default: 35 days.
	Failed time.Duration
}

// WithDefaults fills zero fields and validates.
func (t TTL) WithDefaults() (TTL, error) {
	if t.Processing == 0 {
		t.Processing = 7 * 24 * time.Hour
	}
	if t.Completed == 0 {
		t.Completed = 35 * 24 * time.Hour
	}
	if t.Failed == 0 {
		t.Failed = 35 * 24 * time.Hour
	}
	var errs []error
	if t.Processing < time.Hour {
		errs = append(errs, fmt.Errorf("stale: TTL.Processing %s must be at least 1h (far beyond any lease)", t.Processing))
	}
	if t.Completed < 28*24*time.Hour {
		errs = append(errs, fmt.Errorf("stale: TTL.Completed %s must be at least 28 days (SQS + DLQ retention), or a late redelivery applies twice", t.Completed))
	}
	if t.Failed < time.Hour {
		errs = append(errs, fmt.Errorf("stale: TTL.Failed %s must be at least 1h", t.Failed))
	}
	return t, errors.Join(errs...)
}

// For returns the ttl attribute value (epoch seconds) of a record written in
// status at now.
func (t TTL) For(status inbox.Status, now time.Time) int64 {
	switch status {
	case inbox.StatusCompleted:
		return now.Add(t.Completed).Unix()
	case inbox.StatusProcessing:
		return now.Add(t.Processing).Unix()
	default:
		return now.Add(t.Failed).Unix()
	}
}

// RenewAPI is what a Renewer needs of DynamoDB.
type RenewAPI interface {
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// RenewerConfig configures a Renewer.
type RenewerConfig struct {
	// Table is the inbox table. Required.
	Table string
	// Policy is the lease policy. Default: Policy{} with defaults.
	Policy Policy
	// IndexProcessing keeps the attention index sort key of PROCESSING
	// records in step with the lease (only when the gate indexes them).
	// Default: false.
	IndexProcessing bool
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Renewer extends leases: the heartbeat of a handler that runs long.
type Renewer struct {
	api RenewAPI
	cfg RenewerConfig
}

// NewRenewer validates cfg and returns a Renewer.
func NewRenewer(api RenewAPI, cfg RenewerConfig) (*Renewer, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("stale: RenewAPI is required"))
	}
	if cfg.Table == "" {
		errs = append(errs, errors.New("stale: RenewerConfig.Table is required"))
	}
	p, err := cfg.Policy.WithDefaults()
	errs = append(errs, err)
	cfg.Policy = p
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Renewer{api: api, cfg: cfg}, nil
}

// Renew extends l by one lease from now, fenced by its token: the update
// applies only while the record is PROCESSING under l.Token. It returns the
// renewed lease, or an *inbox.LeaseLostError when the record moved on.
func (r *Renewer) Renew(ctx context.Context, l inbox.Lease) (inbox.Lease, error) {
	now := r.cfg.Now()
	exp := r.cfg.Policy.ExpiresAt(now)
	in, err := inbox.Renew(l, now, exp, r.cfg.IndexProcessing).UpdateItem(r.cfg.Table, inbox.KeyOf(l.Key, l.MessageType))
	if err != nil {
		return l, fmt.Errorf("stale: renewal: %w", err)
	}
	_, err = r.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l, inbox.LostLease(l, ccf.Item)
	}
	if err != nil {
		return l, fmt.Errorf("stale: renew %s/%s: %w", l.Key, l.MessageType, err)
	}
	l.ExpiresAt = exp
	return l, nil
}
