// Package logevent names the worker's delivery log lines: the message
// (msg) of the one JSON line each delivery logs, by outcome (the worker's
// LogEvent maps an outcome to its name). The names are the engine's; a
// log query reads them as strings (docs/operate.md).
package logevent
