// Package slots owns the worker's pool of in-flight slots and its receive
// policy: how many slots a poller takes before it asks SQS for a batch. The
// pool's limit can move at run time (the adaptive concurrency limit lowers
// and raises it); the worker and the benchmark's bare loops share the pool,
// so both make the same receive calls.
//
// It does not decide the limit (internal/adaptive does) nor whether to
// receive at all (the worker's database health gate does).
package slots
