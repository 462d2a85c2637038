package slots_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/slots"
)

func TestAcquireBatch(t *testing.T) {
	ctx := context.Background()
	t.Run("whole batch when free", func(t *testing.T) {
		p := slots.New(16)
		n, err := p.AcquireBatch(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 10, n)
		require.Equal(t, 10, p.InUse())
	})
	t.Run("what is free after the fill wait", func(t *testing.T) {
		p := slots.New(16)
		_, err := p.AcquireBatch(ctx, 9) // 7 free
		require.NoError(t, err)
		start := time.Now()
		n, err := p.AcquireBatch(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 7, n)
		require.GreaterOrEqual(t, time.Since(start), slots.FillWait)
	})
	t.Run("the rest when it frees within the wait", func(t *testing.T) {
		p := slots.New(10)
		_, err := p.AcquireBatch(ctx, 3)
		require.NoError(t, err)
		got := make(chan int)
		go func() {
			n, _ := p.AcquireBatch(ctx, 10)
			got <- n
		}()
		p.Release(3)
		n := <-got
		require.GreaterOrEqual(t, n, 7)
		require.LessOrEqual(t, n, 10)
	})
	t.Run("blocks below half a batch until cancelled", func(t *testing.T) {
		p := slots.New(10)
		_, err := p.AcquireBatch(ctx, 7) // 3 free < 5
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = p.AcquireBatch(cctx, 10)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 7, p.InUse(), "a failed acquire holds nothing")
	})
}

func TestLimitMoves(t *testing.T) {
	ctx := context.Background()
	t.Run("a lower limit caps what a poller takes", func(t *testing.T) {
		p := slots.New(16)
		p.SetLimit(3)
		n, err := p.AcquireBatch(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	})
	t.Run("lowering below what is held waits for releases", func(t *testing.T) {
		p := slots.New(8)
		n, err := p.AcquireBatch(ctx, 8)
		require.NoError(t, err)
		require.Equal(t, 8, n)
		p.SetLimit(2)
		p.Release(5) // 3 held, limit 2: still full
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = p.AcquireBatch(cctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		p.Release(2) // 1 held, 1 free: enough for half of 2
		n, err = p.AcquireBatch(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
	t.Run("a raised limit wakes a waiting poller", func(t *testing.T) {
		p := slots.New(1)
		_, err := p.AcquireBatch(ctx, 1)
		require.NoError(t, err)
		got := make(chan int)
		go func() {
			n, _ := p.AcquireBatch(ctx, 4)
			got <- n
		}()
		p.SetLimit(5)
		require.Equal(t, 4, <-got)
	})
	t.Run("a want above the limit is not stranded", func(t *testing.T) {
		p := slots.New(10)
		p.SetLimit(1)
		n, err := p.AcquireBatch(ctx, 10) // least would be 5 > limit
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

func TestPoolConcurrentUse(t *testing.T) {
	p := slots.New(4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := 0
	for range 16 {
		wg.Go(func() {
			for range 50 {
				n, err := p.AcquireBatch(context.Background(), 2)
				require.NoError(t, err)
				mu.Lock()
				peak = max(peak, p.InUse())
				mu.Unlock()
				p.Release(n)
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, peak, 4)
	require.Equal(t, 0, p.InUse())
}

func TestPollers(t *testing.T) {
	for _, tc := range []struct{ conc, batch, want int }{{1, 1, 1}, {16, 10, 1}, {64, 10, 2}, {100, 10, 3}} {
		require.Equal(t, tc.want, slots.Pollers(tc.conc, tc.batch), "%+v", tc)
	}
}
