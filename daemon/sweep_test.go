package daemon

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// `ddbworker sweep`: a dry run reports, --max bounds the marks, and the
// marked records are listed for operators with their code.
func TestSweepCommand(t *testing.T) {
	c := newInboxCLI(t)
	ctx := context.Background()
	acquireAt := func(key string, at time.Time) {
		g, err := gate.New(c.env.DynamoDB, gate.Config{Store: inbox.Store{Table: c.env.Table}, Owner: "worker-dead/1", Policy: stale.Policy{Lease: 30 * time.Second},
			Now: func() time.Time { return at }})
		require.NoError(t, err)
		d, err := g.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: key, MessageType: "CaseNoteRecorded", RequestHash: "h", AggregateType: "Case", AggregateID: "c-9"}})
		require.NoError(t, err)
		require.Equal(t, gate.Acquired, d.Action)
	}
	now := time.Now()
	acquireAt("k-sweep-old-1", now.Add(-3*time.Hour))
	acquireAt("k-sweep-old-2", now.Add(-2*time.Hour))
	acquireAt("k-sweep-recent", now.Add(-10*time.Minute))
	acquireAt("k-sweep-live", now)

	sweep := func(args ...string) sweepJSON {
		t.Helper()
		out, err := c.run(append([]string{"sweep", "-o", "json"}, args...)...)
		require.NoError(t, err)
		var doc sweepJSON
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		return doc
	}
	doc := sweep("--dry-run")
	require.Equal(t, "scan", doc.Source)
	require.True(t, doc.DryRun)
	require.Equal(t, 3, doc.Read)
	require.Equal(t, 1, doc.Expired)
	require.Equal(t, 2, doc.Abandoned)
	require.Zero(t, doc.Marked)
	require.Len(t, doc.Stuck, 3)
	require.Equal(t, "k-sweep-old-1", doc.Stuck[0].Key, "longest expired first")
	require.Equal(t, "abandoned", doc.Stuck[0].State)
	require.Equal(t, "not marked: dry run", doc.Stuck[0].Action)
	require.Equal(t, "worker-dead/1", doc.Stuck[0].Owner)
	require.Equal(t, "Case/c-9", doc.Stuck[0].Aggregate)
	require.Equal(t, "expired", doc.Stuck[2].State)

	doc = sweep("--max", "1")
	require.Equal(t, 1, doc.Marked)
	require.Equal(t, "marked LEASE_ABANDONED", doc.Stuck[0].Action)
	require.Equal(t, "not marked: over --max", doc.Stuck[1].Action)

	out, err := c.run("sweep")
	require.NoError(t, err)
	require.Contains(t, out, "2 expired lease(s) read — 1 expired within grace, 1 abandoned, 1 marked")
	require.Regexp(t, `k-sweep-old-2\s+CaseNoteRecorded\s+Case/c-9\s+worker-dead/1\s+1h59m\d\ds\s+0\s+abandoned\s+marked LEASE_ABANDONED`, out)
	require.Regexp(t, `k-sweep-recent\s+.*expired\s+reported`, out)

	list, err := c.run("inbox", "list", "--status", "FAILED_TERMINAL", "--code", failure.CodeLeaseAbandoned, "-o", "json")
	require.NoError(t, err)
	require.Contains(t, list, "k-sweep-old-1")
	require.Contains(t, list, "k-sweep-old-2")
	require.NotContains(t, list, "k-sweep-recent")

	_, err = c.run("sweep", "--metrics-addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "--metrics-addr needs --every")
}
