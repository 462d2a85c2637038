package worker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/health"
)

// The hide of a standard queue's record parked under Lambda follows the
// outage's age as the gate knows it: at least ParkVisibility, at most
// ParkMaxVisibility, shortened at random by up to a fifth but never below
// ParkVisibility nor lengthened; a second while a probe's success waits
// for its confirmation.
func TestOutagePark(t *testing.T) {
	def, err := HealthConfig{}.WithDefaults()
	require.NoError(t, err)
	short, err := HealthConfig{ParkVisibility: 6 * time.Second, ParkMaxVisibility: time.Hour}.WithDefaults()
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		cfg        HealthConfig
		age        time.Duration
		confirming bool
		u          float64
		want       time.Duration
	}{
		{"just tripped: ParkVisibility", def, 0, false, 0, time.Minute},
		{"younger than ParkVisibility: ParkVisibility", def, 30 * time.Second, false, 0, time.Minute},
		{"jitter never goes below ParkVisibility", def, 70 * time.Second, false, 0.99, time.Minute},
		{"the age", def, 6 * time.Minute, false, 0, 6 * time.Minute},
		{"the age, a fifth less at most", def, 10 * time.Minute, false, 0.5, 9 * time.Minute},
		{"the age, jittered to the most", def, 10 * time.Minute, false, 1, 8 * time.Minute},
		{"capped at an hour (maxOutagePark), below ParkMaxVisibility", def, 20 * time.Hour, false, 0, time.Hour},
		{"a probe succeeded: a second, until the next invocation confirms", def, 3 * time.Hour, true, 0, time.Second},
		{"short: ParkVisibility", short, 2 * time.Second, false, 0, 6 * time.Second},
		{"short: the age", short, 30 * time.Second, false, 0, 30 * time.Second},
		{"short: capped", short, 2 * time.Hour, false, 0, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.cfg.outagePark(tc.age, tc.confirming, tc.u))
		})
	}
}

// The outage's age as the gate knows it runs from the trip to the last
// failed probe — not to now: an invocation long after the recovery whose
// probe is not due yet must not hide a record longer than the outage
// lasted; a cold start's (a gate that never tripped, parking for a caller
// that knew the table could not be used) runs from its first park.
func TestParkAge(t *testing.T) {
	cfg, err := HealthConfig{}.WithDefaults()
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	newGate := func() *dbHealth {
		p, err := health.Probes{Initial: cfg.ProbeInterval, Max: cfg.ProbeMaxInterval}.WithDefaults()
		require.NoError(t, err)
		return &dbHealth{probes: p, cfg: cfg, healthy: true}
	}
	tripped := func() *dbHealth {
		h := newGate()
		h.healthy, h.since, h.lastFailed, h.nextProbe = false, t0, t0, at(2*time.Second)
		return h
	}
	type age struct {
		age        time.Duration
		confirming bool
	}
	for _, tc := range []struct {
		name string
		gate func() *dbHealth
		now  time.Duration
		want age
	}{
		{"healthy", newGate, time.Hour, age{}},
		{"just tripped", tripped, 10 * time.Minute, age{}},
		{"to the last failed probe", func() *dbHealth {
			h := tripped()
			require.True(t, h.probeDue(at(5*time.Minute)))
			require.False(t, h.probed(at(5*time.Minute), errors.New("throttled"), 0.5))
			return h
		}, 20 * time.Minute, age{age: 5 * time.Minute}},
		{"a probe succeeded: confirming", func() *dbHealth {
			h := tripped()
			require.True(t, h.probeDue(at(5*time.Minute)))
			require.False(t, h.probed(at(5*time.Minute), errors.New("throttled"), 0.5))
			require.True(t, h.probeDue(at(6*time.Minute)))
			require.False(t, h.probed(at(6*time.Minute), nil, 0.5), "RecoverProbes 2")
			require.True(t, h.probeDue(at(6*time.Minute+time.Second)), "the confirmation is due at once")
			return h
		}, 7 * time.Minute, age{age: 5 * time.Minute, confirming: true}},
		{"a cold start's: from its first park to now", func() *dbHealth {
			h := newGate()
			h.parkingCold(at(time.Minute))
			h.parkingCold(at(3 * time.Minute))
			return h
		}, 4 * time.Minute, age{age: 3 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c := tc.gate().parkAge(at(tc.now))
			require.Equal(t, tc.want, age{a, c})
		})
	}
}

// simRecord is a message of the simulated queue.
type simRecord struct {
	visibleAt time.Duration
	receives  int
	done      bool
}

// simResult is what a simulated outage cost and how fast it drained.
type simResult struct {
	// drain is the time from the recovery to the last record applied.
	drain time.Duration
	// During the outage: invocations (each a receive of up to 10 records),
	// receives of a record (the most of any), ChangeMessageVisibility
	// calls, probes (DynamoDB requests) and re-sends.
	invocations, maxReceives, hides, probes, resends int
}

// parkSchedule is a hide schedule under test: the hide of a record
// received for the receives-th time when the gate knows an outage of age
// (confirming: a probe succeeded), and the delay of a copy re-sent on the
// last receive.
type parkSchedule struct {
	hide  func(c HealthConfig, age time.Duration, confirming bool, receives int, u float64) time.Duration
	delay func(c HealthConfig, age time.Duration, confirming bool, u float64) time.Duration
}

var (
	// ageSchedule is the adapter's: lambdaParkHide and parkByResend on a
	// standard queue.
	ageSchedule = parkSchedule{
		hide: func(c HealthConfig, age time.Duration, confirming bool, _ int, u float64) time.Duration {
			return capHide(c.outagePark(age, confirming, u), maxBatchingWindow)
		},
		delay: func(c HealthConfig, age time.Duration, confirming bool, u float64) time.Duration {
			return min(c.outagePark(age, confirming, u), maxSendDelay)
		},
	}
	// fourfoldSchedule is the one before: 1m, 4m, 16m… by receive, and a
	// copy delayed 15 minutes.
	fourfoldSchedule = parkSchedule{
		hide: func(c HealthConfig, _ time.Duration, _ bool, receives int, _ float64) time.Duration {
			return c.fifoHide(receives, maxBatchingWindow)
		},
		delay: func(c HealthConfig, _ time.Duration, _ bool, _ float64) time.Duration {
			return min(c.ParkMaxVisibility, maxSendDelay)
		},
	}
)

// simulateOutage plays an event source mapping on a standard queue
// (maxReceiveCount maxReceives) in front of one execution environment
// through an outage of length outage that starts at 0: the gate trips on
// the first invocation; each invocation takes up to 10 visible records,
// probes when a probe is due (dbHealth.probeDue, probed: failing before
// the recovery, succeeding after) and parks its records on sched, or
// applies them once the gate has recovered. Records arrive at arrivals;
// invocations take no time, and the mapping receives a record the moment
// it is visible. u draws the jitters.
func simulateOutage(t *testing.T, cfg HealthConfig, sched parkSchedule, outage time.Duration, arrivals []time.Duration, maxReceives int, u func() float64) simResult {
	t.Helper()
	p, err := health.Probes{Initial: cfg.ProbeInterval, Max: cfg.ProbeMaxInterval}.WithDefaults()
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	h := &dbHealth{probes: p, cfg: cfg, healthy: true}
	tripped := false
	var recs []*simRecord
	for _, a := range arrivals {
		recs = append(recs, &simRecord{visibleAt: a})
	}
	var res simResult
	receives := map[*simRecord]int{} // of the record and the copies it was re-sent as
	origin := map[*simRecord]*simRecord{}
	for _, r := range recs {
		origin[r] = r
	}
	var lastDone time.Duration
	for {
		now := time.Duration(-1)
		for _, r := range recs {
			if !r.done && (now < 0 || r.visibleAt < now) {
				now = r.visibleAt
			}
		}
		if now < 0 {
			break
		}
		var batch []*simRecord
		for _, r := range recs {
			if !r.done && r.visibleAt <= now && len(batch) < 10 {
				batch = append(batch, r)
			}
		}
		during := now < outage
		if during {
			res.invocations++
		}
		if !tripped && during {
			// The batch's calls trip the gate (dbHealth.record).
			tripped = true
			h.healthy, h.since, h.lastFailed = false, t0.Add(now), t0.Add(now)
			h.nextProbe = t0.Add(now + p.Wait(1, u()))
		} else if !h.healthy && h.probeDue(t0.Add(now)) {
			if during {
				res.probes++
			}
			var err error
			if during {
				err = errors.New("throttled")
			}
			if h.probed(t0.Add(now), err, u()) {
				h.healthy = true // dbHealth.recover
			}
		}
		if h.healthy {
			for _, r := range batch {
				r.done = true
				lastDone = now
			}
			continue
		}
		age, confirming := h.parkAge(t0.Add(now))
		for _, r := range batch {
			r.receives++
			receives[origin[r]]++
			if during {
				res.maxReceives = max(res.maxReceives, receives[origin[r]])
			}
			if r.receives >= maxReceives {
				// parkByResend: a copy, its receive count afresh.
				r.done = true
				c := &simRecord{visibleAt: now + sched.delay(cfg, age, confirming, u())}
				origin[c] = origin[r]
				recs = append(recs, c)
				if during {
					res.resends++
				}
				continue
			}
			r.visibleAt = now + sched.hide(cfg, age, confirming, r.receives, u())
			if during {
				res.hides++
			}
		}
	}
	require.NotZero(t, lastDone)
	res.drain = lastDone - outage
	return res
}

// drainBound is the bound outagePark states on the time from the
// recovery to the last record applied: max(ParkVisibility, outage) + the
// probes' longest wait (ProbeMaxInterval, jitter included) + a
// confirmPark per confirming probe.
func drainBound(cfg HealthConfig, outage time.Duration) time.Duration {
	probe := time.Duration(float64(cfg.ProbeMaxInterval) * (1 + health.DefaultProbeJitter))
	return max(cfg.ParkVisibility, outage) + probe + time.Duration(cfg.RecoverProbes-1)*confirmPark
}

// The bound on Lambda, over the schedule: whatever the outage's length
// (1 minute to 12 hours) and whenever the records arrive (all at its
// start, spread over it, or just before the recovery), the backlog
// drains within max(ParkVisibility, outage) + ProbeMaxInterval × 1.2 +
// 1s of the recovery, with and without jitter (which only shortens
// hides). The schedule before (fourfold by receive) left records hidden
// up to 64 minutes after a 6-minute outage.
func TestOutageDrainBound(t *testing.T) {
	for _, name := range []string{"defaults", "compressed for the RIE test"} {
		cfg, err := HealthConfig{}.WithDefaults()
		require.NoError(t, err)
		if name != "defaults" {
			cfg, err = HealthConfig{ParkVisibility: 6 * time.Second, ProbeMaxInterval: 2 * time.Second}.WithDefaults()
			require.NoError(t, err)
		}
		for _, outage := range []time.Duration{time.Minute, 2 * time.Minute, 6 * time.Minute, 17 * time.Minute, 30 * time.Minute, time.Hour,
			3*time.Hour + 7*time.Minute, 6 * time.Hour, 12 * time.Hour} {
			arrivals := map[string][]time.Duration{
				"all at the start": slices.Repeat([]time.Duration{0}, 48),
				"spread":           spread(48, outage),
				"just before the recovery": append(spread(40, outage),
					outage-time.Second, outage-time.Millisecond, outage/2, outage/2+time.Second, outage-cfg.ParkVisibility, outage-2*cfg.ParkVisibility, 3*outage/4, outage-10*time.Second),
			}
			for _, pattern := range []string{"all at the start", "spread", "just before the recovery"} {
				for _, jitter := range []bool{false, true} {
					rng := rand.New(rand.NewPCG(uint64(outage), 7))
					u := func() float64 { return 0 }
					if jitter {
						u = rng.Float64
					}
					t.Run(fmt.Sprintf("%s/%s/%s/jitter=%v", name, outage, pattern, jitter), func(t *testing.T) {
						res := simulateOutage(t, cfg, ageSchedule, outage, arrivals[pattern], 5, u)
						require.LessOrEqual(t, res.drain, drainBound(cfg, outage), "%+v", res)
					})
				}
			}
		}
	}
}

// spread is n arrival times spread evenly over [0, d).
func spread(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d * time.Duration(i) / time.Duration(n)
	}
	return out
}

// The figures of the trade-off, logged (go test -v -run
// TestOutageScheduleFigures ./worker): for the measured scenario — 48
// messages (40 orders and 8 resends) arriving spread over the outage,
// maxReceiveCount 5, the defaults — what the outage costs and how long
// the drain takes after it: with the age schedule, with it capped at 1
// hour (ParkMaxVisibility 1h), and with the fourfold one before. It
// asserts the age schedule's drain bound, and that it drains faster than
// the fourfold one after an outage of up to an hour (longer ones: the
// fourfold schedule's re-sends, every 85 minutes, kept its hides below
// 64 minutes, at four times the receives; ParkMaxVisibility 1h gets that
// bound with fewer).
func TestOutageScheduleFigures(t *testing.T) {
	cfg, err := HealthConfig{}.WithDefaults()
	require.NoError(t, err)
	hour, err := HealthConfig{ParkMaxVisibility: time.Hour}.WithDefaults()
	require.NoError(t, err)
	for _, outage := range []time.Duration{6 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 12 * time.Hour} {
		rng := rand.New(rand.NewPCG(1, 2))
		age := simulateOutage(t, cfg, ageSchedule, outage, spread(48, outage), 5, rng.Float64)
		capped := simulateOutage(t, hour, ageSchedule, outage, spread(48, outage), 5, rng.Float64)
		four := simulateOutage(t, cfg, fourfoldSchedule, outage, spread(48, outage), 5, rng.Float64)
		for _, r := range []struct {
			name string
			res  simResult
		}{{"age", age}, {"age ≤1h", capped}, {"fourfold", four}} {
			t.Logf("outage %-8s %-8s drain %-10s invocations %-4d hides %-4d probes %-4d re-sends %-3d most receives of a message %d",
				outage, r.name, r.res.drain.Round(time.Second), r.res.invocations, r.res.hides, r.res.probes, r.res.resends, r.res.maxReceives)
		}
		require.LessOrEqual(t, age.drain, drainBound(cfg, outage))
		require.LessOrEqual(t, capped.drain, drainBound(hour, min(outage, time.Hour)))
		if outage <= time.Hour {
			require.Less(t, age.drain, four.drain, "outage %s", outage)
		}
	}
}
