// Package stale owns time in the inbox: the lease policy (how long a lease
// lasts, the clock-skew margin, when a PROCESSING record counts as stale and
// may be taken over, when a holder should renew), the TTL choices for each
// status, and lease renewal (the heartbeat's fenced UpdateItem).
//
// TTL is garbage collection only: DynamoDB deletes expired items late (up to
// days; DynamoDB Local never), so no decision here reads `ttl`; staleness is
// always computed from leaseExpiresAt and the clock.
//
// It does not acquire leases (gate) or complete records (mutation). The
// sweeper that surfaces long-expired leases builds on Policy and Renewer.
package stale
