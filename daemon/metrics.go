package daemon

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ddbworker/ddbworker/relay"
	"github.com/ddbworker/ddbworker/worker"
)

// The collectors each command serves on --metrics-addr, registered in one
// place so that the shipped dashboards and alert rules (deploy/) can be
// checked against what the daemon exports: `run` serves registerRun's
// (with the queue depths of watchDepth, and whatever the handlers register
// on Env.Registerer, e.g. an effects.Log's), `relay` registerRelay's,
// `sweep --every` stale.NewSweepMetrics'.

// registerRun registers `run`'s collectors with reg: the Go and process
// collectors, the worker's metrics and build_info.
func registerRun(reg prometheus.Registerer, app App) (*worker.Metrics, error) {
	metrics, err := worker.NewMetrics(reg)
	return metrics, errors.Join(err, registerProcess(reg, app))
}

// registerRelay registers `relay`'s collectors with reg: the Go and
// process collectors, the relay's metrics and build_info.
func registerRelay(reg prometheus.Registerer, app App) (*relay.Metrics, error) {
	metrics, err := relay.NewMetrics(reg)
	return metrics, errors.Join(err, registerProcess(reg, app))
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
