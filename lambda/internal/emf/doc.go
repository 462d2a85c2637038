// Package emf writes what changed in a Prometheus registry as CloudWatch
// Embedded Metric Format documents: the Lambda adapter's metrics, under
// the same names and label values as the daemon's /metrics, from the same
// collectors (the worker's instruments, internal/prommetrics, on a
// private registry).
//
// # What it owns
//
// The translation, and only it: a Reporter gathers its registry, keeps the
// last value of every series of the metrics it reports, and turns the
// difference into documents, one JSON object each (the caller writes them
// as lines where CloudWatch Logs reads them: a Lambda function's stdout).
// It does not own the metrics (package worker), where the lines go, nor
// when a report is made (package lambda: at the end of each invocation).
//
// # The translation
//
//   - A counter is reported as its increase since the last report, when
//     it increased (unit Count).
//   - A histogram is reported as its new observations, as an array of
//     values: one per observation, each its bucket's upper bound (the
//     largest finite bound for the +Inf bucket), or the exact value when
//     the series has only one new observation (its sum's increase).
//     CloudWatch computes percentiles from the values: at the buckets'
//     resolution, as upper bounds, like histogram_quantile without the
//     interpolation. (EMF's metric values are numbers or arrays of at most
//     100 numbers; it has no Values/Counts pairs, so an observation counted
//     n times is n values.)
//   - A gauge is reported as its value, in every report that reports
//     anything.
//   - A report reports nothing — no document — when no counter increased,
//     no histogram observed and no gauge changed since the last one.
//
// A series' labels are its dimensions, with the Reporter's fixed ones
// (function and queue names) first; a label with an empty value is no
// dimension, as in Prometheus. EMF puts dimension values at the document's
// root, so a document holds one label set: a report is one document per
// label set that changed (for the worker: one per message type and outcome
// seen, one per message type for latency, one for the rest), and more when
// one would exceed EMF's limits — 100 metrics per document, 100 values per
// array, 30 dimensions.
package emf
