// Package ddbproxy is an HTTP fault proxy to put in front of DynamoDB Local.
// Tests, the chaos run and the benchmark point a real AWS SDK DynamoDB client
// (or a whole ddbworker process, through AWS_ENDPOINT_URL_DYNAMODB) at
// Proxy.URL; the proxy forwards every request to the real endpoint in
// Config.Target, or, while a fault Mode is set, answers the way AWS DynamoDB
// answers when it is sick:
//
//   - Pass forwards the request and its answer unchanged: method, path,
//     headers (the SigV4 Authorization and the Host it signed included), body,
//     status, response headers (x-amz-crc32 included) and response body. Only
//     hop-by-hop headers such as Connection are dropped, as by any HTTP proxy.
//   - Throttle answers 400 ProvisionedThroughputExceededException for the
//     data-plane operations (item reads and writes, queries, scans, batches,
//     transactions, PartiQL) and 400 ThrottlingException for the control plane
//     (DescribeTable, CreateTable, UpdateTimeToLive, …). Nothing is forwarded.
//   - ServerError answers 500 InternalServerError and 503
//     ServiceUnavailableException in turn. Nothing is forwarded.
//   - Hang reads the request, then holds it without answering until the client
//     gives up (then it is dropped), Config.HangFor passes or the mode leaves
//     Hang (then it is forwarded late, as a stalled server would apply it).
//
// In Pass, SetThrottleFraction throttles a share of the requests at random
// (seeded: Config.Seed), as a table that throttles part of its traffic
// does; the benchmark's throttled scenario uses it.
//
// The error answers carry AWS's JSON error bodies, Content-Type, request id
// and CRC32 headers, so the SDK's own deserializers, retryer and error types
// handle them exactly as they would handle AWS's: a throttled PutItem fails
// with *types.ProvisionedThroughputExceededException after the standard
// retryer has retried it, a 500 ends as a *smithyhttp.ResponseError with that
// status. That is the difference from internal/faults, which injects errors
// as SDK middleware inside one client: the proxy acts on the wire, so it
// exercises the SDK's real deserialization, retry and timeout paths, and it
// can stand in front of a process whose client a test cannot reach.
//
// The package does not imitate DynamoDB: it holds no items, evaluates no
// conditions and never invents a success. It does not lose a response after
// the upstream applied a request (internal/faults' AfterApply does that), and
// it only listens on loopback addresses.
package ddbproxy
