// Package effects owns the external-effect log (DESIGN §9, the reference
// text's §17): the record a handler keeps of each call it makes to an
// outside provider — a payment, an e-mail, another company's API — that no
// DynamoDB transaction can include.
//
// A handler calls Log.Do around the provider call. Do reads the log first;
// records the effect (its key, provider, operation, request hash, status
// STARTED, the call counted) before the call, fenced on the work's inbox
// lease; passes the effect key to the provider as its idempotency key; and
// makes the provider's reference durable the moment the call returns (a
// fenced STARTED → COMPLETED UpdateItem). The handler adds Effect.Write to
// its ddbworker.Result, so the effect is tied to the work in the same
// TransactWriteItems as the domain writes and the inbox flip (and, if the
// immediate completion write could not be made, that transaction carries
// the completion itself). On a retry Do answers from the log: an effect
// already COMPLETED or FAILED is never called again.
//
// Statuses:
//
//	(none)   → STARTED     Do claims the effect, then calls the provider
//	STARTED  → COMPLETED   the provider answered with a reference
//	STARTED  → FAILED      the provider refused for good (Refused: a decline)
//	STARTED  → NOT_DONE    the provider certainly did nothing (NotDone)
//	STARTED  → STARTED     idempotent provider, outcome unclear: call again,
//	                       same key, on the next attempt
//	STARTED  → UNKNOWN     provider without idempotency keys, outcome unclear
//	                       (an error after sending, or a crash): never called
//	                       again until an operator resolves it
//	UNKNOWN  → COMPLETED   Resolve: the operator found the provider's record
//	UNKNOWN  → NOT_DONE    Resolve: the operator found it was not done
//	NOT_DONE → STARTED     the next attempt calls again (same key)
//
// It also owns the effect record's keys (Key, HashedKey) and request hash
// (requestHash), the Log's metrics (ddbworker_effect_*: calls, answers from
// the log, UNKNOWN effects, request mismatches, deferred completions, call
// durations), and the operator's side: Admin (Get, List, Resolve), on which
// the commands `ddbworker effects list|get|resolve` (package daemon) are
// built.
//
// The package does not run handlers, commit transactions (package mutation
// and the worker do) or talk to any provider itself: the handler's function
// makes the call.
package effects
