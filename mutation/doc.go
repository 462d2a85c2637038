// Package mutation owns the commit (DESIGN §4.4): a handler's domain writes
// and the inbox flip PROCESSING → COMPLETED in one TransactWriteItems,
// fenced by the lease token and made retry-safe by a ClientRequestToken
// derived from (key, type, token, commit attempt); the fused commit that
// writes the inbox record COMPLETED in the same transaction; the mapping of
// cancellation reasons, by index, to lease lost, a domain guard's policy
// (superseded, retry, terminal) or a retryable failure; the fenced
// transitions that end a lease without domain writes (superseded, failed;
// the transitions themselves are built in inbox);
// and the builders and condition helpers handlers use for their writes
// (must-exist and create-only on the caller's key attribute, newer-version,
// expect-version), all through
// feature/dynamodb/expression.
//
// It does not decide whether a delivery may run (gate), renew leases
// (stale), or touch SQS (worker).
package mutation
