// Package producer owns the sending side of ddbworker's envelope contract
// for Go producers: it builds envelopes (a new messageId on every send,
// occurredAt with its offset, the producer's name, schema version 1),
// validates each body with the same decoder the worker runs, and sends
// them to SQS in batches (SendMessageBatch: at most 10 entries and
// Config.MaxBatchBytes per call, by package internal/sqsbatch's rule, a
// larger message alone), FIFO aware (MessageGroupId = aggregateId by
// default, MessageDeduplicationId from the idempotency key and the request
// hash), tenant aware on standard queues (a message's tenant —
// Message.Tenant or Config.Tenant — is its MessageGroupId, which makes the
// queue an SQS fair queue), retrying entries SQS failed on its side and
// returning every other
// failure per message as a typed *EntryError — never a silent drop. Payloads above
// Config.OffloadAbove go to an Offloader (S3) and travel as a payloadRef.
// Every message carries the trace context of the ctx it was sent with as
// traceparent and tracestate message attributes (tracing.Inject): the
// worker's consumer span links to it.
//
// It does not own: the envelope format, its validation or the request hash
// (package envelope), storing payloads in S3 (an Offloader implementation),
// the transactional outbox and its relay (package outbox), or anything the
// consumer does. Producers in other languages follow docs/producers.md and
// the JSON Schema (envelope.Schema) instead.
package producer
