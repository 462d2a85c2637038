// Package testenv gives each test its own table and queues on the local
// emulators, through the real AWS SDK, and removes them afterwards.
//
// A test binary's TestMain calls Main. When AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS are set (as `make test` does, through
// `ddbworker-dev emulators exec`), the tests use those emulators; otherwise
// Main starts a private pair for the binary with the public helper,
// package ddbworkertest/emulators, which owns installing, finding and
// running them. Every endpoint must be a loopback address. This package
// owns what only ddbworker's own tests need on top: the shared pair behind
// Main, the per-test table and queues with their cleanup (New), fauxqs's
// queue inspection, S3 faults, Python, the fake clock.
//
// Protocol tests get everything that talks to the emulators from here — New,
// NewAppTable (an application's table that predates ddbworker, with its own
// keys, indexes, TTL and items), AWSConfig, Endpoints, InspectQueue, S3 and
// buckets, SNS and topics a queue is subscribed to (fauxqs's SNS, with raw
// message delivery on or off) — and so skip, with one line that says what
// to install, when the emulators' runtimes are missing (plain `go test` on
// a machine without Java 17 and Node.js 22): the
// pure-logic tests of the same package still run. With
// DDBWORKER_REQUIRE_EMULATORS=1 a missing emulator is a failure, never a
// skip; an install that fails or emulators that do not start are always
// one.
// The tools other tests need — a Python with boto3 (Python), Prometheus's
// promtool (Promtool) — follow the same rule.
package testenv
