// Package worker owns the SQS side of ddbworker and the per-message
// pipeline that ties the protocol together (DESIGN §4, §7).
//
// One message goes through one pipeline (pipeline.go), each stage called
// from one place and returning a value:
//
//	facts    the delivery, read once at receipt       pipeline.go
//	admit    decode, or read with an adapted          admit.go, payload.go
//	         route's adapter (SNS, EventBridge, a
//	         service's own JSON); route, replay
//	         window, deferral, an SQS Extended
//	         Client body; no writes
//	claim    the route's commit mode (mode.go): the     claim.go, gated.go,
//	         gate's lease, or — fused, single-write —   fused.go, single.go
//	         the run's own commit
//	run      the handler and its commit, heartbeat,   run.go (judged by
//	         guard re-runs, a payload by reference    internal/judge)
//	record   the only place that writes a failure     record.go
//	         (or a supersede, a release, an end, a
//	         rejection) to the inbox
//	apply    the only place that acts on SQS for the  apply.go, copies.go
//	         message: ack, hide, park, re-send, the
//	         terminal policy (DLQ copy)
//	observe  the log line, metrics, alerts and event,  observe.go
//	         as one wrapper; with a TracerProvider the  trace.go
//	         delivery's consumer span, and a span per
//	         stage through one helper
//
// What flows between them is closed sets of values (outcome.go): a verdict
// from the deciding stages, an outcome from record. The pipeline has one
// way back, in process: a run that claims its work by its commit (a fused
// route's, a single-write route's first receive: claimsByCommit) and finds
// that the work has a record already is decided again from that record —
// claim, then run under the lease; nothing of the first run was written
// or charged.
//
// Business attempts are charged by business outcomes only: taking a lease
// charges nothing; a handler's failure is counted in the same fenced write
// that records it; infrastructure trouble and shutdowns only give the
// lease back (best effort) — nothing is ever refunded, so nothing needs
// carrying across parking, shutdown or Lambda invocations. Takeovers of
// leases that expired without an outcome are bounded apart
// (Config.MaxTakeovers). While the database is unhealthy a message is
// parked (hidden) rather than run; on the last receive its queue's
// redrive policy allows, a standard queue's message is re-sent as a new
// one instead (apply.go: no hiding keeps it out of the DLQ at its next
// receive).
//
// Two ways of committing cost fewer calls than the gated path: a fused
// route's commit creates the record COMPLETED (one transaction: fused.go);
// a single-write route's commit is one conditional write fenced in the
// domain item (single.go, mutation.Fenced), with no record unless it
// fails. Each commit mode — gated.go, fused.go, single.go — implements
// the one interface the stages call (mode.go: claim, commit, record a
// failure, supersede). The size of the records written is
// measured per message type (recordsize.go).
//
// Around the pipeline: the daemon's runtime (worker.go: long polling with
// a bounded, adaptive pool, FIFO group order, graceful shutdown, readiness
// and permanent receive errors), the database health gate and parking
// (health.go), the batched deleter (deleter.go), the FIFO keeper
// (fifo.go), the DynamoDB call policy — one retry owner, timeouts, the
// write budget (dynamo.go), the Lambda adapter's per-invocation host
// (lambda.go: HandleSQSEvent, the outage hiding and OutageCover), metrics
// with bounded labels (declared through package metrics: the host
// chooses the backend), the database capacity gauge — how many messages the
// database can take from this worker now, the scaling signal
// (capacity.go) — and queue creation (queues.go).
//
// It does not own the inbox record or its transitions (inbox), the
// decision table (gate), the commit and the fenced settle writes
// (mutation), lease timing (stale), reading and replaying the DLQ (internal/dlq)
// or fetching and checking referenced payloads (s3payload).
package worker
