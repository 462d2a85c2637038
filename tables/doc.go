// Package tables owns the single-table layout of ddbworker and the table's
// shape: the attribute names every other package uses (Layout, with the
// defaults PK/SK, GSI1, GSI2, ttl), the table and index definitions
// (Definition: on-demand, both indexes KEYS_ONLY), the one rule of what
// fits a layout (Verify, which `run` checks at start: the key, both indexes
// with their keys and any projection, string key attributes, TTL on the
// layout's attribute), and the three ways a table comes to fit it:
//
//   - Ensure creates a missing table idempotently, waits until it is ACTIVE
//     and turns TTL on, or checks an existing one;
//   - Plan and Adopt (adopt.go) make an existing application table fit,
//     decide then apply: Plan reads the table and returns an AdoptPlan — the
//     missing indexes, TTL and stream, in order, what stays, warnings, and
//     the blockers (*AdoptError, joined) that nothing can change, such as
//     the table's key or a TTL attribute of its own the layout must name;
//     Adopt applies it, one UpdateTable per index, polling each backfill
//     with progress, bounded by its wait;
//   - EnableStream turns on the NEW_IMAGE stream the outbox relay reads.
//
// Their waits default to DefaultWaitTimeout (a table becoming ACTIVE) and
// DefaultAdoptWait (each change of an adoption), which the daemon's --wait
// flags read. ItemSize is an item's size as DynamoDB counts it.
//
// The fixed attribute names of the records in the table (inbox, effect and
// outbox records, shard leases) are the engine's: internal/attr.
//
// It does not read or write items: the inbox record's shape and the
// settings item the table records live in package inbox, the writes in
// gate, mutation and stale; outbox records in outbox and relay; effect
// records in effects.
package tables
