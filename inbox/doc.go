// Package inbox owns the inbox record (DESIGN §2) and its state machine:
// the record's keys (PK = IDEMP#<idempotencyKey>, SK = WORKER#<messageType>),
// statuses and outcomes, the timestamp format, the lease a worker holds,
// the index keys derived from a record, rejection records for messages that
// cannot be filed under an idempotency key; every fenced transition of a
// record (Complete, Fail, Renew, Takeover, End: transition.go) with the one
// LeaseLostError they report; the operator reads (get, list by aggregate,
// list failed or in-flight through the attention index); and the store's
// settings as its table records them (recorded.go: the DDBWORKER#CONFIG
// item, ReadRecorded, RecordSettings), which every daemon command reads —
// and a Lambda function can at cold start — so that all of them share one
// configuration.
//
// It decides nothing and sends no transition itself (the one item it
// writes is its settings item): the gate decides and claims, mutation
// commits the flip inside the handler's transaction, stale renews and
// sweeps, each sending the transition built here.
package inbox
