package stale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/metrics"
)

// SweepAPI is what a Sweeper needs of DynamoDB: the operator reads (the
// attention index), Scan (without it) and UpdateItem (the fenced mark).
type SweepAPI interface {
	inbox.ReadAPI
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// SweepConfig configures a Sweeper.
type SweepConfig struct {
	// Store is the inbox, as the workers write it (its TTL applies to the
	// records the sweeper marks). Required (Table).
	Store inbox.Store
	// Policy is the workers' lease policy: a lease is expired Skew after its
	// end. Default: Policy{} with its defaults.
	Policy Policy
	// Grace is how long a lease must have been expired before its record is
	// abandoned: no delivery came to take it over in that time, so its
	// message is likely in the DLQ (moved by the redrive policy) or gone.
	// Keep it well above the queue's longest backoff. Default:
	// DefaultGrace; Zero marks every expired lease at once.
	Grace time.Duration
	// UseIndex finds PROCESSING records through the attention index, which
	// holds them only when the store has IndexProcessing. Without it the
	// sweeper scans the whole table (every item read costs RCU). Default:
	// Store.IndexProcessing.
	UseIndex bool
	// PageSize is how many items one Query or Scan page reads. Default:
	// DefaultPageSize.
	PageSize int
	// Metrics, when set, receives each sweep's figures (the
	// ddbworker_stuck_records, ddbworker_sweep_marked_total and
	// ddbworker_sweeps_total metrics the daemon's sweep --every serves).
	// Default: nil, none.
	Metrics metrics.Provider
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// sweepInstruments are what the sweeper reports through
// SweepConfig.Metrics.
type sweepInstruments struct {
	// Stuck is the number of PROCESSING records with an expired lease, by
	// state: expired (within Grace) or abandoned (past it).
	Stuck metrics.Vec[metrics.Gauge]
	// Marked counts records the sweeper marked LEASE_ABANDONED.
	Marked metrics.Counter
	// Sweeps counts sweeps, by result (ok or error).
	Sweeps metrics.Vec[metrics.Counter]
}

// newSweepInstruments declares the sweeper's instruments on p.
func newSweepInstruments(p metrics.Provider) *sweepInstruments {
	return &sweepInstruments{
		Stuck: p.Gauge("ddbworker_stuck_records",
			"PROCESSING records whose lease expired, as of the last sweep, by state (expired, abandoned).", "state"),
		Marked: p.Counter("ddbworker_sweep_marked_total", "Records the sweeper marked FAILED_TERMINAL LEASE_ABANDONED.").WithLabelValues(),
		Sweeps: p.Counter("ddbworker_sweeps_total", "Sweeps run, by result.", "result"),
	}
}

// Sweeper finds PROCESSING records whose lease expired and no delivery took
// over, reports them, and marks the abandoned ones (expired for longer than
// Grace) FAILED_TERMINAL LEASE_ABANDONED, fenced, so they show up in the
// attention index for operators and alerts.
//
// Marking loses nothing: a later delivery of the same work (a DLQ redrive)
// takes an abandoned record over like an expired lease (gate.Decide).
// Leases that expired within Grace are only reported: the next delivery
// takes them over at once anyway.
type Sweeper struct {
	api     SweepAPI
	reader  *inbox.Reader
	cfg     SweepConfig
	metrics *sweepInstruments // nil: SweepConfig.Metrics is
}

// The defaults of SweepConfig, applied by WithDefaults.
const (
	// DefaultGrace is SweepConfig.Grace's default.
	DefaultGrace = time.Hour
	// DefaultPageSize is SweepConfig.PageSize's default.
	DefaultPageSize = 200
)

// WithDefaults returns c with every zero field set to its default (the
// Store's and Policy's too; what they cannot fix, validate reports), and a
// Grace of Zero as 0: apply it once (NewSweeper does).
func (c SweepConfig) WithDefaults() SweepConfig {
	c.Store, _ = c.Store.WithDefaults()
	c.UseIndex = c.UseIndex || c.Store.IndexProcessing
	c.Policy, _ = c.Policy.WithDefaults()
	switch c.Grace {
	case 0:
		c.Grace = DefaultGrace
	case Zero:
		c.Grace = 0
	}
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate returns every problem of a SweepConfig with its defaults
// applied (NewSweeper joins them).
func (c SweepConfig) validate() []error {
	var errs []error
	if _, err := c.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("stale: SweepConfig: %w", err))
	}
	if _, err := c.Policy.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.Grace < 0 {
		errs = append(errs, fmt.Errorf("stale: SweepConfig.Grace %s must not be negative", c.Grace))
	}
	if c.PageSize < 1 || c.PageSize > inbox.MaxPageLimit {
		errs = append(errs, fmt.Errorf("stale: SweepConfig.PageSize %d must be within 1..%d", c.PageSize, inbox.MaxPageLimit))
	}
	return errs
}

// NewSweeper applies cfg's defaults (WithDefaults), validates it and
// returns a Sweeper; every problem is reported, joined.
func NewSweeper(api SweepAPI, cfg SweepConfig) (*Sweeper, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("stale: SweepAPI is required"))
	}
	cfg = cfg.WithDefaults()
	errs = append(errs, cfg.validate()...)
	s := &Sweeper{api: api, cfg: cfg}
	if cfg.Metrics != nil {
		s.metrics = newSweepInstruments(cfg.Metrics)
	}
	if api != nil && cfg.Store.Table != "" {
		var err error
		if s.reader, err = inbox.NewReader(api, inbox.ReaderConfig{Store: cfg.Store}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// SweepOptions are one sweep's choices.
type SweepOptions struct {
	// DryRun reports without marking anything.
	DryRun bool
	// MaxMarks bounds the records marked in one sweep (0: no bound).
	MaxMarks int
}

// Stuck is one PROCESSING record whose lease expired.
type Stuck struct {
	Record *inbox.Record
	// ExpiredFor is how long ago its lease ended.
	ExpiredFor time.Duration
	// Abandoned: expired for longer than Grace.
	Abandoned bool
	// Marked: this sweep marked it FAILED_TERMINAL LEASE_ABANDONED.
	Marked bool
	// Note says why an abandoned record was not marked (dry run, another
	// worker got there first, an error).
	Note string
}

// SweepReport is what one sweep found and did.
type SweepReport struct {
	// Source is "index" (attention index) or "scan".
	Source string
	// Read is the number of PROCESSING records with an expired lease read.
	Read int
	// Expired and Abandoned count the stuck records by state.
	Expired, Abandoned int
	// Marked counts records marked LEASE_ABANDONED by this sweep.
	Marked int
	// Stuck lists them, longest expired first.
	Stuck []Stuck
	// At is when the sweep started.
	At time.Time
}

// Sweep runs one sweep.
func (s *Sweeper) Sweep(ctx context.Context, opts SweepOptions) (SweepReport, error) {
	rep, err := s.sweep(ctx, opts)
	if m := s.metrics; m != nil {
		if err != nil {
			m.Sweeps.WithLabelValues("error").Inc()
		} else {
			m.Sweeps.WithLabelValues("ok").Inc()
			m.Stuck.WithLabelValues("expired").Set(float64(rep.Expired))
			m.Stuck.WithLabelValues("abandoned").Set(float64(rep.Abandoned - rep.Marked))
			m.Marked.Add(float64(rep.Marked))
		}
	}
	return rep, err
}

func (s *Sweeper) sweep(ctx context.Context, opts SweepOptions) (SweepReport, error) {
	now := s.cfg.Now()
	rep := SweepReport{Source: "scan", At: now}
	var recs []*inbox.Record
	var err error
	if s.cfg.UseIndex {
		rep.Source = "index"
		recs, err = s.fromIndex(ctx, now)
	} else {
		recs, err = s.fromScan(ctx, now)
	}
	if err != nil {
		return rep, err
	}
	rep.Read = len(recs)
	staleBefore := s.cfg.Policy.StaleBefore(now)
	abandonBefore := s.cfg.Policy.StaleBefore(now.Add(-s.cfg.Grace))
	for _, rec := range recs {
		ended, ok := leaseEnd(rec)
		if rec.Status != inbox.StatusProcessing || !ok || ended.UnixMilli() >= staleBefore {
			continue // moved on since the index entry, or not expired
		}
		st := Stuck{Record: rec, ExpiredFor: now.Sub(ended), Abandoned: ended.UnixMilli() < abandonBefore}
		if !st.Abandoned {
			rep.Expired++
			rep.Stuck = append(rep.Stuck, st)
			continue
		}
		rep.Abandoned++
		switch {
		case opts.DryRun:
			st.Note = "dry run"
		case opts.MaxMarks > 0 && rep.Marked >= opts.MaxMarks:
			st.Note = "over --max"
		default:
			marked, err := s.abandon(ctx, rec, now, abandonBefore)
			switch {
			case err != nil:
				return rep, err
			case marked:
				st.Marked = true
				rep.Marked++
			default:
				st.Note = "changed meanwhile (taken over, renewed or settled)"
			}
		}
		rep.Stuck = append(rep.Stuck, st)
	}
	slices.SortStableFunc(rep.Stuck, func(a, b Stuck) int { return int(b.ExpiredFor - a.ExpiredFor) })
	return rep, nil
}

// fromIndex pages every PROCESSING record whose lease expired before now
// (minus the skew margin) out of the attention index.
func (s *Sweeper) fromIndex(ctx context.Context, now time.Time) ([]*inbox.Record, error) {
	var out []*inbox.Record
	page := inbox.Page{Limit: s.cfg.PageSize}
	for {
		l, err := s.reader.ListAttention(ctx, inbox.StatusProcessing, inbox.AttentionFilter{Until: now.Add(-s.cfg.Policy.Skew)}, page)
		if err != nil {
			return nil, fmt.Errorf("stale: sweep the attention index: %w", err)
		}
		out = append(out, l.Records...)
		if l.Next == "" {
			return out, nil
		}
		page.Cursor = l.Next
	}
}

// fromScan reads the whole table for PROCESSING records whose lease
// expired: the way to sweep when the workers do not index PROCESSING.
func (s *Sweeper) fromScan(ctx context.Context, now time.Time) ([]*inbox.Record, error) {
	filter := expression.Name(attr.Status).Equal(expression.Value(string(inbox.StatusProcessing))).
		And(expression.Name(attr.LeaseExpiresAt).LessThan(expression.Value(s.cfg.Policy.StaleBefore(now))))
	ex, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		return nil, fmt.Errorf("stale: build sweep filter: %w", err)
	}
	var out []*inbox.Record
	var start map[string]types.AttributeValue
	for {
		res, err := s.api.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(s.cfg.Store.Table), FilterExpression: ex.Filter(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			Limit: aws.Int32(int32(s.cfg.PageSize)), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("stale: sweep scan of %s: %w", s.cfg.Store.Table, err)
		}
		for _, item := range res.Items {
			rec, err := s.cfg.Store.Decode(item)
			if err != nil {
				continue // a domain item that happens to carry these attributes
			}
			out = append(out, rec)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

// leaseEnd is when rec's lease ended: its expiry, or, for a lease given
// back (inbox.Release), the release — which workers before version 0.9
// recorded only in lastSeenAt, with leaseExpiresAt 0. ok is false when
// the record says neither.
func leaseEnd(rec *inbox.Record) (time.Time, bool) {
	if rec.LeaseExpiresAt > 0 {
		return rec.LeaseExpiry, true
	}
	if !rec.Released() {
		return time.Time{}, false
	}
	t, err := time.Parse(inbox.TimeLayout, rec.LastSeenAt)
	return t, err == nil
}

// abandon marks rec FAILED_TERMINAL LEASE_ABANDONED, fenced: only if it is
// still exactly as read and its lease ended before abandonBefore. It
// reports false when the record changed meanwhile.
func (s *Sweeper) abandon(ctx context.Context, rec *inbox.Record, now time.Time, abandonBefore int64) (bool, error) {
	ended, _ := leaseEnd(rec)
	msg := fmt.Sprintf("lease of %s expired at %s (%s ago) and no delivery took it over; its message is likely in the DLQ or gone: a redrive of the same work takes it over",
		orUnknown(rec.LeaseOwner), inbox.FormatTime(ended), now.Sub(ended).Round(time.Second))
	if rec.Released() {
		msg = fmt.Sprintf("lease of %s given back at %s (%s: %s) and no delivery took it over in %s; its message is likely in the DLQ or gone: a redrive of the same work takes it over",
			orUnknown(rec.LeaseOwner), inbox.FormatTime(ended), orUnknown(rec.FailureCode), rec.FailureMessage, now.Sub(ended).Round(time.Second))
	}
	in, err := s.cfg.Store.End(rec, now, failure.CodeLeaseAbandoned, msg, abandonBefore).
		UpdateItem(s.cfg.Store.Table, s.cfg.Store.Key(rec.Key, rec.MessageType))
	if err != nil {
		return false, fmt.Errorf("stale: abandon: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stale: mark %s/%s abandoned: %w", rec.Key, rec.MessageType, err)
	}
	return true, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown worker"
	}
	return s
}
