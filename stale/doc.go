// Package stale owns lease time in the inbox: the lease policy (Policy:
// how long a lease lasts, the clock-skew margin, when a PROCESSING
// record's lease counts as expired and may be taken over — Expired and
// StaleBefore, the bound conditions compare leaseExpiresAt with — how long
// one still has, when a holder should renew), lease renewal (Renewer: the
// heartbeat's fenced UpdateItem), and the sweeper (Sweeper) that finds
// PROCESSING records whose lease expired or was given back with no
// delivery taking them over (through the attention index, or by a scan),
// reports them, and marks those past SweepConfig.Grace FAILED_TERMINAL
// LEASE_ABANDONED, fenced, with its figures (SweepConfig.Metrics).
//
// It does not own the TTL of records: how long each status lives is
// inbox.TTL, part of inbox.Store. TTL is garbage collection only (DynamoDB
// deletes expired items late, DynamoDB Local never), so no decision here
// reads `ttl`; an expired lease is always computed from leaseExpiresAt and
// the clock.
//
// It does not acquire leases (gate) or complete records (mutation), and
// the transitions it sends (Renew, End) are built in inbox.
package stale
