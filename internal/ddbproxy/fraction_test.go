package ddbproxy_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/ddbworker/ddbworker/internal/ddbproxy"
)

// throttledPuts sends n PutItems one after another through c (ids
// prefix-0 … prefix-(n-1)) and returns which were throttled. Any other
// error fails the test.
func (f *fixture) throttledPuts(t *testing.T, prefix string, n int) []bool {
	t.Helper()
	c := f.client(1) // one attempt: one request per call
	out := make([]bool, n)
	for i := range n {
		err := f.put(context.Background(), c, fmt.Sprint(prefix, "-", i), i)
		if err != nil {
			require.True(t, errorAs[*types.ProvisionedThroughputExceededException](err), "put %d: %v", i, err)
			out[i] = true
		}
	}
	return out
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func TestThrottleFraction(t *testing.T) {
	const n = 200
	tests := []struct {
		name     string
		fraction float64
		min, max int // throttled requests of n
	}{
		{name: "zero throttles nothing", fraction: 0, min: 0, max: 0},
		{name: "one throttles everything", fraction: 1, min: n, max: n},
		// Binomial(200, 0.3): mean 60, sd 6.5; the seed is fixed, so the
		// bounds only guard against a draw that is not a fraction at all.
		{name: "0.3 throttles about 30%", fraction: 0.3, min: 40, max: 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, ddbproxy.Config{})
			f.proxy.SetThrottleFraction(tt.fraction)
			require.Equal(t, tt.fraction, f.proxy.ThrottleFraction())
			require.Equal(t, ddbproxy.Pass, f.proxy.Mode(), "the fraction is no mode")

			throttled := f.throttledPuts(t, "p", n)
			got := count(throttled)
			require.GreaterOrEqual(t, got, tt.min)
			require.LessOrEqual(t, got, tt.max)

			// Throttled requests never reached DynamoDB Local; the others did.
			f.proxy.SetThrottleFraction(0)
			for i, th := range throttled {
				if th {
					require.Nil(t, f.stored(t, fmt.Sprint("p-", i)), "throttled put %d reached DynamoDB", i)
				} else {
					require.Equal(t, item(fmt.Sprint("p-", i), i), f.stored(t, fmt.Sprint("p-", i)), "put %d", i)
				}
			}
			byMode := map[ddbproxy.Mode]int{}
			if n-got > 0 {
				byMode[ddbproxy.Pass] = n - got
			}
			if got > 0 {
				byMode[ddbproxy.Throttle] = got
			}
			require.Equal(t, ddbproxy.Stats{
				Total:     n,
				Requests:  map[string]int{"PutItem": n},
				ByMode:    byMode,
				Forwarded: n - got,
			}, f.proxy.Stats())
		})
	}
}

func TestThrottleFractionSeed(t *testing.T) {
	const n = 60
	draws := func(t *testing.T, seed uint64) (first, again []bool) {
		f := newFixture(t, ddbproxy.Config{Seed: seed})
		f.proxy.SetThrottleFraction(0.5)
		first = f.throttledPuts(t, "a", n)
		f.proxy.Reset()
		again = f.throttledPuts(t, "b", n)
		return first, again
	}
	first, again := draws(t, 7)
	require.Equal(t, first, again, "Reset restarts the draws from the seed")
	other, _ := draws(t, 7)
	require.Equal(t, first, other, "the same seed throttles the same requests")
	different, _ := draws(t, 8)
	require.NotEqual(t, first, different, "another seed, other requests")
	zero, _ := draws(t, 0)
	require.Positive(t, count(zero), "the zero seed draws too")
}

func TestThrottleFractionOnlyInPass(t *testing.T) {
	f := newFixture(t, ddbproxy.Config{})
	f.proxy.SetThrottleFraction(1)
	ctx := context.Background()
	c := f.client(1)

	f.proxy.SetMode(ddbproxy.ServerError)
	err := f.put(ctx, c, "s", 1)
	require.True(t, errorAs[*types.InternalServerError](err), "ServerError answers as it does: %v", err)

	f.proxy.SetMode(ddbproxy.Throttle)
	f.proxy.SetThrottleFraction(0)
	err = f.put(ctx, c, "t", 1)
	require.True(t, errorAs[*types.ProvisionedThroughputExceededException](err), "Throttle throttles whatever the fraction: %v", err)

	f.proxy.SetMode(ddbproxy.Pass)
	require.NoError(t, f.put(ctx, c, "p", 1))
	require.Equal(t, ddbproxy.Stats{
		Total:     3,
		Requests:  map[string]int{"PutItem": 3},
		ByMode:    map[ddbproxy.Mode]int{ddbproxy.ServerError: 1, ddbproxy.Throttle: 1, ddbproxy.Pass: 1},
		Forwarded: 1,
	}, f.proxy.Stats())
}

func TestThrottleFractionInvalid(t *testing.T) {
	p, err := ddbproxy.Start(ddbproxy.Config{Target: "http://127.0.0.1:1"}) // never dialled
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	for _, f := range []float64{-0.1, 1.01, math.NaN(), math.Inf(1)} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			require.Panics(t, func() { p.SetThrottleFraction(f) })
			require.Zero(t, p.ThrottleFraction())
		})
	}
}

// Concurrent requests draw under the proxy's lock: every request is either
// throttled or forwarded, and the SDK's retries of a throttled call are
// requests drawn again.
func TestThrottleFractionConcurrent(t *testing.T) {
	const workers, puts, attempts = 16, 10, 3
	f := newFixture(t, ddbproxy.Config{})
	f.proxy.SetThrottleFraction(0.5)
	c := f.client(attempts)
	var g errgroup.Group
	var failed [workers]int
	for w := range workers {
		g.Go(func() error {
			for i := range puts {
				err := f.put(context.Background(), c, fmt.Sprint("c", w, "-", i), i)
				if err != nil && !errorAs[*types.ProvisionedThroughputExceededException](err) {
					return err
				}
				if err != nil {
					failed[w]++
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	failedCalls := 0
	for _, n := range failed {
		failedCalls += n
	}

	s := f.proxy.Stats()
	calls := workers * puts
	// Each call is one forwarded request plus its throttled tries, or
	// attempts throttled requests when it failed.
	require.Equal(t, calls-failedCalls, s.Forwarded)
	require.Equal(t, s.Forwarded, s.ByMode[ddbproxy.Pass])
	require.Equal(t, s.Total, s.ByMode[ddbproxy.Pass]+s.ByMode[ddbproxy.Throttle])
	require.GreaterOrEqual(t, s.ByMode[ddbproxy.Throttle], attempts*failedCalls)
	require.LessOrEqual(t, s.Total, attempts*calls, "the SDK makes at most %d requests per call", attempts)
	require.Greater(t, s.Total, calls, "some calls were retried")
}
