package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ddbworker/ddbworker/inbox"
)

// releaser keeps writing the refunds (inbox.Release) that could not be
// written when an attempt ended for infrastructure reasons, while the
// message is hidden: a refund that waited for the message's next delivery
// would often be too late — another worker takes the work over once the
// lease ends, and that takeover counts the attempt. A message parked by the
// health gate carries its refund instead (written before it runs again).
type releaser struct {
	w       *Worker
	mu      sync.Mutex
	pending []retryRelease
	wake    chan struct{}
}

type retryRelease struct {
	pendingRelease
	next  time.Time
	tries int
}

// releaseTries bounds how often one refund is tried; after that the lease
// expires and the next takeover counts the attempt (as after a crash).
const releaseTries = 8

func newReleaser(w *Worker) *releaser { return &releaser{w: w, wake: make(chan struct{}, 1)} }

func (r *releaser) add(pr pendingRelease) {
	r.mu.Lock()
	r.pending = append(r.pending, retryRelease{pendingRelease: pr, next: r.w.cfg.Now().Add(time.Second)})
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run retries due refunds, one call each, while the database is healthy,
// until ctx ends.
func (r *releaser) run(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		r.flush(ctx, false)
	}
}

// flush tries the due refunds (all of them with all set) while the
// database is healthy. Under Lambda each invocation calls it: there is no
// background work between invocations.
func (r *releaser) flush(ctx context.Context, all bool) {
	if !r.w.health.Healthy() {
		return // the health gate's probes decide when to call again
	}
	now := r.w.cfg.Now()
	r.mu.Lock()
	var due []retryRelease
	keep := r.pending[:0]
	for _, p := range r.pending {
		if p.next.After(now) && !all {
			keep = append(keep, p)
		} else {
			due = append(due, p)
		}
	}
	r.pending = keep
	r.mu.Unlock()
	for _, p := range due {
		err := r.w.committer.Release(ctx, p.lease, p.failure)
		var lost *inbox.LeaseLostError
		switch {
		case err == nil, errors.As(err, &lost):
			continue // refunded, or the record moved on: nothing left to do
		case ctx.Err() != nil:
			return
		}
		if p.tries++; p.tries >= releaseTries {
			r.w.log.Warn("gave up releasing a lease; the next takeover counts the attempt", "idempotencyKey", p.lease.Key, "error", err.Error())
			continue
		}
		p.next = r.w.cfg.Now().Add(r.w.cfg.Backoff.delay(p.tries))
		r.mu.Lock()
		r.pending = append(r.pending, p)
		r.mu.Unlock()
	}
}
