// Package inbox owns the shape of an inbox record (DESIGN §2): its keys
// (PK = IDEMP#<idempotencyKey>, SK = WORKER#<messageType>), statuses and
// outcomes, the timestamp format, the lease a worker holds on a record, the
// index keys derived from a record, rejection records for messages that
// cannot be filed under an idempotency key, and the operator reads (get,
// list by aggregate, list failed or stale).
//
// It does not decide anything and it does not write: the gate acquires
// records, mutation completes or fails them, stale renews and sweeps them.
package inbox
