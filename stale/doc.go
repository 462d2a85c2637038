// Package stale owns time in the inbox: the lease policy (how long a lease
// lasts, the clock-skew margin, when a PROCESSING record counts as stale and
// may be taken over, when a holder should renew), the TTL choices for each
// status, lease renewal (the heartbeat's fenced UpdateItem), and the
// sweeper that finds expired PROCESSING leases (through the attention index,
// or by a scan) and marks long-abandoned ones FAILED_TERMINAL LEASE_ABANDONED.
//
// TTL is garbage collection only: DynamoDB deletes expired items late (up to
// days; DynamoDB Local never), so no decision here reads `ttl`; staleness is
// always computed from leaseExpiresAt and the clock.
//
// It does not acquire leases (gate) or complete records (mutation), and the
// transitions it sends are built in inbox.
package stale
