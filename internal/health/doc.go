// Package health owns the detector that says when DynamoDB is unhealthy for
// this worker, and the schedule of the probes that say when it is healthy
// again.
//
// The detector watches the outcomes of the worker's own DynamoDB calls in a
// sliding window: it trips when the window holds at least MinFailures
// infrastructure failures (throttling, 5xx, timeouts, connection errors —
// the caller decides what counts) and they are at least FailureRatio of the
// calls in it. A minimum count keeps one unlucky call from pausing a quiet
// worker; a ratio keeps a busy worker from pausing for a handful of
// throttles among thousands of good calls. While the window holds fewer
// than twice MinFailures calls it also trips on Consecutive failures in a
// row: a worker whose calls hang makes few calls (each waits for its
// timeout, and its concurrency limit has shrunk), too few to fill the
// window.
//
// It does not pause anything itself, nor decide what a failure is: the
// worker feeds it, stops receiving when it trips, and probes on the
// schedule until the probes succeed.
package health
