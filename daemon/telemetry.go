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
// inside a span carries its trace and span ids; stop flushes what is
// buffered and ends the export (the caller defers it).
func (g *globals) traceExport(ctx context.Context, log *slog.Logger) (t telemetry.Tracing, _ *slog.Logger, stop func(), err error) {
	t, err = telemetry.FromEnv(ctx, os.LookupEnv, g.app.name(), g.app.version())
	if err != nil {
		return t, log, func() {}, err
	}
	if !t.On() {
		log.Debug("tracing off", "why", t.Why)
		return t, log, func() {}, nil
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing on: spans exported over OTLP/HTTP", "endpoint", t.Endpoint)
	return t, log, func() {
		if err := t.Shutdown(traceShutdownTimeout); err != nil {
			log.Warn("tracing: the last spans were not exported", "error", err.Error())
		}
	}, nil
}

// traceShutdownTimeout bounds the last flush of spans at exit.
const traceShutdownTimeout = 5 * time.Second
