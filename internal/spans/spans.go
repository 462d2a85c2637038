package spans

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// SchemaURL is the semantic conventions' version ddbworker's spans follow.
const SchemaURL = semconv.SchemaURL

// InstrumentationName names the tracers of ddbworker's packages.
const InstrumentationName = "github.com/ddbworker/ddbworker"

// SpanProcess is the name of a consumer span: process <queue name>.
func SpanProcess(queue string) string { return "process " + queue }

// SpanSend is the name of a send span: send <queue name>.
func SpanSend(queue string) string { return "send " + queue }

// The names of the child spans of a consumer span, one per pipeline stage
// (kind internal; the commit's and the claim's are DynamoDB clients).
const (
	SpanClaim   = "ddbworker.claim"   // the gate's conditional PutItem (a fused route claims by its commit)
	SpanHandler = "ddbworker.handler" // the middleware chain and the handler, one span per run
	SpanCommit  = "ddbworker.commit"  // the TransactWriteItems of the writes and the inbox flip
	SpanRecord  = "ddbworker.record"  // what the inbox is told of a failure, a supersede, a release
	SpanSettle  = "ddbworker.settle"  // what is done to the SQS message: delete, hide, park, DLQ copy
)

// ddbworker's own span attributes. Every value is bounded: the message
// type and the failure code are the worker's metric label values (a
// registered type or "(unknown)"; a code of the worker's, or one of at most
// 100 a handler used, or OTHER), the outcome one of the worker's Outcome*
// labels.
const (
	// KeyIdempotencyKeyHash is the idempotency key hashed (KeyHash).
	KeyIdempotencyKeyHash = attribute.Key("ddbworker.idempotency_key.hash")
	// KeyMessageType is the message type, bounded.
	KeyMessageType = attribute.Key("ddbworker.message_type")
	// KeyOutcome is what became of the delivery (applied, duplicate,
	// retry, terminal, parked …).
	KeyOutcome = attribute.Key("ddbworker.outcome")
	// KeyFailureCode is the failure's code, bounded; error.type holds it
	// too.
	KeyFailureCode = attribute.Key("ddbworker.failure.code")
	// KeyFailureKind is retryable or terminal.
	KeyFailureKind = attribute.Key("ddbworker.failure.kind")
	// KeyAttempt is the business attempt the delivery ran as (0: none).
	KeyAttempt = attribute.Key("ddbworker.attempt")
	// KeyRun counts handler runs within the attempt (a guard's Rerun).
	KeyRun = attribute.Key("ddbworker.run")
	// KeyReceiveCount is SQS's ApproximateReceiveCount. The conventions
	// (v1.43.0) define no receive count for SQS (the analogous ones are
	// Service Bus's and Pub/Sub's, in their own namespaces), so it is
	// ddbworker's, in its namespace rather than squatting in messaging.*.
	KeyReceiveCount = attribute.Key("ddbworker.sqs.receive_count")
	// KeyInfrastructure marks a failure of infrastructure trouble
	// (throttling, 5xx, timeouts, shutdown): no business attempt counted.
	KeyInfrastructure = attribute.Key("ddbworker.infrastructure")
)
