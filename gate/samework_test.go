package gate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// The hash row compares like with like: a record whose requestHash is in
// an older canonical form is compared with the request's hash in that
// form (Request.HashAs), so a record written by an older worker is not a
// false IDEMPOTENCY_HASH_MISMATCH. Pure logic: no emulator involved.
func TestDecideComparesHashVersions(t *testing.T) {
	policy, err := stale.Policy{}.WithDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	body := func(payload string) *envelope.Envelope {
		e, err := envelope.NewDecoder(envelope.Config{})
		require.NoError(t, err)
		env, err := e.Decode([]byte(`{"messageId":"m","schemaVersion":1,"messageType":"t","producer":"p",` +
			`"occurredAt":"2026-03-01T12:00:00Z","idempotencyKey":"k","aggregateType":"a","aggregateId":"1","payload":` + payload + `}`))
		require.NoError(t, err)
		return env
	}
	first := body(`{"n":1234}`)
	v1, err := envelope.RequestHashVersion(first, envelope.HashV1)
	require.NoError(t, err)
	v2, err := envelope.RequestHashVersion(first, envelope.HashV2)
	require.NoError(t, err)

	req := func(e *envelope.Envelope, hashAs func(string) (string, error)) *gate.Request {
		return &gate.Request{Work: inbox.Work{Key: "k", MessageType: "t", RequestHash: e.RequestHash}, HashAs: hashAs}
	}
	same, changed := body(`{"n":1234.0}`), body(`{"n":1235}`)
	failing := func(string) (string, error) { return "", errors.New("boom") }
	tests := []struct {
		name   string
		req    *gate.Request
		stored string
		want   gate.Verdict
	}{
		{"v3 record, same work", req(same, same.HashLike), first.RequestHash, gate.VerdictDuplicate},
		{"v3 record, changed work", req(changed, changed.HashLike), first.RequestHash, gate.VerdictHashMismatch},
		{"v2 record, same work", req(same, same.HashLike), v2, gate.VerdictDuplicate},
		{"v2 record, changed work", req(changed, changed.HashLike), v2, gate.VerdictHashMismatch},
		{"v1 record, same work", req(same, same.HashLike), v1, gate.VerdictDuplicate},
		{"v1 record, changed work", req(changed, changed.HashLike), v1, gate.VerdictHashMismatch},
		{"v1 record without HashAs compares as is", req(same, nil), v1, gate.VerdictHashMismatch},
		{"HashAs failing compares as is", req(same, failing), v1, gate.VerdictHashMismatch},
		{"unknown version", req(same, same.HashLike), "v9:" + v1, gate.VerdictHashMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &inbox.Record{Status: inbox.StatusCompleted, RequestHash: tt.stored, Attempts: 1}
			require.Equal(t, tt.want, gate.Decide(policy, tt.req, rec, "tok", gate.Limits{Attempts: failure.Policy{MaxAttempts: 3}, MaxTakeovers: 5}, now))
		})
	}
}
