// Package relay owns the outbox relay: it publishes the outbox records
// that producers wrote (package outbox) to SQS and marks them PUBLISHED.
//
// Three entry points share one publishing step (Publish):
//
//   - Run reads the table's DynamoDB Stream (DescribeStream,
//     GetShardIterator, GetRecords): one lease per shard in the table
//     (owner, token, expiry; an expired lease is taken over), parents read
//     to their end before their children, TRIM_HORIZON on the first start,
//     then a checkpoint (the sequence number) per page, written fenced on
//     the lease token. Expired iterators are renewed from the checkpoint; a
//     checkpoint older than the stream's retention sweeps (the gap is
//     PENDING in the table), then restarts at TRIM_HORIZON.
//   - Sweep finds PENDING records older than SweepAge in the sparse
//     attention index, for records the stream can no longer deliver.
//   - HandleStreamEvent is the Lambda handler of stream events (their
//     records as the Streams API's; package lambda converts the runtime's
//     event), reporting the first unpublished record's sequence number in
//     batchItemFailures.
//
// Publish re-reads the records' status (strongly consistent BatchGetItem)
// and skips those no longer PENDING, sends the rest with SendMessageBatch
// (10 per call and 256 KiB, by package internal/sqsbatch's rule, a larger
// record alone, per-entry failures retried; every message carries
// ddbworker.firstSentAt, the record's createdAt, for the worker's
// replay-window check, and the producer's trace context the record keeps
// as traceparent/tracestate (with Deps.TracerProvider each call is a send
// <queue> span linked to those producers, whose context a record that kept
// none gets); on a FIFO queue the aggregate id is the MessageGroupId, the
// event id the deduplication id, one record per group per call and a group
// stops at its first failure), then marks
// each PUBLISHED with an UpdateItem fenced on status = PENDING that sets
// the TTL and removes the record from the index; a page is checkpointed
// only after. A crash between send and mark sends again — the consumer's
// gate absorbs the duplicate — and never loses a record.
//
// # Ordering
//
// AWS documents that a stream's records for one item appear in the order
// of the item's modifications, and that a shard's children follow it. The
// relay relies, beyond that, on all items of one partition key — one
// aggregate's outbox records — being written to one shard lineage in
// commit order (a stream shard belongs to one table partition; a partition
// split closes the shard and opens children, read after it). Within a
// page, an aggregate's records go in sort-key order.
//
// It does not write outbox records (package outbox), create the table or
// its stream (package tables), or consume the queue (package worker).
package relay
