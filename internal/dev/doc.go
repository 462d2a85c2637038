// Package dev holds ddbworker's development tooling, apart from what
// ships: the development binary's commands (devcmd: demo, bench, chaos,
// send, emulators, faultproxy, and the fault flags of run and relay), the
// Makefile's check of the emulators' runtimes (emulators/check; the
// emulators themselves are the public test helper, ddbworkertest/emulators),
// per-test tables and queues on a shared pair (testenv), SDK
// fault injection (faults), the DynamoDB fault proxy (ddbproxy), the
// chaos and benchmark harnesses (chaos, bench), and the test that builds
// and tests a service in a module of a team's own (adoption). Outside
// internal/dev only internal/dev/cmd/ddbworker-dev, the crash-test services the kill -9
// tests build, and tests import them: nothing a team's binary or the production ddbworker
// links does (cmd/ddbworker's TestProductionDependencies checks it). The
// machinery the engine ships with (internal/health, internal/adaptive,
// internal/slots, internal/hooks) and the seam the development binary
// plugs into (internal/daemonext) live beside this folder, not in it.
package dev
