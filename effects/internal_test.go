package effects

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(s Status, attempt int, callEnd time.Time) *Effect {
		return &Effect{Status: s, RequestHash: "h", WorkAttempt: attempt, CallExpiresAt: callEnd}
	}
	live, over := now.Add(time.Second), now.Add(-time.Second)
	tests := []struct {
		name       string
		rec        *Effect
		hash       string
		idempotent bool
		attempt    int
		want       action
	}{
		{"none: claim", nil, "h", false, 1, actClaim},
		{"other request", rec(StatusCompleted, 1, time.Time{}), "other", true, 1, actMismatch},
		{"other request beats every status", rec(StatusStarted, 1, live), "other", true, 1, actMismatch},
		{"completed: answer from the log", rec(StatusCompleted, 1, time.Time{}), "h", false, 2, actDone},
		{"failed: answer from the log", rec(StatusFailed, 1, time.Time{}), "h", true, 2, actRefused},
		{"unknown: wait for the operator", rec(StatusUnknown, 1, time.Time{}), "h", true, 2, actUnknown},
		{"not done: claim again", rec(StatusNotDone, 1, time.Time{}), "h", false, 2, actClaim},
		{"started, same attempt, call live: in progress", rec(StatusStarted, 2, live), "h", true, 2, actInProgress},
		{"started, same attempt, call live, not idempotent: in progress", rec(StatusStarted, 2, live), "h", false, 2, actInProgress},
		{"started, call over, idempotent: call again", rec(StatusStarted, 2, over), "h", true, 2, actClaim},
		{"started, call lease ended at once (unclear answer), idempotent: call again", rec(StatusStarted, 2, time.Time{}), "h", true, 2, actClaim},
		{"started, call over, not idempotent: unknown", rec(StatusStarted, 2, over), "h", false, 2, actMarkUnknown},
		{"started by an earlier attempt, live lease, idempotent: call again", rec(StatusStarted, 1, live), "h", true, 2, actClaim},
		{"started by an earlier attempt, live lease, not idempotent: unknown", rec(StatusStarted, 1, live), "h", false, 2, actMarkUnknown},
		{"call lease ends exactly now: over", rec(StatusStarted, 2, now), "h", true, 2, actClaim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, decide(tc.rec, tc.hash, tc.idempotent, &ddbworker.Message{Attempt: tc.attempt, LeaseToken: "tok"}, now))
		})
	}

	// The lease that claimed it, when the record names it: another lease of
	// the same attempt (a takeover after a crash) ends the call; the same
	// lease (a re-run) waits for it.
	started := &Effect{Status: StatusStarted, RequestHash: "h", WorkAttempt: 1, WorkLease: "lease-1", CallExpiresAt: live}
	for _, tc := range []struct {
		name       string
		token      string
		idempotent bool
		want       action
	}{
		{"same lease, call live: in progress", "lease-1", true, actInProgress},
		{"another lease, idempotent: call again", "lease-2", true, actClaim},
		{"another lease, not idempotent: unknown", "lease-2", false, actMarkUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, decide(started, "h", tc.idempotent, &ddbworker.Message{Attempt: 1, LeaseToken: tc.token}, now))
		})
	}
}

func TestRequestHash(t *testing.T) {
	type req struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	h := func(provider, op string, r any) string {
		t.Helper()
		s, err := requestHash(provider, op, r)
		require.NoError(t, err)
		require.Len(t, s, 64)
		return s
	}
	base := h("payments", "charge", req{1250, "EUR"})
	require.Equal(t, base, h("payments", "charge", map[string]any{"currency": "EUR", "amount": 1250}), "a struct and a map with the same JSON hash alike")
	for name, other := range map[string]string{
		"amount":    h("payments", "charge", req{1251, "EUR"}),
		"provider":  h("payments2", "charge", req{1250, "EUR"}),
		"operation": h("payments", "refund", req{1250, "EUR"}),
		"shifted":   h("payment", "scharge", req{1250, "EUR"}),
	} {
		require.NotEqual(t, base, other, name)
	}
	_, err := requestHash("p", "o", func() {})
	require.ErrorContains(t, err, "marshal")
}

func TestKeys(t *testing.T) {
	require.Equal(t, "OrderPaid/order-1:pay/charge", Key("OrderPaid", "order-1:pay", "charge"))
	hk := HashedKey(Key("OrderPaid", strings.Repeat("k", 512), "charge"))
	require.Len(t, hk, 43)
	require.Equal(t, hk, HashedKey(Key("OrderPaid", strings.Repeat("k", 512), "charge")))
	require.NotEqual(t, hk, HashedKey(Key("OrderPaid", strings.Repeat("k", 512), "refund")))
	for s, ok := range map[string]bool{"charge": true, "a.b_c-1": true, "": false, "a/b": false, strings.Repeat("x", 65): false, "é": false} {
		require.Equal(t, ok, validName(s), s)
	}
	for s, ok := range map[string]bool{"CARD_DECLINED": true, "card_declined": false, "": false, "X-1": false} {
		require.Equal(t, ok, isCode(s), s)
	}
}

func TestResolutionValidate(t *testing.T) {
	tests := []struct {
		name string
		r    Resolution
		want string // "" = valid
	}{
		{"completed", Resolution{Completed: true, Ref: "ch_1", By: "a", Reason: "b"}, ""},
		{"not done", Resolution{NotDone: true, By: "a", Reason: "b"}, ""},
		{"neither", Resolution{By: "a", Reason: "b"}, "either"},
		{"both", Resolution{Completed: true, NotDone: true, Ref: "r", By: "a", Reason: "b"}, "either"},
		{"completed without ref", Resolution{Completed: true, By: "a", Reason: "b"}, "Ref"},
		{"not done with ref", Resolution{NotDone: true, Ref: "r", By: "a", Reason: "b"}, "no Ref"},
		{"no reason", Resolution{NotDone: true, By: "a", Reason: " "}, "Reason"},
		{"result too long", Resolution{Completed: true, Ref: "r", Result: strings.Repeat("x", maxResultBytes+1), By: "a", Reason: "b"}, "Result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestTruncate(t *testing.T) {
	require.Equal(t, "abc", truncate("abc", 3))
	require.Equal(t, "ab…", truncate("abc", 2))
	require.Equal(t, "a…", truncate("aé", 2), "never cuts a rune")
}

func TestNewValidatesTogether(t *testing.T) {
	_, err := New(nil, Config{CallTimeout: -1})
	require.ErrorContains(t, err, "DynamoDB client is required")
	require.ErrorContains(t, err, "Config.Inbox is required")
	require.ErrorContains(t, err, "CallTimeout")
}

// An effect record must outlive every inbox record that lets its work run
// again: a FAILED one (retried, or reopened and redriven) too, or the next
// attempt finds no record and calls the provider again.
func TestTTLCoversFailedWork(t *testing.T) {
	store := inbox.Store{Table: "t", TTL: inbox.TTL{Failed: 90 * 24 * time.Hour}}
	l, err := New(&dynamodb.Client{}, Config{Inbox: store})
	require.NoError(t, err)
	require.GreaterOrEqual(t, l.cfg.TTL, 90*24*time.Hour, "default TTL")
	_, err = New(&dynamodb.Client{}, Config{Inbox: store, TTL: 35 * 24 * time.Hour})
	require.ErrorContains(t, err, "FAILED")
	a, err := NewAdmin(&dynamodb.Client{}, AdminConfig{Inbox: store})
	require.NoError(t, err)
	require.GreaterOrEqual(t, a.store.ttl, 90*24*time.Hour, "default TTL of a resolved record")
}
