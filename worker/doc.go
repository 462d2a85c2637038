// Package worker owns the SQS side of ddbworker: long polling with a bounded
// pool (no receive while the pool is full), the handler registry by
// messageType, the per-message protocol that ties envelope, gate, handler,
// commit and ack together (DESIGN §4), batched deletes only after a commit
// or a known-COMPLETED duplicate, visibility changes for backoff, in-flight
// duplicates and notBefore, lease heartbeats, the message's attempt policy
// (read into failure.Policy), typed JSON handlers (JSON), readiness and
// permanent receive errors (Ready, ReceiveError), the
// three terminal policies (dlq, quarantine, redrive), FIFO group order,
// graceful shutdown, metrics and one JSON log line per message; where
// payloads by S3 reference enter the protocol and what their failures do
// (payload.go); and queue creation (queue + DLQ + redrive policy).
//
// It does not own the inbox record or its transitions (inbox), the decision
// table (gate), the transaction (mutation), lease timing (stale), reading
// and replaying the DLQ (dlq; the worker only sends its copies there) or
// fetching and checking referenced payloads (s3payload).
package worker
