package calltime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/calltime"
)

func TestClockAddsCalls(t *testing.T) {
	var c calltime.Clock
	ctx := calltime.With(context.Background(), &c)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			done := calltime.Start(ctx)
			time.Sleep(20 * time.Millisecond) // the call being timed
			done()
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, c.Total(), 80*time.Millisecond, "four calls of 20 ms each")
}

func TestStartWithoutClock(t *testing.T) {
	done := calltime.Start(context.Background())
	require.NotPanics(t, done)
}
