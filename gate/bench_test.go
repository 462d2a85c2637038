package gate_test

import (
	"testing"
	"time"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/stale"
)

// BenchmarkDecide: the decision table on the record a failed gate returned.
func BenchmarkDecide(b *testing.B) {
	p, _ := stale.Policy{}.WithDefaults()
	now := time.Now()
	req := &gate.Request{Work: inbox.Work{Key: "k", MessageType: "T", RequestHash: "h"}}
	recs := []*inbox.Record{
		{Status: inbox.StatusCompleted, RequestHash: "h"},
		{Status: inbox.StatusProcessing, RequestHash: "h", LeaseExpiry: now.Add(time.Minute), Attempts: 1},
		{Status: inbox.StatusFailedRetryable, RequestHash: "h", Attempts: 2},
		{Status: inbox.StatusCompleted, RequestHash: "other"},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = gate.Decide(p, req, recs[i%len(recs)], "tok", gate.Limits{Attempts: failure.Policy{MaxAttempts: 5}, MaxTakeovers: 5}, now)
	}
}
