// Package bench measures ddbworker against the floor: for each worker —
// the naive baseline (UpdateItem then DeleteMessage, no inbox), ddbworker's
// default path (gate + transactional commit) and its fused commit — it runs
// the same message set at the same concurrency twice: once through the
// worker and once through a bare loop that issues exactly the DynamoDB and
// SQS calls that worker needs per message, prepared in advance, with no
// worker around them (the ceiling). It reports throughput, efficiency
// (worker ÷ ceiling), latency, CPU and memory per message, calls per fresh
// and per duplicate message counted by SDK middleware, and WCU both as
// DynamoDB Local reports it and computed in AWS terms from item sizes.
//
// It runs against whatever endpoints it is given (the local emulators in
// `ddbworker bench`); it owns no protocol logic.
package bench
