// Package ddbworker is the front door for handler authors: everything a
// handler needs is here, in one import.
//
//   - Register typed handlers by message type (Registry, JSON), and choose
//     per route how its work commits: the default (the gate's PutItem,
//     then the writes with the inbox flip), Fused (the inbox record
//     written COMPLETED inside the handler's transaction) or SingleWrite
//     (one version-guarded item write that records the work in the item,
//     FenceKeyAttr, FenceTypeAttr and FenceHashAttr, and no inbox record).
//   - Read the message (Message: the envelope's fields, the attempt, the SQS
//     delivery).
//   - Build guarded writes without touching DynamoDB's attribute values:
//     Update, Put, Delete and Check take plain Go keys and values (Key,
//     Item), and each carries guards — MustExist, CreateOnly, NewerVersion,
//     NewerThan, ExpectVersion, Equal — with the policy that applies when the guard
//     fails: fail for good with a code, complete as superseded, or re-run
//     the handler. This is the one write API: the engine renders a write,
//     through feature/dynamodb/expression, as its transaction item and the
//     judge of its guards, which reads the item as it was by DynamoDB's
//     rules (internal/writes; no engine type shows here).
//   - Return typed failures (Retryable, Terminal, IsTerminal).
//   - Read messages a team already sends, per route (Adapt with a
//     BodyAdapter: SNS, EventBridge, JSONBody): an SNS notification, an
//     EventBridge event or a service's own JSON becomes the envelope the
//     handler sees, its idempotency key, type and aggregate taken by
//     JMESPath expressions; the Registry keeps the adapted routes in
//     registration order, the order in which a body is offered to them,
//     and refuses one an earlier route would always take first.
//   - Wrap handlers with cross-cutting code (Middleware): once for every
//     route (Registry.Use) or for one (With); the worker runs the chain
//     inside the message's consumer span, with the handler's context and
//     message, and so does the test kit.
//
// A handler never writes by itself: it returns its writes in a Result, and
// the worker commits them together with the inbox record's PROCESSING →
// COMPLETED flip in one DynamoDB transaction, fenced by the lease (on a
// single-write route, the one write carries the work's fence instead) — so
// each work item's effect applies exactly once, or not at all.
//
// This package does not run anything: the worker (package worker), the
// daemon (package daemon) and the Lambda adapter (package lambda) do, and
// package ddbworkertest runs a handler in an ordinary unit test. The
// protocol's building blocks (envelope, gate, mutation, stale, tables,
// inbox, failure) stay available for those who build their own engine.
package ddbworker
