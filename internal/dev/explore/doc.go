// Package explore owns ddbworker's seeded, replayable, system-level
// randomized checker: the logic behind `ddbworker-dev explore`.
//
// The project's defects sit where two features meet — a re-send and the
// single-write route, a held lease and the effect log, a DLQ copy's
// attributes and an attribute-routed adapter, the single-write fence and
// message types. No hand-written scenario crosses them all; a generator
// does. The split is Jepsen's (a generator of operations and faults, a
// checker of the final state) and the replay is FoundationDB's and
// TigerBeetle's VOPR: one seed, one schedule.
//
// One seed (math/rand/v2, a PCG seeded by it; every random choice is drawn
// from it) generates a Schedule: the queue (standard or FIFO, a small
// maxReceiveCount), the terminal policy, a commit mode for each message
// type (gated, fused, single-write), the hosts (daemon workers side by
// side and a Lambda adapter driven as an event source mapping would), the
// work (envelope bodies and adapted ones: SNS-wrapped, EventBridge, own
// JSON, a type read from a message attribute; an effect-log handler;
// duplicates, concurrent duplicates, out-of-order versions, one key under
// two message types, a key reused for another payload, poison, work that
// fails by business a few times, deferred work), the faults on a timeline
// (lost responses per call kind, throttling by key and by table, 5xx,
// hangs, SQS latency, outages of the database through the fault proxy,
// deploys, crashes) and the operator's actions (inbox reopen, ddbworker's
// DLQ redrive filtered and all, SQS's own redrive, the sweeper), and the
// table: a new one of ddbworker's, or (a quarter of the seeds) an existing
// application's, adopted with the layout the blocked default plan
// proposes and written by the application throughout (app.go). The
// schedule is printed; wall-clock timing is not replayed (the emulators
// and the worker's goroutines run on real time), the schedule is.
//
// A crash is in-process: the host's SDK clients are switched off (every
// later call of that instance fails before it is sent, as if the process
// were gone) and its context is cancelled; its in-memory state goes with
// the instance, and a new instance takes its place. Failpoints
// (internal/hooks) crash the same way.
//
// When the work has drained it reads DynamoDB and both queues and checks
// every invariant (check.go). A failing seed prints the one command that
// replays it.
package explore
