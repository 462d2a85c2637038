// Package spans names what ddbworker's spans record, per the
// OpenTelemetry messaging semantic conventions (package tracing says which
// version): the consumer and send span names (SpanProcess, SpanSend), the
// consumer span's children one per pipeline stage, and ddbworker's own
// span attributes under ddbworker.*. The names are the engine's (the
// worker and the relay write them); docs/operate.md lists them for a
// reader of traces.
package spans
