// Package daemon is ddbworker's command line as a library: a team's
// binary is daemon.Main(daemon.App{…}) with its handlers. It owns what
// ships in such a binary: run (the worker, with its startup checks, signals
// and drain, exit codes, Prometheus metrics and /healthz /readyz, trace
// export from the OTEL_* variables — run's and relay's), tables create and
// tables adopt (the plan of tables.Plan printed for people or as JSON,
// applied with progress lines, blockers named by their flags; both record
// the inbox store's settings in the table), queues create, inbox, dlq,
// sweep, relay, effects and envelope; the DDBWORKER_* environment binding
// of every flag, each flag that sets a library setting defaulting to that
// library's DefaultX constant (none restates one: defaults_test.go); and
// the merging of explicit inbox flags with the settings and layout the
// table records (inbox.ReadRecorded).
//
// The development tools (demo, bench, chaos, send, emulators, faultproxy,
// and the fault-injection flags of run and relay) are not here: they are
// internal/dev/devcmd's, added by internal/dev/cmd/ddbworker-dev through
// App.Extension, which no code outside this module can set. This package
// imports nothing under internal/dev/ or example/.
package daemon
