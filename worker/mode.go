package worker

import (
	"context"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/judge"
	"github.com/ddbworker/ddbworker/mutation"
)

// commitMode is how a route's work is claimed, committed and recorded:
// gated (gated.go), fused (fused.go) or single-write (single.go), chosen
// once per route when the worker is built (Worker.modes). The stages call
// it and hold no mode of their own. A route's mode only claims; claim
// returns the mode the delivery's run is bound to — the route's own with
// the record its commit creates, or gated with the gate's lease when the
// work may have a record already — and the run, record and observe
// stages call that.
type commitMode interface {
	// claim takes d's work (found: its record, when an earlier pass found
	// it), or says why it may not run now.
	claim(ctx context.Context, d *delivery, wk *work, found *inbox.Record) (commitMode, verdict)
	// begin readies the handler's run (gated: the heartbeat, a payload
	// by reference fetched under the lease) and returns what ends it.
	begin(ctx context.Context, d *delivery, wk *work, abort context.CancelCauseFunc) (stop func(), err error)
	// attempt is the business attempt the handler runs as, and its lease
	// token ("": none).
	attempt() (int, string)
	// lease is the lease held, as last renewed (nil: none).
	lease() *inbox.Lease
	// attempts is the attempts policy that judges a failure.
	attempts(wk *work) failure.Policy
	// commit is the commit of a run's writes: the DynamoDB operation of its
	// one call, and the call (nil: nothing to write, no call).
	commit(wk *work, writes []mutation.Write, done mutation.Completion, run int) (op string, call func(context.Context) error, err error)
	// judged is the verdict of a run's end that this mode decides itself
	// (nil: as judge decides for any run).
	judged(wk *work, j judge.Run) verdict
	// recordFailure counts the attempt and records its failure f.
	recordFailure(ctx context.Context, f *failure.Error) error
	// supersede completes the work as superseded with outcome.
	supersede(ctx context.Context, outcome string) error
	// unrecorded: the work has no inbox record (a single-write fresh run
	// that recorded no failure).
	unrecorded() bool
}

// modeOf is rt's commit mode.
func (w *Worker) modeOf(rt ddbworker.Route) commitMode {
	switch {
	case rt.SingleWrite:
		return &single{w: w, skipCheck: rt.SkipInboxCheck}
	case rt.Fused:
		return &fused{w: w}
	}
	return &gated{w: w}
}
