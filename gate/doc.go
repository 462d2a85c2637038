// Package gate owns the idempotency gate (DESIGN §4.2): the conditional
// PutItem that claims a work item with a new PROCESSING record and a fresh
// fencing token, and — when a record already exists — the decision table
// read from the record that the failed condition returned (ALL_OLD, so the
// duplicate path costs one call and no read): duplicate, in flight
// elsewhere, hash mismatch, terminal again, or takeover of an expired lease
// or a FAILED_RETRYABLE record by a fenced conditional UpdateItem that
// counts the business attempt (or ends it as MAX_ATTEMPTS_EXCEEDED or
// RETRY_WINDOW_EXPIRED, as failure.Policy says). A record the sweeper
// marked LEASE_ABANDONED is taken over like an expired lease. Request
// hashes are compared like with like (Request.SameWork): a record written
// by an older worker in an older canonical form is compared with the
// request's hash in that form.
//
// Decide is the pure decision table. The gate does not run handlers, commit
// domain writes (mutation) or touch SQS (worker).
package gate
