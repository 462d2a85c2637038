// Package spanrec is an in-memory OpenTelemetry tracer provider for the
// core's tests, written against the trace API alone: it samples and
// records every span and keeps the ended ones, as the SDK with a
// tracetest.SpanRecorder does, so that the core module's go.mod needs no
// OpenTelemetry SDK. Status and attributes follow the SDK's rules (a
// status only rises, Unset < Error < Ok; the last value of a key wins).
package spanrec
