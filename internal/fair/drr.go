package fair

// DRR is a deficit round robin over per-tenant FIFO queues of T.
type DRR[T any] struct {
	quantum int
	queues  map[string]*queue[T]
	// ring holds the tenants with items waiting, in turn order: ring[0]
	// is the tenant whose turn it is.
	ring []string
	// started: ring[0]'s turn has begun (its quantum was added).
	started bool
	size    int
}

type queue[T any] struct {
	items   []entry[T]
	deficit int
}

type entry[T any] struct {
	item T
	cost int
}

// New returns a DRR whose turns add quantum (at least 1) to a tenant's
// deficit. A quantum at least the largest cost serves at least one item
// per turn.
func New[T any](quantum int) *DRR[T] {
	return &DRR[T]{quantum: max(1, quantum), queues: map[string]*queue[T]{}}
}

// Push queues item for tenant at cost (at least 1). A tenant that had
// nothing waiting joins the end of the round.
func (d *DRR[T]) Push(tenant string, item T, cost int) {
	q := d.queues[tenant]
	if q == nil {
		q = &queue[T]{}
		d.queues[tenant] = q
	}
	if len(q.items) == 0 {
		d.ring = append(d.ring, tenant)
	}
	q.items = append(q.items, entry[T]{item: item, cost: max(1, cost)})
	d.size++
}

// Len is how many items wait.
func (d *DRR[T]) Len() int { return d.size }

// Waiting is how many items wait for tenant.
func (d *DRR[T]) Waiting(tenant string) int {
	if q := d.queues[tenant]; q != nil {
		return len(q.items)
	}
	return 0
}

// Tenants is how many tenants have items waiting.
func (d *DRR[T]) Tenants() int { return len(d.ring) }

// Pop takes the next item by deficit round robin among the tenants that
// eligible admits (nil: all); ok is false when no eligible tenant has an
// item waiting. A tenant passed over as ineligible loses its turn but
// keeps its deficit.
func (d *DRR[T]) Pop(eligible func(tenant string) bool) (tenant string, item T, ok bool) {
	skipped := 0 // ineligible tenants in a row
	for len(d.ring) > 0 && skipped < len(d.ring) {
		t := d.ring[0]
		q := d.queues[t]
		if eligible != nil && !eligible(t) {
			d.next()
			skipped++
			continue
		}
		skipped = 0
		if !d.started {
			q.deficit += d.quantum
			d.started = true
		}
		head := q.items[0]
		if head.cost > q.deficit {
			d.next()
			continue
		}
		q.deficit -= head.cost
		var zero entry[T]
		q.items[0] = zero
		q.items = q.items[1:]
		d.size--
		if len(q.items) == 0 {
			// An idle tenant keeps no credit: DRR's rule, so that a
			// tenant cannot save turns while it has nothing to send.
			delete(d.queues, t)
			d.ring = d.ring[1:]
			d.started = false
		}
		return t, head.item, true
	}
	return "", item, false
}

// Drain takes every waiting item, tenant by tenant in turn order.
func (d *DRR[T]) Drain() []T {
	out := make([]T, 0, d.size)
	for _, t := range d.ring {
		for _, e := range d.queues[t].items {
			out = append(out, e.item)
		}
	}
	d.ring, d.queues, d.started, d.size = nil, map[string]*queue[T]{}, false, 0
	return out
}

// next ends ring[0]'s turn: it goes to the end of the round.
func (d *DRR[T]) next() {
	d.ring = append(d.ring[1:], d.ring[0])
	d.started = false
}
