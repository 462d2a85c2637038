// Package testenv gives each test its own table and queues on the local
// emulators, through the real AWS SDK, and removes them afterwards.
//
// A test binary's TestMain calls Main. When AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS are set (as `make test` does, through
// `ddbworker emulators exec`), the tests use those emulators; otherwise Main
// starts a private pair for the binary. Either way a missing emulator is a
// failure, never a skip, and every endpoint must be a loopback address.
package testenv
