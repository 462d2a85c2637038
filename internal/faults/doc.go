// Package faults injects the failures the emulators never produce —
// throttling, TransactionConflict, timeouts before a request is sent,
// responses lost after the server applied a request, delays — and counts
// calls, all as AWS SDK middleware on real clients. Tests, the benchmark and
// the chaos run use it; nothing here imitates DynamoDB or SQS semantics: a
// request either reaches the real emulator or fails the way the network or
// AWS would have failed it.
package faults
