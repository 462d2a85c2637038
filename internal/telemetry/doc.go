// Package telemetry owns the trace export of ddbworker's own binaries —
// the daemon's run and relay commands and the Lambda adapters — configured
// from the standard OpenTelemetry variables: an OTLP/HTTP (protobuf)
// exporter behind a batch span processor, the sampler of
// OTEL_TRACES_SAMPLER, the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. Off unless an OTLP endpoint is configured.
//
// It returns the provider for the caller to pass on (worker.Deps, relay.Deps):
// it never sets OpenTelemetry's global provider. A library user configures
// its own provider instead and passes it the same way.
package telemetry
