// Package chaos owns ddbworker's self-checking fault run: the logic behind
// `ddbworker-dev chaos`.
//
// Run starts (or reuses) the local emulators, creates a private table and
// queues, generates an example-domain plan (duplicates, concurrent
// duplicates, out-of-order versions, poison), and starts several real
// worker processes — the ddbworker binary's `run` command with its hidden
// fault flags: SDK-middleware faults (throttling, TransactionConflict,
// timeouts, lost responses, failed SQS deletes, commits delayed past the
// visibility timeout) and failpoints that SIGKILL the process at a named
// line. While the plan's messages flow, a killer SIGKILLs random workers and
// restarts them, and now and then SIGSTOPs one past its visibility timeout
// (its leases expire, others take over, its late commits must be fenced).
//
// The harness reads every worker's JSON log line by line and tallies
// injected faults, failpoint kills and per-message outcomes; a phase has
// drained when every message it sent reached a final outcome in some log
// and the queue shows nothing visible, in flight or delayed. Then it stops
// the workers, drains the DLQ, and checks the exactly-once invariant from
// DynamoDB and SQS themselves (caseflow.Verify, a DLQ check by source
// message id, the work queue empty), and returns a Report with a verdict.
//
// With Config.Outage (`chaos --outage`) phase 1 is a warm-up with the
// killer, then outage windows: the workers reach DynamoDB through an
// internal/ddbproxy that throttles every request, answers 5xx, or
// holds requests unanswered for each window's length while traffic keeps
// arriving, with a rolling deploy (each worker SIGTERMed and replaced, one
// at a time) in each window's middle, on a queue with a realistic
// maxReceiveCount. Besides the invariant it checks that each window's
// deploy happened, that no healthy message was dead-lettered and no work
// item ended terminal for an infrastructure reason, the DynamoDB requests
// per second per worker during each window, and the drain after it (the
// OutageReport: health transitions, parked and retried deliveries, the
// highest receive count).
//
// It owns no protocol logic and changes nothing in the worker: it only
// drives the binary the way an operator's worst day would.
package chaos
