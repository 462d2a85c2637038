// Package metricstest is a metrics.Provider that keeps its figures in
// memory for tests to read by metric name and label values: what the
// daemon would export, without a Prometheus registry.
package metricstest
