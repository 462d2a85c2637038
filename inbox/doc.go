// Package inbox owns the inbox record (DESIGN §2) and its state machine:
// the one configuration of the inbox (Store: table, layout, attention
// shards, IndexProcessing, and TTL — how long a record of each status
// lives, the value of its TTL attribute — with their DefaultX constants),
// the record's encoding (Encode, Decode) and keys (PK =
// IDEMP#<idempotencyKey>, SK = WORKER#<messageType>), statuses and
// outcomes, the timestamp format, the lease a worker holds,
// the index keys derived from a record, rejection records for messages that
// cannot be filed under an idempotency key; every transition of a record
// (transition.go: Complete, Fail, Release, Renew, Takeover, End, Reopen,
// and the first record a fused run creates, CompletedRecord and
// FailedRecord) with the one LeaseLostError they report; the accounting
// they keep — attempts counts recorded business failures (only Fail adds
// one), takeovers counts leases that expired without an outcome, and a
// released lease is PROCESSING under no token —; the operator reads (get,
// a rejection by SQS message id, the rejected deliveries of a key through
// the aggregate and attention indexes — Rejections —, list by aggregate,
// list failed or in-flight through the attention index); and the store's
// settings as its table records them (recorded.go:
// the DDBWORKER#CONFIG item, ReadRecorded, Merge, RecordSettings), which
// every daemon command and the Lambda adapter read at start, so that all
// of them share one configuration.
//
// It decides nothing and sends no transition itself (the one item it
// writes is its settings item): the gate decides and claims, mutation
// commits and writes the settle transitions, stale renews and sweeps, each
// sending the transition built here.
package inbox
