// Package attr names the attributes of the records ddbworker writes in an
// application's table: inbox records (read and written by inbox, gate,
// mutation and stale), effect records (effects), outbox records and the
// relay's shard leases (outbox, relay). The names are fixed — only the key,
// index and TTL attributes are the Layout's (package tables) — so they are
// the engine's, not a team's: a handler never names them.
package attr
