package worker

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ddbworker/ddbworker/failure"
)

// A hot key parked alone. DynamoDB names why it throttles
// (failure.KeyRangeThrottle): a table, index, account or on-demand maximum
// is the database's trouble, and drives the health gate; a key range is
// one hot partition — one aggregate written too fast, or one item fought
// over — and slowing the whole worker for it would punish every other
// key. So a call throttled on a key range (and a run of transaction
// conflicts on one key: a conflict storm) parks the work of its key — the
// message's aggregate, or its FIFO group — with a backoff of its own:
//
//   - the delivery gives its lease back and its message returns to the
//     queue hidden for the key's backoff, charging no business attempt
//     (HOT_KEY_PARKED or the throttle's own code, infrastructure);
//   - while the key is parked, one delivery of it at a time, at most once
//     per backoff (at least HotKeyConfig.Park apart: ≤ 5 a second), runs
//     as its probe; the others arriving meanwhile return to the queue
//     without a DynamoDB call;
//   - a probe that commits unparks the key; one throttled again doubles
//     the backoff, up to ParkMax;
//   - a message whose key stays throttled longer than MaxThrottled (from
//     the later of the spell's start and the message's first send) ends
//     HOT_KEY_THROTTLED by the terminal policy (a rejection record and,
//     under PolicyDLQ, a DLQ copy): never a business attempt, and a
//     redrive runs it again once the key has cooled;
//   - none of it feeds the health gate or the adaptive concurrency limit.
//
// A parked message returned to the queue climbs its receive count; on its
// last receive before the redrive policy's maxReceiveCount it is re-sent
// as a fresh copy instead of hidden (apply's keepByResend), as for any
// infrastructure retry, so SQS never dead-letters it. A FIFO message
// cannot be re-sent without leaving its group's order: on its last receive
// while its group is parked it ends HOT_KEY_THROTTLED instead, with its
// code, rather than reaching the DLQ by the receive count without one.
//
// The parked keys live in memory, per worker (per execution environment
// under Lambda), at most MaxKeys of them: the oldest is forgotten first,
// and a forgotten key that is still hot is parked again by its next
// throttle.

// The defaults of HotKeyConfig.
const (
	DefaultHotKeyPark          = time.Second
	DefaultHotKeyParkMax       = 30 * time.Second
	DefaultHotKeyMaxThrottled  = 15 * time.Minute
	DefaultHotKeyMaxKeys       = 4096
	DefaultHotKeyConflictStorm = 3
	// minHotKeyPark keeps a parked key's probes at most 5 a second.
	minHotKeyPark = 200 * time.Millisecond
)

// HotKeyConfig configures the parking of hot keys (see above). Zero fields
// take the defaults.
type HotKeyConfig struct {
	// Park is a parked key's first backoff, and the shortest wait between
	// its probes. Default: DefaultHotKeyPark; at least 200ms.
	Park time.Duration
	// ParkMax caps the backoff, which doubles with each throttled probe.
	// Default: DefaultHotKeyParkMax; within Park..15m.
	ParkMax time.Duration
	// MaxThrottled is how long a message may wait on a throttled key
	// before it ends HOT_KEY_THROTTLED. Default:
	// DefaultHotKeyMaxThrottled; at least ParkMax.
	MaxThrottled time.Duration
	// MaxKeys bounds the keys tracked (parked, or counting conflicts).
	// Default: DefaultHotKeyMaxKeys; within 1..1,000,000.
	MaxKeys int
	// ConflictStorm is how many transaction conflicts in a row on one key
	// park it. Default: DefaultHotKeyConflictStorm; at least 2.
	ConflictStorm int
}

// WithDefaults returns c with every zero field set to its default, and
// every problem with the result, joined.
func (c HotKeyConfig) WithDefaults() (HotKeyConfig, error) {
	c.Park = cmp.Or(c.Park, DefaultHotKeyPark)
	c.ParkMax = cmp.Or(c.ParkMax, max(DefaultHotKeyParkMax, c.Park))
	c.MaxThrottled = cmp.Or(c.MaxThrottled, max(DefaultHotKeyMaxThrottled, c.ParkMax))
	c.MaxKeys = cmp.Or(c.MaxKeys, DefaultHotKeyMaxKeys)
	c.ConflictStorm = cmp.Or(c.ConflictStorm, DefaultHotKeyConflictStorm)
	var errs []error
	if c.Park < minHotKeyPark {
		errs = append(errs, fmt.Errorf("worker: Config.HotKey.Park %s must be at least %s (at most 5 probes a second)", c.Park, minHotKeyPark))
	}
	if c.ParkMax < c.Park || c.ParkMax > maxSendDelay {
		errs = append(errs, fmt.Errorf("worker: Config.HotKey.ParkMax %s must be within Park (%s)..15m", c.ParkMax, c.Park))
	}
	if c.MaxThrottled < c.ParkMax {
		errs = append(errs, fmt.Errorf("worker: Config.HotKey.MaxThrottled %s must be at least ParkMax (%s)", c.MaxThrottled, c.ParkMax))
	}
	if c.MaxKeys < 1 || c.MaxKeys > 1_000_000 {
		errs = append(errs, fmt.Errorf("worker: Config.HotKey.MaxKeys %d must be within 1..1000000", c.MaxKeys))
	}
	if c.ConflictStorm < 2 {
		errs = append(errs, fmt.Errorf("worker: Config.HotKey.ConflictStorm %d must be at least 2", c.ConflictStorm))
	}
	return c, errors.Join(errs...)
}

// hotKeys are the worker's parked keys and conflict counts.
type hotKeys struct {
	cfg    HotKeyConfig
	mu     sync.Mutex
	keys   map[string]*hotKey
	parked int
	// changed is told the number of parked keys after each change
	// (the gauge).
	changed func(parked int)
}

// hotKey is one key's state.
type hotKey struct {
	parked bool
	since  time.Time // the spell's first throttle
	next   time.Time // the next probe may start
	step   int       // backoff step (throttled probes)
	// probing: a probe is running since probeAt (one at a time; a probe
	// that never settles is given up after stale).
	probing   bool
	probeAt   time.Time
	conflicts int       // conflicts in a row
	seen      time.Time // last touched (which key to forget first)
}

func newHotKeys(cfg HotKeyConfig, changed func(int)) *hotKeys {
	return &hotKeys{cfg: cfg, keys: map[string]*hotKey{}, changed: changed}
}

// hotTicket is one delivery's pass through its key: settled at most once
// (probe: it runs as the parked key's probe).
type hotTicket struct {
	h     *hotKeys
	key   string
	probe bool
	done  bool
}

// hotAdmission is what admit decided for a delivery of key at now.
type hotAdmission struct {
	ticket *hotTicket // nil: held back
	// wait is how long a held-back delivery stays away.
	wait time.Duration
	// since is when the key's throttled spell began (parked keys: held
	// back, or a probe).
	since time.Time
}

// admit lets a delivery of key go on — as the parked key's probe when one
// is due — or holds it back for wait. stale is how long a probe may run
// before another may start (the work's own deadline).
func (h *hotKeys) admit(key string, now time.Time, stale time.Duration) hotAdmission {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.keys[key]
	if k == nil || !k.parked {
		return hotAdmission{ticket: &hotTicket{h: h, key: key}}
	}
	k.seen = now
	if (!k.probing || now.Sub(k.probeAt) > stale) && !now.Before(k.next) {
		k.probing, k.probeAt = true, now
		return hotAdmission{ticket: &hotTicket{h: h, key: key, probe: true}, since: k.since}
	}
	wait := k.next.Sub(now)
	if k.probing {
		wait = max(wait, h.cfg.Park) // back once the probe has likely settled
	}
	return hotAdmission{wait: max(wait, h.cfg.Park), since: k.since}
}

// throttled parks t's key, or keeps it parked: a probe's throttle (or the
// one that parks the key) doubles the backoff; a delivery that was
// already running when the key was parked only learns the wait. It
// reports the wait and whether the key was parked just now.
func (t *hotTicket) throttled(now time.Time) (wait time.Duration, parkedNow bool) {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { t.done = true }()
	k := h.entry(t.key, now)
	k.conflicts = 0
	if k.parked && !t.probe {
		return max(k.next.Sub(now), h.cfg.Park), false
	}
	if !k.parked {
		k.parked, k.since, k.step = true, now, 0
		h.parked++
		parkedNow = true
		h.changed(h.parked)
	}
	k.step++
	wait = min(h.cfg.ParkMax, h.cfg.Park<<min(k.step-1, 20))
	k.next = now.Add(wait)
	k.probing = false
	return wait, parkedNow
}

// conflicted counts a transaction conflict on t's key; the ConflictStorm-th
// in a row parks it (throttled). ok: the key is parked.
func (t *hotTicket) conflicted(now time.Time) (wait time.Duration, parkedNow, ok bool) {
	h := t.h
	h.mu.Lock()
	k := h.entry(t.key, now)
	k.conflicts++
	storm := k.parked || k.conflicts >= h.cfg.ConflictStorm
	h.mu.Unlock()
	if !storm {
		t.release()
		return 0, false, false
	}
	wait, parkedNow = t.throttled(now)
	return wait, parkedNow, true
}

// succeeded: t's key took its write; it is parked no longer. It reports
// how long the key had been parked (0: it was not).
func (t *hotTicket) succeeded(now time.Time) time.Duration {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	t.done = true
	k := h.keys[t.key]
	if k == nil {
		return 0
	}
	delete(h.keys, t.key)
	if !k.parked {
		return 0
	}
	h.parked--
	h.changed(h.parked)
	return now.Sub(k.since)
}

// release ends a pass that neither throttled nor committed: a probe lets
// the next one start. Safe on nil and more than once.
func (t *hotTicket) release() {
	if t == nil || t.done {
		return
	}
	t.done = true
	if !t.probe {
		return
	}
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.keys[t.key]; k != nil {
		k.probing = false
	}
}

// entry is key's state, created — forgetting the least recently seen key
// when MaxKeys are tracked, an unparked one first. Under h.mu.
func (h *hotKeys) entry(key string, now time.Time) *hotKey {
	if k := h.keys[key]; k != nil {
		k.seen = now
		return k
	}
	if len(h.keys) >= h.cfg.MaxKeys {
		var victim string
		var vk *hotKey
		for name, k := range h.keys {
			if vk == nil || (vk.parked && !k.parked) || (vk.parked == k.parked && k.seen.Before(vk.seen)) {
				victim, vk = name, k
			}
		}
		delete(h.keys, victim)
		if vk.parked {
			h.parked--
			h.changed(h.parked)
		}
	}
	k := &hotKey{seen: now}
	h.keys[key] = k
	return k
}

// hotKeyOf is the key a delivery's work parks under: its FIFO group (the
// group runs in order, so it waits as one), else its aggregate, else its
// own idempotency key.
func (w *Worker) hotKeyOf(d *delivery, wk *work) string {
	e := wk.env
	switch {
	case w.fifo:
		return "group/" + d.group
	case e.AggregateType != "" || e.AggregateID != "":
		return "aggregate/" + e.AggregateType + "/" + e.AggregateID
	}
	return "work/" + e.MessageType + "/" + e.IdempotencyKey
}

// Results of ddbworker_hot_key_deliveries_total.
const (
	hotHeld   = "held"   // not run: its key is parked; back after the key's backoff
	hotProbe  = "probe"  // ran as its parked key's probe
	hotParked = "parked" // its call was throttled on a key range (or met a conflict storm): its key parked or kept parked
	hotEnded  = "ended"  // ended HOT_KEY_THROTTLED
)

// hotAdmit is the hot-key stage of a delivery admitted as wk, before its
// claim: a ticket to go on, or the verdict of a delivery held back — a
// return to the queue after the key's backoff without a DynamoDB call, or
// the end (HOT_KEY_THROTTLED) of one whose key stayed throttled too long.
func (w *Worker) hotAdmit(d *delivery, wk *work) (*hotTicket, verdict) {
	now := w.cfg.Now()
	key := w.hotKeyOf(d, wk)
	a := w.hot.admit(key, now, w.cfg.MessageTimeout)
	if a.ticket != nil && !a.ticket.probe {
		return a.ticket, nil // not parked
	}
	// Its key is parked: since the later of the spell's start and its own
	// first send, this message has waited on it (its own calls throttled,
	// or held back without one).
	waited := now.Sub(a.since)
	if !d.origin.IsZero() && d.origin.After(a.since) {
		waited = now.Sub(d.origin)
	}
	lastFIFO := w.fifo && w.queue.maxReceives > 0 && d.receives >= w.queue.maxReceives && a.ticket == nil
	if waited > w.cfg.HotKey.MaxThrottled || lastFIFO {
		a.ticket.release() // a probe not made
		w.metrics.HotKeyDeliveries.WithLabelValues(hotEnded).Inc()
		why := fmt.Sprintf("its key (%s) has been throttled on a key range for %s, longer than Config.HotKey.MaxThrottled (%s)",
			printableKey(key), waited.Round(time.Second), w.cfg.HotKey.MaxThrottled)
		if lastFIFO {
			why = fmt.Sprintf("its FIFO group is parked by a key-range throttle on its last receive (%d) before the redrive policy's maxReceiveCount", d.receives)
		}
		return nil, reject(wk.env, failure.CodeHotKeyThrottled, why+"; no attempt was charged: redrive it once the key has cooled")
	}
	if a.ticket != nil {
		w.metrics.HotKeyDeliveries.WithLabelValues(hotProbe).Inc()
		return a.ticket, nil
	}
	w.metrics.HotKeyDeliveries.WithLabelValues(hotHeld).Inc()
	return nil, troubled{failure: failure.NewRetryable(failure.CodeHotKeyParked,
		fmt.Sprintf("its key is parked after a key-range throttle; back in %s", a.wait.Round(time.Millisecond))), wait: a.wait}
}

// hotSettle tells t's key what the delivery's claim or run came to, and
// returns v, a throttle on the key's range or a conflict storm holding the
// message away for the key's backoff instead of the usual one.
func (w *Worker) hotSettle(d *delivery, t *hotTicket, v verdict) verdict {
	if t == nil {
		return v
	}
	now := w.cfg.Now()
	switch tv := v.(type) {
	case troubled:
		var wait time.Duration
		var parkedNow, parks bool
		switch {
		case failure.KeyRangeThrottle(tv.failure):
			wait, parkedNow = t.throttled(now)
			parks = true
		case tv.failure.Code == failure.CodeTransactionConflict:
			wait, parkedNow, parks = t.conflicted(now)
		}
		if !parks {
			break
		}
		w.metrics.HotKeyDeliveries.WithLabelValues(hotParked).Inc()
		if parkedNow {
			w.log.Warn("hot key parked: its key range is throttled (or its item fought over); its work waits with its own backoff, the rest of the worker runs on",
				"key", printableKey(t.key), "code", tv.failure.Code, "backoff", wait.String(), "sqsMessageId", d.id)
		}
		tv.wait = wait
		return tv
	case completed:
		if tv.outcome != OutcomeDuplicate {
			if parked := t.succeeded(now); parked > 0 {
				w.log.Info("hot key unparked: its probe committed", "key", printableKey(t.key), "parkedFor", parked.Round(time.Millisecond).String())
			}
		}
	}
	t.release()
	return v
}

// printableKey is a parked key as the log shows it, bounded.
func printableKey(key string) string { return truncateRunes(strings.ToValidUTF8(key, "?"), 256) }
