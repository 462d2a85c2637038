// Package slots owns the receive policy of a bounded pool: how many pool
// slots a poller takes before it asks SQS for a batch. The worker and the
// benchmark's bare loops share it, so both make the same receive calls.
package slots

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"
)

// FillWait is how long a poller that holds half a batch of slots waits for
// the rest before it receives with what it has: full batches keep SQS calls
// per message low; the bound keeps one slow handler from idling the pool.
const FillWait = 25 * time.Millisecond

// AcquireBatch blocks until at least half of want slots are free, then
// waits up to FillWait for all of want, and returns how many it took.
func AcquireBatch(ctx context.Context, sem *semaphore.Weighted, want int64) (int64, error) {
	least := max(1, want/2)
	if err := sem.Acquire(ctx, least); err != nil {
		return 0, err
	}
	rest := want - least
	if rest == 0 || sem.TryAcquire(rest) {
		return want, nil
	}
	fill, cancel := context.WithTimeout(ctx, FillWait)
	err := sem.Acquire(fill, rest)
	cancel()
	if err == nil {
		return want, nil
	}
	n := least
	for n < want && sem.TryAcquire(1) {
		n++
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
