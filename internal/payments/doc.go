// Package payments is a local HTTP double of an outside payment provider
// for the effect log's tests — it stands for a provider, not for DynamoDB
// or SQS — and the client a test handler calls it with. The double counts
// calls per idempotency key, performs charges, and can answer slowly,
// decline, fail after charging or drop the response. It listens on
// 127.0.0.1 only. It owns nothing of ddbworker.
//
//	POST /charges   idempotent: a key it has seen gets the same charge again
//	POST /sends     not idempotent: every call performs a new effect
//	GET  /tally     the counts as JSON (for a test's child processes)
//
// Both POSTs read the key from the Idempotency-Key header.
package payments
