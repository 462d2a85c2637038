package ddbproxy

import (
	"fmt"
	"math/rand/v2"
)

// SetThrottleFraction makes the proxy throttle a share f of the requests
// that arrive in Pass mode, chosen at random: each such request is answered
// as Throttle answers (400 ProvisionedThroughputExceededException for the
// data plane, ThrottlingException for the control plane, nothing
// forwarded) with probability f, and forwarded otherwise. That is what a
// client sees from a table that throttles part of its traffic: the SDK's
// retries of a throttled call are new requests, each drawn again.
//
// The draws come from a generator seeded with Config.Seed, one draw per
// request that arrives in Pass while f > 0, in the order the requests
// arrive; Reset restarts it. f = 0 (the
// default) throttles nothing; f = 1 throttles every request that arrives in
// Pass. The other modes answer as they always do, whatever f is. A request
// the draw throttled counts under Throttle in Stats.ByMode.
//
// SetThrottleFraction panics unless 0 ≤ f ≤ 1.
func (p *Proxy) SetThrottleFraction(f float64) {
	if !(f >= 0 && f <= 1) { // NaN fails both
		panic(fmt.Sprintf("ddbproxy: SetThrottleFraction(%v): the fraction must be within [0, 1]", f))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttle.share = f
}

// ThrottleFraction returns the share set by SetThrottleFraction.
func (p *Proxy) ThrottleFraction() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.throttle.share
}

// fraction is SetThrottleFraction's state. Its methods are called with the
// proxy's mutex held.
type fraction struct {
	share float64
	rng   *rand.Rand // nil until the first draw after Start or restart
}

// seedStream is the PCG stream the generator uses; any constant does.
const seedStream = 0x64646270726f7879 // "ddbproxy"

// draw reports whether the next request is throttled.
func (f *fraction) draw(seed uint64) bool {
	if f.share == 0 {
		return false
	}
	if f.rng == nil {
		f.rng = rand.New(rand.NewPCG(seed, seedStream))
	}
	return f.rng.Float64() < f.share
}

// restart makes the next draw start again from the seed.
func (f *fraction) restart() { f.rng = nil }
