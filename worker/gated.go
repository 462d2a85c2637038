package worker

import (
	"context"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/mutation"
)

// gated is the gated commit mode: the gate claims the work (a lease on its
// PROCESSING record), a heartbeat renews the lease while the handler runs,
// the commit's transaction writes the handler's writes with the record's
// flip to COMPLETED, fenced by the lease's token, and a failure or a
// supersede is a fenced update of the record. It is a gated route's mode,
// and the mode of any route's work that may have a record already
// (fused.go, single.go): the gate reads that record in the call that
// would have claimed it.
type gated struct {
	w *Worker
	// fence: a single-write route's writes, fenced in the domain item
	// under the lease too, so that its fresh path's fence judges them.
	fence bool

	// Bound by claim: the lease as the gate gave it, the attempts policy
	// in effect for it, and (begin) the heartbeat that renews it.
	c    claimed
	beat *heartbeat
}

func (g *gated) claim(ctx context.Context, d *delivery, wk *work, found *inbox.Record) (commitMode, verdict) {
	claimCtx, span := g.w.stage(ctx, spans.SpanClaim)
	c, v := g.w.claim(claimCtx, d, wk, found)
	span.end(g.w, nil)
	if v != nil {
		return nil, v
	}
	g.w.fail(hooks.AfterGate)
	return &gated{w: g.w, fence: g.fence, c: *c}, nil
}

// begin starts the heartbeat (none under Lambda, whose lease is the
// invocation) and fetches a payload by reference, under the lease.
func (g *gated) begin(ctx context.Context, d *delivery, wk *work, abort context.CancelCauseFunc) (func(), error) {
	g.beat = g.w.startHeartbeat(ctx, d, g.c.lease, abort)
	if err := g.w.resolvePayload(ctx, wk.env); err != nil {
		g.beat.stop()
		return g.beat.stop, err
	}
	return g.beat.stop, nil
}

func (g *gated) attempt() (int, string) { return g.c.lease.Attempt, g.c.lease.Token }

// lease is the lease as the heartbeat last renewed it.
func (g *gated) lease() *inbox.Lease {
	l := g.beat.lease()
	return &l
}

func (g *gated) attempts(*work) failure.Policy { return g.c.attempts }

func (g *gated) commit(wk *work, writes []mutation.Write, done mutation.Completion, run int) (string, func(context.Context) error, error) {
	if g.fence && len(writes) > 0 {
		fenced, err := fence(wk, writes)
		if err != nil {
			return "", nil, err
		}
		writes = []mutation.Write{fenced}
	}
	if g.w.cfg.strongTable() {
		// An MRSC table refuses transactions (New served only single-write
		// routes there): the fenced write, then the flip (CommitApart).
		op := "UpdateItem"
		if len(writes) == 1 {
			op = mutation.SingleOperation(writes[0])
		}
		return op, func(ctx context.Context) (err error) {
			g.beat.hold(func() { err = g.w.committer.CommitApart(ctx, g.c.lease, writes, done) })
			return err
		}, nil
	}
	return "TransactWriteItems", func(ctx context.Context) (err error) {
		// No renewal may race the transaction (heartbeat).
		g.beat.hold(func() { err = g.w.committer.Commit(ctx, g.c.lease, writes, done, run) })
		return err
	}, nil
}

// judged: a run under a lease ends as any run does (judge).
func (g *gated) judged(*work, judge.Run) verdict { return nil }

func (g *gated) recordFailure(ctx context.Context, f *failure.Error) error {
	return g.w.committer.Fail(ctx, *g.lease(), f)
}

func (g *gated) supersede(ctx context.Context, outcome string) error {
	return g.w.committer.Supersede(ctx, *g.lease(), outcome)
}

func (g *gated) unrecorded() bool { return false }
