// Package sqsbatch owns SQS's rule for batched sends and its count of a
// message's size, so that every package sizing SQS messages and batched
// calls applies one implementation: the producer, the relay and dlq's
// redrive size their SendMessageBatch calls with it, the worker sizes its
// DLQ copies (MessageSize, AttributeSize, MaxAttributes) and its
// DeleteMessageBatch calls (MaxEntries) by it:
//
//   - a call carries at most MaxEntries entries;
//   - a call carries at most a byte limit of payload: the sum of its
//     messages' sizes, each the body plus every message attribute's name,
//     data type and value (MessageSize) — SQS refuses a longer call as a
//     whole (BatchRequestTooLong), every time it is sent;
//   - the first entry of a batch is always admitted: an entry larger than
//     the byte limit goes alone, in its own call, and is never dropped. The
//     caller then gets SQS's own answer for it, or refuses it beforehand
//     with a typed error of its own when it is over the single-message
//     limit (MaxMessageBytes);
//   - entries keep their order.
//
// Limits.Fits is the rule for a caller that builds its batches itself
// (the producer skips entries of a FIFO group already in the batch);
// Split cuts a slice of entries of any type into consecutive batches.
//
// It is pure logic: it makes no call, knows no queue and decides nothing
// about what a caller does with an entry SQS refuses, nor which attributes
// a message carries or sheds when it would not fit (each caller's policy).
package sqsbatch
