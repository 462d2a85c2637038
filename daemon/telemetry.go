package daemon

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/ddbworker/ddbworker/internal/telemetry"
	"github.com/ddbworker/ddbworker/tracing"
)

// traceExport starts the trace export of run and relay from the standard
// OTEL_* variables (internal/telemetry: OTLP/HTTP, off unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set) and, when it is on, returns log wrapped so that every line written
// inside a span carries its trace and span ids. The caller shuts the
// export down when it returns (flushing what is buffered).
func (g *globals) traceExport(ctx context.Context, log *slog.Logger) (telemetry.Tracing, *slog.Logger, error) {
	t, err := telemetry.FromEnv(ctx, os.LookupEnv, g.app.name(), g.app.version())
	if err != nil {
		return t, log, err
	}
	if !t.On() {
		log.Debug("tracing off", "why", t.Why)
		return t, log, nil
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing on: spans exported over OTLP/HTTP", "endpoint", t.Endpoint)
	return t, log, nil
}

// traceShutdownTimeout bounds the last flush of spans at exit.
const traceShutdownTimeout = 5 * time.Second
