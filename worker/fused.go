package worker

import (
	"cmp"
	"context"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

// fused is the fused commit mode: the work's record is created COMPLETED
// in the commit's transaction, with the handler's writes — no gate call,
// no lease, no heartbeat. A failure or a supersede creates the record
// (failed, or COMPLETED as superseded). The commit, or the write that
// would create the failed record, may find a record there already: then
// nothing of this run was written or charged, and the delivery is decided
// again from that record, gated (process). Work that may have a record
// (claimsByCommit), or whose payload is by reference (fetched under the
// gate's lease, so that a duplicate costs no S3 read), claims through the
// gate.
type fused struct {
	w *Worker
	// fresh is the record this run creates (bound by claim).
	fresh *inbox.Record
}

func (f *fused) claim(ctx context.Context, d *delivery, wk *work, found *inbox.Record) (commitMode, verdict) {
	if found != nil || !claimsByCommit(d, wk) {
		return (&gated{w: f.w}).claim(ctx, d, wk, found)
	}
	return &fused{w: f.w, fresh: f.w.freshRecord(wk)}, nil
}

func (f *fused) begin(context.Context, *delivery, *work, context.CancelCauseFunc) (func(), error) {
	return func() {}, nil
}

func (f *fused) attempt() (int, string)               { return 1, "" }
func (f *fused) lease() *inbox.Lease                  { return nil }
func (f *fused) attempts(wk *work) failure.Policy     { return wk.req.Attempts }
func (f *fused) judged(wk *work, j judge.Run) verdict { return judgedFresh(wk, j) }
func (f *fused) unrecorded() bool                     { return false }

func (f *fused) commit(_ *work, writes []mutation.Write, done mutation.Completion, run int) (string, func(context.Context) error, error) {
	return "TransactWriteItems", func(ctx context.Context) error {
		return f.w.committer.CommitFused(ctx, f.fresh, writes, done, run)
	}, nil
}

func (f *fused) recordFailure(ctx context.Context, fl *failure.Error) error {
	return f.w.committer.FailFresh(ctx, f.fresh, fl)
}

func (f *fused) supersede(ctx context.Context, outcome string) error {
	return f.w.committer.SupersedeFresh(ctx, f.fresh, outcome)
}

// claimsByCommit reports whether wk's run claims the work by its commit
// (fused, single-write) instead of the gate. Only a delivery whose work is
// not known to have a record (mayHaveRecord) takes that path, with its
// payload inline. Its commit still finds a record the marks could not
// announce — the fused commit's Put condition, the single-write commit's
// ConditionCheck (unless the route skips it: SkipInboxCheck, where
// mayHaveRecord is all there is) — and sends the delivery back to the
// gate (process). A redelivery claims through the gate: it is more likely
// to find a record (its earlier delivery failed, crashed or lost its
// delete), which the gate reads in the same call that would have claimed
// it, and a failing run does not first have to fail to create one.
func claimsByCommit(d *delivery, wk *work) bool {
	return wk.env.PayloadRef == nil && !mayHaveRecord(d)
}

// freshRecord is the record a run that claims by its commit creates: its
// lease token names this run, its owner the run's holder (the request's:
// under Lambda, the invocation).
func (w *Worker) freshRecord(wk *work) *inbox.Record {
	rec := inbox.NewRecord(&wk.req.Work, w.cfg.Now())
	rec.LeaseToken, rec.LeaseOwner = gate.NewToken(), cmp.Or(wk.req.Owner, w.gate.Owner())
	return rec
}

// judgedFresh is how a run that claimed by its commit ends where a run
// under a lease would record: a fence that shows the work applied makes
// it a duplicate, with nothing to complete (there is no record of this
// run's); a fence that names other work under the key is refused with a
// rejection record — the key's own record is not this work's to take.
func judgedFresh(wk *work, j judge.Run) verdict {
	switch j.Kind {
	case judge.Duplicate:
		return completed{outcome: OutcomeDuplicate, attempt: 1}
	case judge.Superseded:
		return nil
	}
	if j.Failure != nil && j.Failure.Code == failure.CodeHashMismatch {
		return reject(wk.env, j.Failure.Code, j.Failure.Message)
	}
	return nil
}
