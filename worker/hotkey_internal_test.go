package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
)

// The parking of one key: one probe at a time, at most once per backoff;
// the backoff doubles with each throttled probe up to ParkMax; a commit
// unparks; other keys are never held; the keys tracked stay within
// MaxKeys.
func TestHotKeysPark(t *testing.T) {
	cfg, err := HotKeyConfig{Park: 500 * time.Millisecond, ParkMax: 2 * time.Second, MaxKeys: 3}.WithDefaults()
	require.NoError(t, err)
	gauge := 0
	h := newHotKeys(cfg, func(n int) { gauge = n })
	now := time.Unix(1_000_000, 0)
	stale := time.Minute

	a := h.admit("k", now, stale)
	require.NotNil(t, a.ticket, "a key never throttled is not held")
	require.False(t, a.ticket.probe)
	straggler := h.admit("k", now, stale).ticket // already running when the key is parked
	wait, parkedNow := a.ticket.throttled(now)
	require.True(t, parkedNow)
	require.Equal(t, 500*time.Millisecond, wait)
	require.Equal(t, 1, gauge)
	w2, again := straggler.throttled(now.Add(10 * time.Millisecond))
	require.False(t, again)
	require.Equal(t, 500*time.Millisecond, w2, "a straggler learns the wait (at least Park) and does not double the backoff")

	held := h.admit("k", now.Add(100*time.Millisecond), stale)
	require.Nil(t, held.ticket, "held back until the backoff ends")
	require.Equal(t, 500*time.Millisecond, held.wait)
	require.Equal(t, now, held.since)
	require.NotNil(t, h.admit("other", now.Add(100*time.Millisecond), stale).ticket, "another key runs on")

	probe := h.admit("k", now.Add(500*time.Millisecond), stale)
	require.NotNil(t, probe.ticket)
	require.True(t, probe.ticket.probe, "the backoff over: one probe")
	require.Nil(t, h.admit("k", now.Add(600*time.Millisecond), stale).ticket, "one probe at a time")
	wait, _ = probe.ticket.throttled(now.Add(700 * time.Millisecond))
	require.Equal(t, time.Second, wait, "a throttled probe doubles the backoff")
	for i, want := range []time.Duration{2 * time.Second, 2 * time.Second} {
		at := now.Add(time.Duration(10+i*10) * time.Second)
		p := h.admit("k", at, stale)
		require.True(t, p.ticket.probe)
		wait, _ = p.ticket.throttled(at)
		require.Equal(t, want, wait, "capped at ParkMax")
	}

	// A probe that neither throttles nor commits (a business failure, the
	// work in flight elsewhere) lets the next one start; one that never
	// settles is given up after stale.
	at := now.Add(time.Minute)
	p := h.admit("k", at, stale)
	p.ticket.release()
	p.ticket.release()
	p = h.admit("k", at, stale)
	require.True(t, p.ticket.probe, "released: the next probe may start")
	require.Nil(t, h.admit("k", at.Add(time.Second), stale).ticket)
	lost := h.admit("k", at.Add(stale+time.Second), stale)
	require.NotNil(t, lost.ticket, "a probe that never settled is given up")

	parked := lost.ticket.succeeded(at.Add(stale + 2*time.Second))
	require.Positive(t, parked, "the probe committed: unparked")
	require.Zero(t, gauge)
	require.False(t, h.admit("k", at.Add(stale+2*time.Second), stale).ticket.probe, "not parked any more")

	// Bounded: a fourth key forgets the least recently seen, an unparked
	// one first.
	for i, k := range []string{"a", "b", "c", "d"} {
		tk := h.admit(k, at.Add(time.Duration(i)*time.Millisecond), stale).ticket
		tk.throttled(at.Add(time.Duration(i) * time.Millisecond))
	}
	require.Len(t, h.keys, 3)
	require.Equal(t, 3, gauge)
	require.NotContains(t, h.keys, "a")
}

// A conflict storm: ConflictStorm conflicts in a row on one key park it; a
// commit between them resets the count.
func TestHotKeysConflictStorm(t *testing.T) {
	cfg, err := HotKeyConfig{ConflictStorm: 3}.WithDefaults()
	require.NoError(t, err)
	h := newHotKeys(cfg, func(int) {})
	now := time.Unix(1_000_000, 0)
	conflict := func() bool {
		_, _, parks := h.admit("k", now, time.Minute).ticket.conflicted(now)
		return parks
	}
	require.False(t, conflict())
	require.False(t, conflict())
	h.admit("k", now, time.Minute).ticket.succeeded(now)
	require.False(t, conflict(), "a commit reset the count")
	require.False(t, conflict())
	require.True(t, conflict(), "the third in a row parks the key")
	require.Nil(t, h.admit("k", now, time.Minute).ticket, "parked")
}

func TestHotKeyConfig(t *testing.T) {
	c, err := HotKeyConfig{}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, HotKeyConfig{Park: DefaultHotKeyPark, ParkMax: DefaultHotKeyParkMax, MaxThrottled: DefaultHotKeyMaxThrottled,
		MaxKeys: DefaultHotKeyMaxKeys, ConflictStorm: DefaultHotKeyConflictStorm}, c)
	for _, bad := range []HotKeyConfig{
		{Park: 100 * time.Millisecond},                    // more than 5 probes a second
		{Park: 2 * time.Second, ParkMax: time.Second},     // ParkMax below Park
		{ParkMax: time.Hour},                              // beyond SQS's 15-minute delay
		{ParkMax: time.Minute, MaxThrottled: time.Second}, // MaxThrottled below ParkMax
		{MaxKeys: -1},
		{ConflictStorm: 1},
	} {
		_, err := bad.WithDefaults()
		require.Error(t, err, "%+v", bad)
	}
	_, err = Config{QueueURL: "q", DLQURL: "d", Store: inbox.Store{Table: "t"}, HotKey: HotKeyConfig{Park: time.Millisecond}}.WithDefaults()
	require.ErrorContains(t, err, "Config.HotKey.Park")
}
