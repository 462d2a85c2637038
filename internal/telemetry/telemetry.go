package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The variables that decide whether traces are exported, and where.
const (
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvTracesExporter  = "OTEL_TRACES_EXPORTER"
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName     = "OTEL_SERVICE_NAME"
	EnvTracesSampler   = "OTEL_TRACES_SAMPLER"
	protocolHTTP       = "http/protobuf"
	tracesPath         = "/v1/traces"
	defaultServiceName = "ddbworker"
)

// Tracing is the export of one process: its provider and how to flush and
// end it. The zero value (Provider nil) is tracing off.
type Tracing struct {
	// Provider is nil when tracing is off.
	Provider *sdktrace.TracerProvider
	// Endpoint is where spans go ("" when off).
	Endpoint string
	// Why says why tracing is off ("" when on).
	Why string
}

// On reports whether spans are exported.
func (t Tracing) On() bool { return t.Provider != nil }

// Flush exports what is buffered, within ctx (under Lambda, at the end of
// each invocation: the environment may be frozen right after it).
func (t Tracing) Flush(ctx context.Context) error {
	if t.Provider == nil {
		return nil
	}
	return t.Provider.ForceFlush(ctx)
}

// Shutdown flushes and stops the export, within timeout.
func (t Tracing) Shutdown(timeout time.Duration) error {
	if t.Provider == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.Provider.Shutdown(ctx)
}

// FromEnv configures trace export from lookup's OTEL_* variables:
//
//   - off when OTEL_SDK_DISABLED is true, when OTEL_TRACES_EXPORTER is none,
//     and when neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as it is)
//     nor OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces) is set;
//   - an error for what this build cannot do: OTEL_TRACES_EXPORTER other
//     than otlp or none, an OTLP protocol other than http/protobuf (no
//     gRPC exporter is built in);
//   - otherwise OTLP/HTTP to that endpoint (otlphttp.go: not otlptracehttp,
//     which links gRPC); the exporter reads its headers, timeout,
//     compression and certificates from lookup's OTEL_EXPORTER_OTLP_* and
//     OTEL_EXPORTER_OTLP_TRACES_* variables (an error when one is not
//     valid), the sampler is OTEL_TRACES_SAMPLER's
//     (default parentbased_always_on), the batch processor OTEL_BSP_*'s;
//     the resource is service.name service (OTEL_SERVICE_NAME wins),
//     service.version version, extra, and OTEL_RESOURCE_ATTRIBUTES.
func FromEnv(ctx context.Context, lookup func(string) (string, bool), service, version string, extra ...attribute.KeyValue) (Tracing, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return Tracing{Why: EnvSDKDisabled + "=true"}, nil
	}
	switch e := strings.ToLower(get(EnvTracesExporter)); e {
	case "", "otlp":
	case "none":
		return Tracing{Why: EnvTracesExporter + "=none"}, nil
	default:
		return Tracing{}, fmt.Errorf("telemetry: %s=%s: this build exports traces with otlp only (or none)", EnvTracesExporter, e)
	}
	for _, k := range []string{EnvTracesProtocol, EnvProtocol} {
		if p := get(k); p != "" {
			if p != protocolHTTP {
				return Tracing{}, fmt.Errorf("telemetry: %s=%s: this build exports OTLP over %s only", k, p, protocolHTTP)
			}
			break
		}
	}
	endpoint := get(EnvTracesEndpoint)
	if endpoint == "" {
		if base := get(EnvEndpoint); base != "" {
			endpoint = strings.TrimRight(base, "/") + tracesPath
		}
	}
	if endpoint == "" {
		return Tracing{Why: "no " + EnvEndpoint + " or " + EnvTracesEndpoint}, nil
	}
	if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return Tracing{}, fmt.Errorf("telemetry: OTLP endpoint %q: an http:// or https:// URL is required", endpoint)
	}
	client, err := newHTTPClient(endpoint, get)
	if err != nil {
		return Tracing{}, err
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return Tracing{}, fmt.Errorf("telemetry: OTLP exporter to %s: %w", endpoint, err)
	}
	if service == "" {
		service = defaultServiceName
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(service)}, extra...)
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return Tracing{}, fmt.Errorf("telemetry: resource: %w", err)
	}
	if get(EnvServiceName) != "" && res != nil {
		// resource.WithFromEnv has read it from the process's environment;
		// a lookup other than the process's (tests) is honoured too.
		res, _ = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName(get(EnvServiceName))))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return Tracing{Provider: tp, Endpoint: endpoint}, nil
}
