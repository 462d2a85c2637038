// Package outbox owns the producer side of the DynamoDB-native
// transactional outbox: the outbox record's shape and keys, and the helper
// that turns an envelope into ONE types.TransactWriteItem — a conditional
// Put of a PENDING outbox record — that a producer adds to the
// TransactWriteItems changing its own state, so the state change and the
// message commit together or not at all.
//
// # The record
//
//	PK  = OUTBOX#<aggregateType>#<aggregateId>
//	SK  = EVENT#<sequence>#<eventId>
//	status = PENDING (a relay sets PUBLISHED, publishedAt and the TTL;
//	         with Config.PendingTTL a record has a TTL from its write on)
//	eventId, aggregateType, aggregateId, messageType, body (the encoded
//	envelope), destination (optional queue URL), createdAt,
//	traceparent and tracestate (the producer's trace context, optional)
//	GSI2PK = OUTBOX#PENDING#<shard>, GSI2SK = createdAt  (removed on publish)
//
// One aggregate's records share a partition key, so a stream delivers them
// in write order (see relay) and a Query reads them in sequence order. The
// sequence is the envelope's aggregateVersion, zero-padded ("V" + 20
// digits), or, without one, its occurredAt in nanoseconds ("T" + 20
// digits); Event.Sequence overrides both. The event id is the envelope's
// messageId; the Put's condition attribute_not_exists(PK) makes a second
// write of the same event fail the producer's transaction.
//
// While PENDING, a record sits in the table's sparse attention index (the
// inbox's, under partitions of its own), so the relay's sweep finds records
// the stream can no longer deliver (retention is 24 hours) without a scan;
// the relay's mark removes it from the index.
//
// It does not read the stream, send to SQS or mark records: package relay
// does. It does not build or send envelopes for producers that do not use
// an outbox (the producer helper does).
package outbox
