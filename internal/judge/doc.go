// Package judge owns what one handler run came to: from the handler's
// error, or the commit's when its transaction was cancelled by a domain
// guard, whether the work applied, is superseded, must run the handler
// again, or failed — and, for a failure, whether it is infrastructure
// trouble (no business attempt) or a business failure the attempts policy
// may end. The worker's run and record stages decide with it, and so does
// the test kit (ddbworkertest), so a handler's unit test sees the worker's
// own judgement, not a copy of it.
//
// It is pure: it makes no call and knows nothing of leases, records or
// SQS.
package judge
