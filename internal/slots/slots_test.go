package slots_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"github.com/ddbworker/ddbworker/internal/slots"
)

func TestAcquireBatch(t *testing.T) {
	ctx := context.Background()
	t.Run("whole batch when free", func(t *testing.T) {
		sem := semaphore.NewWeighted(16)
		n, err := slots.AcquireBatch(ctx, sem, 10)
		require.NoError(t, err)
		require.EqualValues(t, 10, n)
	})
	t.Run("what is free after the fill wait", func(t *testing.T) {
		sem := semaphore.NewWeighted(16)
		require.True(t, sem.TryAcquire(9)) // 7 free
		start := time.Now()
		n, err := slots.AcquireBatch(ctx, sem, 10)
		require.NoError(t, err)
		require.EqualValues(t, 7, n)
		require.GreaterOrEqual(t, time.Since(start), slots.FillWait)
	})
	t.Run("the rest when it frees within the wait", func(t *testing.T) {
		sem := semaphore.NewWeighted(10)
		require.True(t, sem.TryAcquire(3))
		got := make(chan int64)
		go func() {
			n, _ := slots.AcquireBatch(ctx, sem, 10)
			got <- n
		}()
		sem.Release(3)
		require.EqualValues(t, 10, <-got)
	})
	t.Run("blocks below half a batch until cancelled", func(t *testing.T) {
		sem := semaphore.NewWeighted(10)
		require.True(t, sem.TryAcquire(7)) // 3 free < 5
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := slots.AcquireBatch(cctx, sem, 10)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}
