// Package inbox owns the inbox record (DESIGN §2) and its state machine:
// the record's keys (PK = IDEMP#<idempotencyKey>, SK = WORKER#<messageType>),
// statuses and outcomes, the timestamp format, the lease a worker holds,
// the index keys derived from a record, rejection records for messages that
// cannot be filed under an idempotency key; every fenced transition of a
// record (Complete, Fail, Renew, Takeover, End: transition.go) with the one
// LeaseLostError they report; and the operator reads (get, list by
// aggregate, list failed or in-flight through the attention index).
//
// It decides nothing and sends no transition itself: the gate decides and
// claims, mutation commits the flip inside the handler's transaction, stale
// renews and sweeps, each sending the transition built here.
package inbox
