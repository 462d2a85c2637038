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
// AWSConfig, Endpoints, InspectQueue — and so skip, with one line that says
// what to install, when the emulators' runtimes are missing (plain `go test`
// on a machine without Java 17 and Node.js 22): the pure-logic tests of the
// same package still run. With DDBWORKER_REQUIRE_EMULATORS=1 a missing
// emulator is a failure, never a skip; an install that fails or emulators
// that do not start are always one.
package testenv
