package attr

// Inbox record attribute names (fixed).
const (
	Status         = "status"
	RequestHash    = "requestHash"
	MessageType    = "messageType"
	SchemaVersion  = "schemaVersion"
	AggregateType  = "aggregateType"
	AggregateID    = "aggregateId"
	CorrelationID  = "correlationId"
	CausationID    = "causationId"
	Producer       = "producer"
	IdempotencyKey = "idempotencyKey"
	FirstSeenAt    = "firstSeenAt"
	LastSeenAt     = "lastSeenAt"
	StartedAt      = "startedAt"
	CompletedAt    = "completedAt"
	FailedAt       = "failedAt"
	Attempts       = "attempts"
	Deliveries     = "deliveries"
	Takeovers      = "takeovers"
	LeaseOwner     = "leaseOwner"
	LeaseToken     = "leaseToken"
	LeaseExpiresAt = "leaseExpiresAt"
	FailureCode    = "failureCode"
	FailureMessage = "failureMessage"
	Outcome        = "outcome"
	ResultRef      = "resultRef"
	SQSMessageID   = "sqsMessageId"
	ReopenedAt     = "reopenedAt"
	ReopenedBy     = "reopenedBy"
	ReopenReason   = "reopenReason"
	DiscardedAt    = "discardedAt"
	DiscardedBy    = "discardedBy"
	DiscardReason  = "discardReason"
)

// Effect-log record attribute names (fixed). An effect record (package
// effects) lives in the application's table beside the inbox records, under
// the Layout's key attributes (PK = EFFECT#<effect key>, SK = EFFECT), its
// TTL attribute, and — while its outcome is UNKNOWN — the attention index
// (AttentionPK = EFFECT#UNKNOWN). It shares the inbox's names where they
// mean the same thing (status, requestHash, messageType, failureCode…).
const (
	EffectKey       = "effectKey"
	EffectName      = "effectName"
	WorkKey         = "workKey"
	EffectProvider  = "provider"
	EffectOperation = "operation"
	Idempotent      = "idempotent"
	HashVersion     = "hashVersion"
	ClaimToken      = "claimToken"
	CallExpiresAt   = "callExpiresAt"
	WorkAttempt     = "workAttempt"
	WorkLease       = "workLease"
	Calls           = "calls"
	ProviderRef     = "providerRef"
	EffectResult    = "result"
	LastError       = "lastError"
	CreatedAt       = "createdAt"
	UnknownAt       = "unknownAt"
	CommittedAt     = "committedAt"
	Resolution      = "resolution"
	ResolvedAt      = "resolvedAt"
	ResolvedBy      = "resolvedBy"
	ResolveReason   = "resolveReason"
)

// Outbox record attribute names (fixed; see package outbox). An outbox
// record also uses Status (PENDING, PUBLISHED), MessageType,
// AggregateType and AggregateID, and the layout's key, attention
// index and TTL attributes.
const (
	// OutboxEventID is the event's id (the envelope's messageId).
	OutboxEventID = "eventId"
	// OutboxBody is the encoded envelope, sent as the message body.
	OutboxBody = "body"
	// OutboxDestination is the queue URL the record goes to; absent:
	// the relay's default queue.
	OutboxDestination = "destination"
	// OutboxCreatedAt is when the producer wrote the record (RFC 3339,
	// UTC, milliseconds).
	OutboxCreatedAt = "createdAt"
	// OutboxPublishedAt is when a relay marked the record PUBLISHED.
	OutboxPublishedAt = "publishedAt"
	// OutboxSendCount counts the relays' marks (1 normally; a record
	// never gets a second mark: the mark is fenced on PENDING).
	OutboxSendCount = "sends"
	// OutboxTraceparent and OutboxTracestate hold the W3C trace
	// context of the producer's span when it wrote the record; the relay
	// sends them as the message's traceparent and tracestate attributes,
	// so a trace crosses the producer's transaction.
	OutboxTraceparent = "traceparent"
	OutboxTracestate  = "tracestate"
	// OutboxTenant is the message's tenant; the relay sends it as the
	// MessageGroupId on a standard queue (SQS fair queues). Absent: none.
	OutboxTenant = "tenant"
)

// Relay shard lease attribute names (fixed; see package relay). A lease
// item also uses LeaseOwner, LeaseToken and LeaseExpiresAt.
const (
	// RelayStreamARN is the stream the shard belongs to.
	RelayStreamARN = "streamArn"
	// RelayShardID is the shard's id.
	RelayShardID = "shardId"
	// RelayCheckpoint is the sequence number of the last stream record
	// whose outbox record was published (or skipped).
	RelayCheckpoint = "checkpoint"
	// RelayShardEnded is true once the shard was read to its end.
	RelayShardEnded = "shardEnded"
	// RelayUpdatedAt is when the lease item was last written.
	RelayUpdatedAt = "updatedAt"
)
