// Package dev holds ddbworker's development tooling, apart from what
// ships: the local emulators (emulators), per-test tables and queues
// (testenv), SDK fault injection (faults), the DynamoDB fault proxy
// (ddbproxy), and the chaos and benchmark harnesses (chaos, bench). No
// package outside internal/dev, and nothing a team's binary or the
// production ddbworker links, imports them; the machinery the engine ships
// with (internal/health, internal/adaptive, internal/slots, internal/hooks)
// lives beside this folder, not in it.
package dev
