// Package tables owns the single-table layout of ddbworker: the attribute
// names every other package uses, the table and index definitions (primary
// key PK/SK, the aggregate index, the sparse attention index, TTL on `ttl`,
// on-demand billing), Ensure, which creates the table idempotently, waits
// until it is ACTIVE and turns TTL on, and EnableStream, which turns on the
// NEW_IMAGE stream the outbox relay reads. The attribute names of the other
// records that share the table — outbox records and shard leases
// (outbox.go), effect records (effects.go) — are here too.
//
// It does not read or write items: the inbox record's shape lives in package
// inbox, the writes in gate, mutation and stale; outbox records in outbox and
// relay; effect records in effects.
package tables
