package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/telemetry"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
		err      string
	}{
		{name: "off without an endpoint", env: map[string]string{"OTEL_SERVICE_NAME": "s"}},
		{name: "the base endpoint gets /v1/traces", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"},
			on: true, endpoint: "http://127.0.0.1:4318/v1/traces"},
		{name: "the traces endpoint as it is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:443/custom"}, on: true, endpoint: "https://b:443/custom"},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "exporter otlp", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true, endpoint: "http://a:4318/v1/traces"},
		{name: "another exporter is an error", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			err: "OTEL_TRACES_EXPORTER=zipkin"},
		{name: "gRPC is an error", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, endpoint: "http://a:4318/v1/traces"},
		{name: "not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "a:4318"}, err: "http:// or https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			tr, err := telemetry.FromEnv(context.Background(), lookup, "svc", "1.0")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.on, tr.On())
			if !tc.on {
				require.NotEmpty(t, tr.Why)
				require.NoError(t, tr.Flush(context.Background()), "off: nothing to flush")
				return
			}
			require.Equal(t, tc.endpoint, tr.Endpoint)
			require.NoError(t, tr.Shutdown(time.Second), "nothing buffered, nothing sent")
		})
	}
}
