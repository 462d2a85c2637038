package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/time/rate"

	"github.com/ddbworker/ddbworker/internal/fair"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/s3payload"
)

// Tenants served fairly (issue 24). A message's tenant is its SQS
// MessageGroupId, else the payload field its route names
// (ddbworker.Tenant), else the default tenant. The worker shares two
// things among the tenants it sees:
//
//   - its concurrency: while more than one tenant has messages held or in
//     flight, one tenant's messages may hold at most TenantShare of the
//     concurrency limit; a received message of a tenant at its cap is held
//     (without a slot, its visibility kept) and the tenants' held messages
//     start by deficit round robin as slots free. With one tenant nothing
//     is held and dispatch is what it was.
//   - its write budget (Config.MaxWCU): writes waiting for the budget are
//     paced one at a time, tenant by tenant in deficit round robin of
//     their write units, so a write of a quiet tenant waits behind about
//     one write of each busy one instead of behind every write queued.
//
// SQS itself shares a fair queue's deliveries among its message groups;
// the worker cannot reorder what it has not received: it serves fairly
// what it holds and what waits for its budget.

// The defaults of FairConfig.
const (
	// DefaultTenantShare is FairConfig.TenantShare's default.
	DefaultTenantShare = 0.75
	// DefaultNamedTenants is FairConfig.NamedTenants's default.
	DefaultNamedTenants = 5
	// DefaultTenant is the tenant of a message with neither a group id
	// nor its route's tenant field, as the dwell metric names it.
	DefaultTenant = "default"
	// OtherTenants is the dwell metric's label of the tenants it does not
	// name.
	OtherTenants = "other"
)

// FairConfig configures how the worker shares itself among tenants.
type FairConfig struct {
	// TenantShare is the largest part of the concurrency limit one
	// tenant's messages may hold while another tenant has messages held or
	// in flight, within (0, 1]. Default: DefaultTenantShare. 1: no cap
	// (held messages still start by round robin).
	TenantShare float64
	// MaxHeld bounds the messages held for fairness (received while their
	// tenant is at its cap); pollers do not receive while it is reached.
	// Default: Concurrency. Zero: nothing is held and there is no cap —
	// messages start in the order they are received.
	MaxHeld int
	// NamedTenants is how many tenants the dwell metric
	// (ddbworker_tenant_dwell_seconds) names: the busiest of the last
	// minute; the rest are "other". Default: DefaultNamedTenants.
	NamedTenants int
}

// WithDefaults returns c with its defaults for a worker of concurrency
// slots, and its problems.
func (c FairConfig) WithDefaults(concurrency int) (FairConfig, error) {
	var errs []error
	c.TenantShare = cmp.Or(c.TenantShare, DefaultTenantShare)
	if c.TenantShare <= 0 || c.TenantShare > 1 || math.IsNaN(c.TenantShare) {
		errs = append(errs, fmt.Errorf("worker: Config.Fair.TenantShare %v must be within (0, 1]", c.TenantShare))
	}
	// The default follows the concurrency, whose own problem is reported
	// once, by Config: an invalid one leaves MaxHeld at 0 (no holding).
	c.MaxHeld = withDefault(c.MaxHeld, max(concurrency, 0))
	if c.MaxHeld < 0 {
		errs = append(errs, fmt.Errorf("worker: Config.Fair.MaxHeld %d must not be negative", c.MaxHeld))
	}
	c.NamedTenants = cmp.Or(c.NamedTenants, DefaultNamedTenants)
	if c.NamedTenants < 0 || c.NamedTenants > 100 {
		errs = append(errs, fmt.Errorf("worker: Config.Fair.NamedTenants %d must be within 0..100", c.NamedTenants))
	}
	return c, errors.Join(errs...)
}

// tenantOf is d's tenant: its MessageGroupId, else the payload field its
// route names, read from an inline body (a body fetched from S3 is the
// default tenant's until then: the fetch belongs to the pipeline), else
// DefaultTenant.
func (w *Worker) tenantOf(d *delivery) string {
	if d.group != "" {
		return d.group
	}
	if !w.tenantFields {
		return DefaultTenant
	}
	raw := aws.ToString(d.m.Body)
	if _, extended, _ := s3payload.ExtendedPointer(raw, d.m.MessageAttributes); extended {
		return DefaultTenant
	}
	env, err := w.decoder.Read(w.input(d, []byte(raw)), w.adapters)
	if err != nil {
		return DefaultTenant
	}
	rt, ok := w.routes[env.MessageType]
	if !ok || rt.TenantField == "" {
		return DefaultTenant
	}
	if t := payloadField(env.Payload, rt.TenantField); t != "" {
		return t
	}
	return DefaultTenant
}

// payloadField is the string or number at the payload's top-level field
// ("" when there is none).
func payloadField(payload json.RawMessage, field string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return ""
	}
	v, ok := fields[field]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String()
	}
	return ""
}

// tenantKey carries a delivery's tenant on its context, for the write
// budget.
type tenantKey struct{}

func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

func tenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// heldUnit is a unit of dispatch (one message; a FIFO group's messages
// of one receive) held for its tenant's turn.
type heldUnit struct {
	tenant   string
	ds       []*delivery
	extended time.Time // received, or its visibility last extended
}

// tenants is the daemon's dispatch between its pollers and its slots:
// what each tenant has in flight, and the held units.
type tenants struct {
	share   float64
	maxHeld int

	mu      sync.Mutex
	held    *fair.DRR[*heldUnit]
	units   map[*heldUnit]struct{} // the held units, for the visibility keeper
	heldN   int                    // messages held
	running map[string]int         // messages in flight by tenant
	changed chan struct{}          // closed and replaced when heldN falls
}

func newTenants(cfg FairConfig) *tenants {
	return &tenants{share: cfg.TenantShare, maxHeld: cfg.MaxHeld, held: fair.New[*heldUnit](1),
		units: map[*heldUnit]struct{}{}, running: map[string]int{}, changed: make(chan struct{})}
}

// capOf is a tenant's in-flight cap under limit (t.mu held): the limit
// while it is the only tenant with messages held or in flight.
func (t *tenants) capOf(tenant string, limit int) int {
	if t.maxHeld == 0 {
		return math.MaxInt
	}
	for other, n := range t.running {
		if other != tenant && n > 0 {
			return max(1, int(math.Ceil(float64(limit)*t.share)))
		}
	}
	if t.held.Tenants() > 1 || (t.held.Tenants() == 1 && t.held.Waiting(tenant) == 0) {
		return max(1, int(math.Ceil(float64(limit)*t.share)))
	}
	return limit
}

// admit reports whether a unit of n messages of tenant starts now (it is
// counted in flight), or is held (queued behind the tenant's held units).
func (t *tenants) admit(tenant string, ds []*delivery, limit int, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(ds)
	if t.held.Waiting(tenant) == 0 && (t.running[tenant] == 0 || t.running[tenant]+n <= t.capOf(tenant, limit)) {
		t.running[tenant] += n
		return true
	}
	u := &heldUnit{tenant: tenant, ds: ds, extended: now}
	t.held.Push(tenant, u, n)
	t.units[u] = struct{}{}
	t.heldN += n
	return false
}

// next takes the held unit to start next, by round robin among the
// tenants under their caps, and counts it in flight (nil: none).
func (t *tenants) next(limit int) *heldUnit {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, u, ok := t.held.Pop(func(tenant string) bool {
		return t.running[tenant] == 0 || t.running[tenant] < t.capOf(tenant, limit)
	})
	if !ok {
		return nil
	}
	t.running[u.tenant] += len(u.ds)
	t.unhold(u)
	return u
}

// unhold forgets a unit leaving the held queue (t.mu held).
func (t *tenants) unhold(u *heldUnit) {
	delete(t.units, u)
	t.heldN -= len(u.ds)
	close(t.changed)
	t.changed = make(chan struct{})
}

// done counts n messages of tenant out of flight.
func (t *tenants) done(tenant string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[tenant] -= n; t.running[tenant] <= 0 {
		delete(t.running, tenant)
	}
}

// room waits until fewer than MaxHeld messages are held (a poller does not
// receive more for the held queue than it may hold).
func (t *tenants) room(ctx context.Context) error {
	for {
		t.mu.Lock()
		full, changed := t.maxHeld > 0 && t.heldN >= t.maxHeld, t.changed
		t.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// takeAll takes every held unit (shutdown).
func (t *tenants) takeAll() []*heldUnit {
	t.mu.Lock()
	defer t.mu.Unlock()
	us := t.held.Drain()
	for _, u := range us {
		t.unhold(u)
	}
	return us
}

// due are the held messages whose visibility was last set more than
// after ago; their time is reset to now.
func (t *tenants) due(now time.Time, after time.Duration) []*delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ds []*delivery
	for u := range t.units {
		if now.Sub(u.extended) >= after {
			ds = append(ds, u.ds...)
			u.extended = now
		}
	}
	return ds
}

// heldCount is how many messages are held.
func (t *tenants) heldCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heldN
}

// startHeld starts held units while a slot is free and a tenant under
// its cap has one waiting. A FIFO unit runs whole: it takes one slot and
// forces the rest.
func (w *Worker) startHeld(ctx, workCtx context.Context, work *sync.WaitGroup, del *deleter) {
	for w.pool.TryAcquire() {
		u := w.tenants.next(w.pool.Limit())
		if u == nil {
			w.pool.Release(1)
			return
		}
		w.metrics.FairHeld.Set(float64(w.tenants.heldCount()))
		w.pool.Force(len(u.ds) - 1)
		w.start(ctx, workCtx, u.tenant, u.ds, work, del)
	}
}

// keepHeld keeps the held messages hidden: every third of the visibility
// timeout it sets the visibility of those held that long back to the
// whole timeout, so a held message starts with at least two thirds of it
// left (its heartbeat renews it from there) and never reappears to
// another consumer while it waits. Holding charges no attempt: the
// pipeline has not seen the message.
func (w *Worker) keepHeld(ctx context.Context) {
	every := max(w.cfg.VisibilityTimeout/3, 300*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := w.tenants.due(w.cfg.Now(), every)
		for _, batch := range sqsbatch.Split(due, func(*delivery) int { return 0 }, sqsbatch.Limits{}) {
			w.extendHeld(ctx, batch)
		}
	}
}

func (w *Worker) extendHeld(ctx context.Context, batch []*delivery) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, 0, len(batch))
	for i, d := range batch {
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: d.m.ReceiptHandle,
			VisibilityTimeout: visibilitySeconds(w.cappedHide(w.cfg.VisibilityTimeout, d.receivedAt))})
	}
	w.changeVisibilityBatch(ctx, batch, entries, "held for fairness")
}

// fairPacer shares the write budget among tenants: a write waiting for
// the budget waits for its tenant's turn (deficit round robin of write
// units) to reserve, and the reserving writer keeps the turn until its
// reservation is due — so reservations are never made ahead of the
// budget, and a quiet tenant's write waits behind the write holding the
// turn and at most one turn (one write) of each busy tenant. While the
// budget has units to spare nobody waits.
type fairPacer struct {
	limiter *rate.Limiter

	mu      sync.Mutex
	waiting *fair.DRR[*paceWaiter]
	busy    bool // a writer holds the turn
}

type paceWaiter struct {
	turn      chan struct{} // closed: the turn is the waiter's
	cancelled bool
}

func newFairPacer(l *rate.Limiter) *fairPacer {
	return &fairPacer{limiter: l, waiting: fair.New[*paceWaiter](1)}
}

// waitN waits until the budget allows n units for tenant.
func (p *fairPacer) waitN(ctx context.Context, tenant string, n int, now func() time.Time) error {
	p.mu.Lock()
	if p.busy || p.waiting.Len() > 0 {
		pw := &paceWaiter{turn: make(chan struct{})}
		p.waiting.Push(tenant, pw, n)
		p.mu.Unlock()
		select {
		case <-pw.turn:
		case <-ctx.Done():
			p.mu.Lock()
			select {
			case <-pw.turn: // handed the turn meanwhile: hand it on
				p.mu.Unlock()
				p.handOn()
			default:
				pw.cancelled = true
				p.mu.Unlock()
			}
			return ctx.Err()
		}
	} else {
		p.busy = true
		p.mu.Unlock()
	}
	defer p.handOn()
	r := p.limiter.ReserveN(now(), n)
	if !r.OK() {
		return fmt.Errorf("worker: a write of %d units exceeds the write budget's burst", n)
	}
	wait := r.DelayFrom(now())
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// handOn passes the turn to the next waiter by round robin.
func (p *fairPacer) handOn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		_, pw, ok := p.waiting.Pop(nil)
		if !ok {
			p.busy = false
			return
		}
		if !pw.cancelled {
			close(pw.turn)
			return
		}
	}
}

// dwellWindow is how long the dwell metric's named tenants stay named:
// each window names the busiest of the last.
const dwellWindow = time.Minute

// maxCountedTenants bounds the tenants the dwell metric counts in a
// window; the rest are counted as others.
const maxCountedTenants = 10000

// dwellNames decides the dwell metric's tenant label: the NamedTenants
// busiest tenants of the last window by name, the rest OtherTenants —
// label values bounded, and renamed at most once a window.
type dwellNames struct {
	n int

	mu     sync.Mutex
	counts map[string]int
	named  map[string]bool
	since  time.Time
}

func newDwellNames(n int) *dwellNames {
	return &dwellNames{n: n, counts: map[string]int{}, named: map[string]bool{}}
}

// label counts one delivery of tenant at now and returns its label.
func (dn *dwellNames) label(tenant string, now time.Time) string {
	dn.mu.Lock()
	defer dn.mu.Unlock()
	if dn.since.IsZero() {
		dn.since = now
	}
	if now.Sub(dn.since) >= dwellWindow {
		dn.rename()
		dn.since = now
	}
	if _, ok := dn.counts[tenant]; ok || len(dn.counts) < maxCountedTenants {
		dn.counts[tenant]++
	}
	if dn.named[tenant] {
		return tenant
	}
	if len(dn.named) < dn.n {
		// Names free before the first window ends go to the first tenants.
		dn.named[tenant] = true
		return tenant
	}
	return OtherTenants
}

// rename names the busiest tenants of the window that ended (dn.mu held);
// a named tenant keeps its name on a tie.
func (dn *dwellNames) rename() {
	ts := make([]string, 0, len(dn.counts))
	for t := range dn.counts {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if dn.counts[a] != dn.counts[b] {
			return dn.counts[a] > dn.counts[b]
		}
		if dn.named[a] != dn.named[b] {
			return dn.named[a]
		}
		return a < b
	})
	dn.named = map[string]bool{}
	for _, t := range ts[:min(dn.n, len(ts))] {
		dn.named[t] = true
	}
	dn.counts = map[string]int{}
}

// observeDwell observes d's dwell — from its receipt to now, its
// disposition — under its tenant's label.
func (w *Worker) observeDwell(d *delivery) {
	now := w.cfg.Now()
	tenant := d.tenant
	if tenant == "" {
		tenant = DefaultTenant
	}
	w.metrics.TenantDwell.WithLabelValues(w.dwellNames.label(tenant, now)).Observe(now.Sub(d.receivedAt).Seconds())
}

// fairOrder sets the tenant of every delivery of a Lambda batch and
// orders its units by round robin over their tenants, so that the slots
// the batch's units take in turn are shared fairly: a batch mostly of one
// tenant does not start the others' last.
func (w *Worker) fairOrder(groups [][]*delivery) [][]*delivery {
	drr := fair.New[[]*delivery](1)
	for _, g := range groups {
		tenant := w.tenantOf(g[0])
		for _, d := range g {
			d.tenant = tenant
		}
		drr.Push(tenant, g, len(g))
	}
	out := make([][]*delivery, 0, len(groups))
	for {
		_, g, ok := drr.Pop(nil)
		if !ok {
			return out
		}
		out = append(out, g)
	}
}
