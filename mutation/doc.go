// Package mutation is the commit engine (DESIGN §4.4). It owns:
//
//   - the commit: a handler's rendered domain writes and the inbox flip
//     PROCESSING → COMPLETED in one TransactWriteItems, fenced by the lease
//     token and made retry-safe by a ClientRequestToken derived from (key,
//     type, token, commit attempt), after the writes pass the commit's own
//     check (CheckWrites: at most MaxWrites, one action each);
//   - the fused commit, which writes the inbox record COMPLETED in that
//     same transaction instead of flipping one;
//   - the single-write commit (fence.go): one version-guarded write
//     stamped with the work's key and request hash (Fenced), applied alone
//     with one conditional UpdateItem or PutItem (CommitSingle), the item
//     as it was judging duplicate, mismatch or superseded;
//   - the fenced settle writes that end a lease or a fused run without
//     domain writes: Fail, Release, Supersede, End, Reject, and the fused
//     run's first record (FailFresh, SupersedeFresh) — the transitions
//     themselves are built in inbox;
//   - the mapping of a cancelled transaction's reasons, by index, to lease
//     lost, a domain guard's verdict (*GuardError: the failed write's
//     Judge on the item as it was, or Retry when it finds no failing guard
//     or the write has none), or a retryable or terminal failure.
//
// Write (a types.TransactWriteItem and its Judge), Verdict and VerdictKind
// are the engine's representation of one rendered domain write; it has no
// builders: handlers build their writes with package ddbworker (Update,
// Put, Delete, Check and their guards), which the engine renders through
// internal/writes; the engine's own hand-built writes (effects' Write) go
// through it too (writes.Raw).
//
// It does not decide whether a delivery may run (gate), what a run came to
// (internal/judge), renew leases (stale), or touch SQS (worker).
package mutation
