// Package prommetrics is metrics.Provider over a Prometheus registry: the
// daemon serves its registry on /metrics, the Lambda adapter gathers its
// own into EMF lines (internal/emf). The core packages never import it,
// so the library carries no Prometheus dependency; only the hosts do.
package prommetrics
