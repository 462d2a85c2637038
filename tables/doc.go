// Package tables owns the single-table layout of ddbworker: the attribute
// names every other package uses, the table and index definitions (primary
// key PK/SK, the aggregate index, the sparse attention index, TTL on `ttl`,
// on-demand billing), and Ensure, which creates the table idempotently, waits
// until it is ACTIVE and turns TTL on.
//
// It does not read or write items: the inbox record's shape lives in package
// inbox, the writes in gate, mutation and stale.
package tables
