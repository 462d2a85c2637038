// Package gate owns the idempotency gate (DESIGN §4.2): claiming a work
// item. A conditional PutItem claims it with a new PROCESSING record and a
// fresh fencing token; when a record already exists, the decision table
// (Decide) reads the record that the failed condition returned (ALL_OLD, so
// the duplicate path costs one call and no read): duplicate, in flight
// elsewhere, hash mismatch, terminal again, limits exhausted, or a takeover
// of a FAILED_RETRYABLE record, a released lease or an expired one by one
// fenced conditional UpdateItem.
//
// Claiming counts no business attempt: an attempt is counted when its
// failure is recorded (package mutation, inbox.Store.Fail), so a lease that
// ends without an outcome costs none. Takeovers of leases that expired
// without an outcome are counted apart and bounded (Config.MaxTakeovers),
// so work that kills its worker every time ends. A record the sweeper
// marked LEASE_ABANDONED is taken over like an expired lease. Request
// hashes are compared like with like (Request.SameWork): a record written
// by an older worker in an older canonical form is compared with the
// request's hash in that form.
//
// A claim whose write got no answer that says whether it applied (the
// PutItem's or a takeover's UpdateItem: throttled past the SDK's retries,
// a 5xx, a timeout, a lost response) is a *ClaimError naming the lease the
// write would have taken, so that the caller can give it back (a Release
// fenced on its token) and the next delivery takes the work over at once,
// charged nothing.
//
// The gate writes no failure: an Exhausted or HashMismatch decision is
// recorded by the caller (mutation's Committer). It does not run handlers,
// commit domain writes (mutation) or touch SQS (worker).
package gate
