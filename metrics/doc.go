// Package metrics owns the instruments ddbworker reports through, and no
// implementation of a backend: the worker, the relay, the sweeper and the
// effect log declare their counters, gauges and histograms on a Provider,
// and whoever hosts them chooses where the figures go — the daemon serves
// them as Prometheus metrics on /metrics, the Lambda adapter writes them
// as CloudWatch EMF lines. Without a Provider nothing is reported
// (Discard).
//
// A name is the full metric name (ddbworker_messages_total), the help
// text says what is counted, and the label names are fixed when the
// instrument is declared; the label values passed to WithLabelValues, in
// the same order, are bounded by the caller (registered message types,
// failure codes, fixed words — never keys). Declaring an instrument twice
// on one Provider with the same name, help and labels yields the same
// instrument (a second effects.Log shares the first one's counts).
package metrics
