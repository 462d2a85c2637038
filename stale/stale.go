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

// RenewAPI is what a Renewer needs of DynamoDB.
type RenewAPI interface {
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// RenewerConfig configures a Renewer.
type RenewerConfig struct {
	// Store is the inbox (with IndexProcessing the attention index's sort
	// key follows each renewal). Required (Table).
	Store inbox.Store
	// Policy is the lease policy. Default: Policy{} with defaults.
	Policy Policy
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
	st, err := cfg.Store.WithDefaults()
	if err != nil {
		errs = append(errs, fmt.Errorf("stale: RenewerConfig: %w", err))
	}
	cfg.Store = st
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
	in, err := r.cfg.Store.Renew(l, now, exp).UpdateItem(r.cfg.Store.Table, r.cfg.Store.Key(l.Key, l.MessageType))
	if err != nil {
		return l, fmt.Errorf("stale: renewal: %w", err)
	}
	_, err = r.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l, r.cfg.Store.LostLease(l, ccf.Item)
	}
	if err != nil {
		return l, fmt.Errorf("stale: renew %s/%s: %w", l.Key, l.MessageType, err)
	}
	l.ExpiresAt = exp
	return l, nil
}
