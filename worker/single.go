package worker

import (
	"context"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

// single is the single-write commit mode: the handler's one version-guarded
// write is fenced in the domain item (mutation.Fenced: the fence names
// this work and its request hash) and committed alone — one
// TransactWriteItems with a ConditionCheck that the work has no inbox
// record, or, with SkipInboxCheck, one plain UpdateItem or PutItem. The
// work gets no inbox record unless a failure is recorded (FailFresh): a
// redelivery is judged by the fence again, as deterministically. A
// handler with nothing to write makes no call at all. Work that may have a
// record (claimsByCommit) claims through the gate, its writes still
// fenced.
type single struct {
	w *Worker
	// skipCheck: the route's fresh path writes without the inbox check
	// (ddbworker.SkipInboxCheck).
	skipCheck bool

	// Bound by claim: the record a failure creates (FailFresh); recorded
	// once it did.
	fresh    *inbox.Record
	recorded bool
}

func (s *single) claim(ctx context.Context, d *delivery, wk *work, found *inbox.Record) (commitMode, verdict) {
	if found != nil || !claimsByCommit(d, wk) {
		return (&gated{w: s.w, fence: true}).claim(ctx, d, wk, found)
	}
	return &single{w: s.w, skipCheck: s.skipCheck, fresh: s.w.freshRecord(wk)}, nil
}

func (s *single) begin(context.Context, *delivery, *work, context.CancelCauseFunc) (func(), error) {
	return func() {}, nil
}

func (s *single) attempt() (int, string)           { return 1, "" }
func (s *single) lease() *inbox.Lease              { return nil }
func (s *single) attempts(wk *work) failure.Policy { return wk.req.Attempts }

// unrecorded: the work has no inbox record unless its failure created one.
func (s *single) unrecorded() bool { return !s.recorded }

func (s *single) commit(wk *work, writes []mutation.Write, _ mutation.Completion, run int) (string, func(context.Context) error, error) {
	if len(writes) == 0 {
		// The handler decided there is nothing to do: nothing to write,
		// nothing to fence, no call. The work completes with its outcome;
		// nothing records it, so a redelivery runs the handler again.
		return "", nil, nil
	}
	fenced, err := fence(wk, writes)
	if err != nil {
		return "", nil, err
	}
	if s.skipCheck {
		return mutation.SingleOperation(fenced), func(ctx context.Context) error {
			return s.w.committer.CommitSingle(ctx, fenced)
		}, nil
	}
	return "TransactWriteItems", func(ctx context.Context) error {
		return s.w.committer.CommitSingleGuarded(ctx, s.fresh, fenced, run)
	}, nil
}

// judged: as any fresh run (judgedFresh), and a guard's supersede
// completes the work with nothing recorded — a redelivery is superseded
// again, as deterministically.
func (s *single) judged(wk *work, j judge.Run) verdict {
	if j.Kind == judge.Superseded {
		return completed{outcome: appliedOutcome(j.Outcome), attempt: 1}
	}
	return judgedFresh(wk, j)
}

func (s *single) recordFailure(ctx context.Context, f *failure.Error) error {
	err := s.w.committer.FailFresh(ctx, s.fresh, f)
	s.recorded = err == nil
	return err
}

func (s *single) supersede(ctx context.Context, outcome string) error {
	return s.w.committer.SupersedeFresh(ctx, s.fresh, outcome)
}

// fence is wk's writes fenced in the domain item: the fence names the
// work and its request hash (mutation.Stamp).
func fence(wk *work, writes []mutation.Write) (mutation.Write, error) {
	return mutation.Fenced(writes, mutation.Stamp{Key: wk.env.IdempotencyKey, Type: wk.env.MessageType, Hash: wk.env.RequestHash, SameWork: wk.req.SameWork})
}
