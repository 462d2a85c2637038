package slots

import (
	"context"
	"sync"
	"time"
)

// FillWait is how long a poller that holds half a batch of slots waits for
// the rest before it receives with what it has: full batches keep SQS calls
// per message low; the bound keeps one slow handler from idling the pool.
const FillWait = 25 * time.Millisecond

// Pool is a counting semaphore whose limit can change while slots are held.
// Lowering the limit below what is in use takes effect as slots are
// released: nothing running is interrupted. It is safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	limit   int
	used    int
	changed chan struct{} // closed and replaced whenever used or limit changes
}

// New returns a pool of limit slots (at least 1).
func New(limit int) *Pool {
	return &Pool{limit: max(1, limit), changed: make(chan struct{})}
}

// Limit is the current limit.
func (p *Pool) Limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// InUse is how many slots are held.
func (p *Pool) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// SetLimit changes the limit (at least 1).
func (p *Pool) SetLimit(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n = max(1, n); n != p.limit {
		p.limit = n
		p.wake()
	}
}

// Force takes n slots whatever the limit (the pool is over its limit until
// they are released): for work that must run whole.
func (p *Pool) Force(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used += n
	p.wake()
}

// Release returns n slots.
func (p *Pool) Release(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	if p.used < 0 {
		panic("slots: released more slots than were held")
	}
	p.wake()
}

func (p *Pool) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// take takes up to want free slots when at least least are free; it returns
// how many it took (0: not enough free) and the channel that signals the
// next change.
func (p *Pool) take(least, want int) (int, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.limit - p.used
	// A want the current limit can never satisfy asks for what the limit
	// allows: a lowered limit must not strand a waiting poller.
	least = min(least, p.limit)
	if free < least || free <= 0 {
		return 0, p.changed
	}
	n := min(free, want)
	p.used += n
	return n, p.changed
}

// TryAcquire takes one slot if one is free, without waiting.
func (p *Pool) TryAcquire() bool {
	n, _ := p.take(1, 1)
	return n == 1
}

// AcquireBatch blocks until at least half of want slots (at least one, at
// most the limit) are free, then waits up to FillWait for all of want, and
// returns how many it took. It returns ctx's error when ctx ends first.
func (p *Pool) AcquireBatch(ctx context.Context, want int) (int, error) {
	want = max(1, want)
	least := max(1, want/2)
	var n int
	for {
		var changed <-chan struct{}
		if n, changed = p.take(least, want); n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
	if n >= want {
		return n, nil
	}
	timer := time.NewTimer(FillWait)
	defer timer.Stop()
	for n < want {
		more, changed := p.take(1, want-n)
		n += more
		if n >= want {
			break
		}
		select {
		case <-ctx.Done():
			return n, nil // what is held is the caller's to use or release
		case <-timer.C:
			return n, nil
		case <-changed:
		}
	}
	return n, nil
}

// Pollers is the default number of concurrent long polls for a pool of
// concurrency slots and receive batches of batch: one per four batches of
// slots. A receive returns in about a millisecond when messages wait, so
// few pollers keep a pool full; more of them only split the free slots
// into partial batches, and partial batches cost SQS calls.
func Pollers(concurrency, batch int) int {
	return max(1, (concurrency+4*batch-1)/(4*batch))
}
