package tables

// Outbox record attribute names (fixed; see package outbox). An outbox
// record also uses AttrStatus (PENDING, PUBLISHED), AttrMessageType,
// AttrAggregateType and AttrAggregateID, and the layout's key, attention
// index and TTL attributes.
const (
	// AttrOutboxEventID is the event's id (the envelope's messageId).
	AttrOutboxEventID = "eventId"
	// AttrOutboxBody is the encoded envelope, sent as the message body.
	AttrOutboxBody = "body"
	// AttrOutboxDestination is the queue URL the record goes to; absent:
	// the relay's default queue.
	AttrOutboxDestination = "destination"
	// AttrOutboxCreatedAt is when the producer wrote the record (RFC 3339,
	// UTC, milliseconds).
	AttrOutboxCreatedAt = "createdAt"
	// AttrOutboxPublishedAt is when a relay marked the record PUBLISHED.
	AttrOutboxPublishedAt = "publishedAt"
	// AttrOutboxSendCount counts the relays' marks (1 normally; a record
	// never gets a second mark: the mark is fenced on PENDING).
	AttrOutboxSendCount = "sends"
	// AttrOutboxTraceparent and AttrOutboxTracestate hold the W3C trace
	// context of the producer's span when it wrote the record; the relay
	// sends them as the message's traceparent and tracestate attributes,
	// so a trace crosses the producer's transaction.
	AttrOutboxTraceparent = "traceparent"
	AttrOutboxTracestate  = "tracestate"
	// AttrOutboxTenant is the message's tenant; the relay sends it as the
	// MessageGroupId on a standard queue (SQS fair queues). Absent: none.
	AttrOutboxTenant = "tenant"
)

// Relay shard lease attribute names (fixed; see package relay). A lease
// item also uses AttrLeaseOwner, AttrLeaseToken and AttrLeaseExpiresAt.
const (
	// AttrRelayStreamARN is the stream the shard belongs to.
	AttrRelayStreamARN = "streamArn"
	// AttrRelayShardID is the shard's id.
	AttrRelayShardID = "shardId"
	// AttrRelayCheckpoint is the sequence number of the last stream record
	// whose outbox record was published (or skipped).
	AttrRelayCheckpoint = "checkpoint"
	// AttrRelayShardEnded is true once the shard was read to its end.
	AttrRelayShardEnded = "shardEnded"
	// AttrRelayUpdatedAt is when the lease item was last written.
	AttrRelayUpdatedAt = "updatedAt"
)
