package worker

import (
	"time"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/mutation"
)

// What flows between the stages of one message's pipeline (pipeline.go):
//
//	admit, claim, run ──verdict──► record ──outcome──► apply ──settled──►
//
// A verdict is what the deciding stages concluded, including what the
// inbox must still be told (a failure, a supersede, a release, an end, a
// rejection); record writes that and turns the verdict into an outcome,
// which says what must happen to the SQS message; apply does it. Each is a
// closed set of values built only here, so no stage can express a
// combination that makes no sense (an ack that is also hidden, a
// failure recorded without a lease or a record to record it on).

// verdict is what admit, claim and run decided about a delivery.
type verdict interface{ verdict() }

// completed: the work is COMPLETED in the inbox — by this delivery's commit
// (outcome applied, superseded, or the handler's own), or before it (a
// duplicate). Nothing is left to record.
type completed struct {
	outcome string
	attempt int
}

// waiting: someone else holds the work (in flight elsewhere, or this
// lease was lost to another holder); the message comes back after hide.
type waiting struct {
	outcome string // OutcomeInFlight, OutcomeLeaseLost
	hide    time.Duration
	attempt int
}

// deferred: attemptPolicy.notBefore lies ahead. The message is hidden for
// by, or, with resend, re-sent as a new message delayed by by.
type deferred struct {
	by     time.Duration
	resend bool
}

// troubled: infrastructure trouble (throttling, 5xx, timeouts, conflicts,
// a lost response) or a shutdown ended the delivery before any business
// outcome. No attempt is counted. lease, when set, is held — or may be: a
// claim whose write got no answer — and is given back. step is the
// backoff step; wait, when set, replaces it: a parked hot key's backoff
// (hotkey.go).
type troubled struct {
	failure *failure.Error
	lease   *inbox.Lease
	step    int
	wait    time.Duration
}

// failed: a business failure of the attempt the run ran as, which record
// counts through mode (commitMode.recordFailure: a fenced update of the
// leased record, or — for a run that claimed by its commit — the record's
// creation, failed); attempts is the policy that says whether it ends the
// work. lease is the lease held (nil: none).
type failed struct {
	failure  *failure.Error
	mode     commitMode
	lease    *inbox.Lease
	attempt  int
	attempts failure.Policy
}

// superseded: a guard judged the work obsolete; record completes it with
// outcome through mode (commitMode.supersede).
type superseded struct {
	outcome string
	mode    commitMode
	lease   *inbox.Lease
	attempt int
	// duplicate: a single-write fence found the work applied already; the
	// record completes (APPLIED) and the delivery is a duplicate.
	duplicate bool
}

// exhausted: the gate found the limits used up (attempts, retry window,
// takeovers of expired leases); record ends the record as read.
type exhausted struct {
	failure *failure.Error
	record  *inbox.Record
}

// rejected: the message cannot be filed under an idempotency key (it does
// not decode, its type has no handler, it is a replay or a deferral the
// worker will not run) or its key holds other work (observe raises the
// alert for IDEMPOTENCY_HASH_MISMATCH); record writes a rejection record.
type rejected struct {
	rejection mutation.Rejection
}

// terminalAgain: the work is FAILED_TERMINAL already; it is never re-run
// and the terminal policy applies again.
type terminalAgain struct {
	failure *failure.Error
	attempt int
}

// recordExists: a fused or single-write commit found the work's record already there; the
// gate decides from it (claim).
type recordExists struct{ record *inbox.Record }

// notStarted: the delivery did not run — the database is unhealthy
// (parked), the worker is shutting down or a Lambda invocation has no time
// left (released).
type notStarted struct{ park bool }

func (completed) verdict()     {}
func (waiting) verdict()       {}
func (deferred) verdict()      {}
func (troubled) verdict()      {}
func (failed) verdict()        {}
func (superseded) verdict()    {}
func (exhausted) verdict()     {}
func (rejected) verdict()      {}
func (terminalAgain) verdict() {}
func (recordExists) verdict()  {}
func (notStarted) verdict()    {}

// outcome is what became of a delivery once the inbox knows: its result
// (an Outcome* label), what must happen to its SQS message, the failure
// behind it, and the business attempt it ran as. Build it with done,
// later, parked, resent or terminal.
type outcome struct {
	result  string
	act     action
	failure *failure.Error
	attempt int
	// infra marks an outcome of infrastructure trouble: no business
	// attempt was counted.
	infra bool
	// held is the lease the delivery holds once the inbox knows (nil:
	// none): a parked delivery keeps it, and a copy of its message hands it
	// over (attrHeldLease). record sets it.
	held *inbox.Lease
}

// action is what apply does with the SQS message.
type action interface{ action() }

// ack deletes the message: the work is done.
type ack struct{}

// hide keeps the message, visible again after d (0: at once).
type hide struct{ d time.Duration }

// park keeps the message hidden until the database is healthy again.
type park struct{}

// resend sends a copy of the message delayed by delay, then deletes it.
type resend struct{ delay time.Duration }

// endTerminal applies the terminal policy: a DLQ copy then a delete,
// a delete (quarantine), or nothing (redrive).
type endTerminal struct{}

func (ack) action()         {}
func (hide) action()        {}
func (park) action()        {}
func (resend) action()      {}
func (endTerminal) action() {}

// done: the work is done; the message is deleted.
func done(result string, attempt int) outcome {
	return outcome{result: result, act: ack{}, attempt: attempt}
}

// later: the message comes back after d; f says why (nil when someone
// else holds the work or it is deferred).
func later(result string, d time.Duration, f *failure.Error, attempt int) outcome {
	return outcome{result: result, act: hide{d}, failure: f, attempt: attempt, infra: f.Infrastructure()}
}

// laterInfra: the message comes back after d because of infrastructure
// trouble f, whatever f's code (a refused record write, an S3 permission).
func laterInfra(d time.Duration, f *failure.Error, attempt int) outcome {
	return outcome{result: OutcomeRetry, act: hide{d}, failure: f, attempt: attempt, infra: true}
}

// parked: the message waits until the database is healthy again, holding
// held (nil: no lease).
func parked(f *failure.Error, held *inbox.Lease) outcome {
	return outcome{result: OutcomeParked, act: park{}, failure: f, infra: true, held: held}
}

// resent: a deferred message goes back to the queue as a new one.
func resent(delay time.Duration) outcome {
	return outcome{result: OutcomeDeferred, act: resend{delay}}
}

// terminal: the work failed for good with f; the terminal policy applies.
func terminal(f *failure.Error, attempt int) outcome {
	return outcome{result: OutcomeTerminal, act: endTerminal{}, failure: f, attempt: attempt}
}

// released: not started; visible again at once for another consumer.
func released() outcome { return outcome{result: OutcomeReleased, act: hide{0}} }
