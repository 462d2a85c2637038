package daemon

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ddbworker/ddbworker/internal/prommetrics"
)

// The collectors each command serves on --metrics-addr, registered in one
// place so that the shipped dashboards and alert rules (deploy/) can be
// checked against what the daemon exports: `run` serves registerRun's
// (with the queue depths of watchDepth, the worker's instruments, and
// whatever the handlers declare on Env.Metrics or register on
// Env.Registerer, e.g. an effects.Log's), `relay` registerRelay's (with
// the relay's instruments), `sweep --every` the sweeper's. The library
// declares its instruments through package metrics; prommetrics makes
// them Prometheus collectors on the command's registry.

// registerRun registers `run`'s collectors with reg — the Go and process
// collectors and build_info — and returns the Provider the worker and the
// handlers declare theirs on.
func registerRun(reg prometheus.Registerer, app App) (*prommetrics.Provider, error) {
	return prommetrics.New(reg), registerProcess(reg, app)
}

// registerRelay registers `relay`'s collectors with reg — the Go and
// process collectors and build_info — and returns the Provider the relay
// declares its instruments on.
func registerRelay(reg prometheus.Registerer, app App) (*prommetrics.Provider, error) {
	return prommetrics.New(reg), registerProcess(reg, app)
}

// registerProcess registers the Go and process collectors and build_info.
func registerProcess(reg prometheus.Registerer, app App) error {
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ddbworker", Name: "build_info",
		Help: "1, labelled with the service's name and version, the VCS revision and the Go version it was built with."},
		[]string{"service", "version", "revision", "goversion"})
	build.WithLabelValues(app.name(), app.version(), app.revision(), runtime.Version()).Set(1)
	return errors.Join(reg.Register(collectors.NewGoCollector()), reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
		reg.Register(build))
}

// newQueueDepth is the gauge watchDepth sets: SQS's approximate counts.
func newQueueDepth() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ddbworker", Name: "queue_messages",
		Help: "Approximate messages per queue (work, dlq) and state (visible, in_flight, delayed)."}, []string{"queue", "state"})
}
