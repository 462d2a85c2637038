// Package lambda runs ddbworker handlers as an AWS Lambda function behind
// an SQS event source mapping with ReportBatchItemFailures. A function's
// main is one call:
//
//	func main() {
//		lambda.Main(func(reg *lambda.Registry, env lambda.Env) error {
//			return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
//		})
//	}
//
// Each record runs the same pipeline as under the daemon — admit, claim,
// run, record, apply; see worker.HandleSQSEvent — and the response's
// batchItemFailures lists the records that must come back: applied work,
// duplicates, terminal work its policy settled and work deferred by a
// re-sent copy are successes (the mapping deletes them); a retryable
// failure is hidden for its backoff with ChangeMessageVisibility on the
// record's receipt handle, then reported. A record's lease ends with the
// invocation's deadline, and its work ends worker.LambdaSettleMargin (2s)
// before it, measured from the invocation: a record left too little time
// is not started. On a FIFO queue a group stops at its first failure and
// reports the rest.
//
// While DynamoDB is unhealthy an invocation touches no table (a probe at
// most, on the probe schedule) and parks every record, hidden and
// reported. An event source mapping cannot be paused from inside and
// counts a receive on every poll. On a standard queue a record is hidden
// as long as the outage has lasted so far, as the execution environment's
// health gate knows it (from the trip to the last failed probe): at least
// DDBWORKER_PARK_VISIBILITY, at most DDBWORKER_PARK_MAX_VISIBILITY (capped
// below SQS's 12 hours after the receipt), up to a fifth less at random.
// No hide outlasts the outage by more than its own length, so the backlog
// drains within max(DDBWORKER_PARK_VISIBILITY, the outage) + 19s of the
// recovery with the defaults (the probes' longest wait with its jitter and
// a second to confirm; 30s for an environment cold-started in the
// outage), plus the mapping's polling; a record is received about
// log2(outage / 1m) + 3 times. On the last receive the queue's redrive
// policy allows (whatever hides it, its next receive moves it to the DLQ)
// the record is re-sent as a new message, delayed by the same schedule
// within SQS's 15 minutes, and not reported: a standard queue survives
// any outage. A FIFO queue's record is not (the copy would leave its
// group's order): it is hidden DDBWORKER_PARK_VISIBILITY on its first
// receive, four times longer on each later one up to
// DDBWORKER_PARK_MAX_VISIBILITY, which makes the most of the redrive
// budget, and survives worker.HealthConfig.OutageCover(maxReceiveCount,
// true), 1h25m for maxReceiveCount 5 with the defaults. A lower
// DDBWORKER_PARK_MAX_VISIBILITY bounds a standard queue's drain after a
// long outage, at one receive per record per that time once the outage
// is older (worker.HealthConfig.ParkMaxVisibility states the trade-off).
//
// Lambda Managed Instances run several invocations at once in one
// execution environment (AWS_LAMBDA_MAX_CONCURRENCY, which aws-lambda-go's
// runtime loop serves from that many goroutines). They share the
// environment's worker — one health gate, one adaptive concurrency limit,
// one write budget — so DDBWORKER_CONCURRENCY counts the records in flight
// across them (by default 16 per concurrent invocation); they probe an
// unhealthy database one at a time, and no DynamoDB retry is sent once the
// gate has tripped. Each holds its leases under its own name: leaseOwner
// is the function, the environment's log stream and the invocation's
// request id (worker.WithInvocation).
//
// At cold start (New) the adapter checks what it will write to: the table's
// key attributes come from its key schema, and the store settings and
// layout the table records (DDBWORKER#CONFIG, written by `tables create`,
// `tables adopt` or a daemon's first `run`) replace the environment's
// defaults — a variable set explicitly to another value fails the init,
// naming it and both values, and a table that records none gets the
// function's — and the table must exist and fit the layout (keys,
// indexes, TTL attribute). The handlers are registered after that check,
// with the store it read (an effects log writes under its layout) — unless
// a database outage left the check to the invocations: then they see the
// environment's, and a later check that finds another layout recorded says
// so in the log (a function whose handlers need the layout may set the
// layout variables as recorded; the check refuses any difference). A cold start in
// a DynamoDB outage does not fail the init: the check is retried by the
// invocations, one request each on the probes' schedule, and until it
// passes they park their records. A queue's redrive policy is read when
// its worker is built (at cold start for DDBWORKER_QUEUE_URL, else at the
// queue's first invocation), with a warning when a FIFO queue's covers a
// shorter outage than DDBWORKER_MIN_OUTAGE_COVER.
//
// The outbox relay runs as a function too: RelayMain (or NewRelay) reads a
// table's DynamoDB stream events, publishes the outbox records to SQS and
// reports the first record it could not publish as the batch item failure
// (by sequence number), so the stream is retried from there in order; see
// package relay and docs/outbox.md.
//
// # What it owns
//
// Packaging: reading the configuration from the environment, loading the
// AWS configuration (config.LoadDefaultConfig: AWS_REGION, the execution
// role's credentials, the SDK's AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS), JSON logs on stdout (log/slog, with the
// invocation's awsRequestId, and inside a span its traceId and spanId),
// the metrics as CloudWatch EMF lines on stdout (see Metrics), trace export
// from the OTEL_* variables (OTLP/HTTP, off unless an endpoint is set; the
// invocation's span parents the worker's — the relay's send spans under
// RelayMain — and links to Lambda's X-Ray segment when X-Ray sampled the
// invocation, or is its child with OTEL_PROPAGATORS naming xray-lambda;
// the spans are flushed before each invocation answers; Tracing: Active
// alone exports none of them), building the workers once per execution
// environment — so the adaptive concurrency limit and the database health
// gate outlive invocations — failing the init on a configuration problem,
// the cold-start check of the inbox table and of the settings it records,
// the warning about a queue's outage cover, and the Lambda runtime loop (github.com/aws/aws-lambda-go/lambda). It does
// not own the protocol (package worker), the handlers' API (package
// ddbworker), the table or the queues (example/invoices/template.yaml shows
// them), nor the event source mapping's deletes: a function never deletes
// the records it settles, the mapping does.
//
// # Configuration
//
// The daemon's DDBWORKER_* variables, where they apply, with the daemon's
// defaults; an empty variable is the same as an unset one:
//
//	DDBWORKER_TABLE                 required: the inbox table (and usually the service's)
//	DDBWORKER_QUEUE_URL             the queue the mapping reads (default: from each record's eventSourceARN)
//	DDBWORKER_DLQ_URL               required with the dlq terminal policy
//	DDBWORKER_TERMINAL_POLICY       dlq (default), quarantine or redrive
//	DDBWORKER_CONCURRENCY           records in flight per execution environment (16 × AWS_LAMBDA_MAX_CONCURRENCY)
//	DDBWORKER_MAX_ATTEMPTS          business attempts unless a message's attemptPolicy says otherwise (5)
//	DDBWORKER_CALL_TIMEOUT          bound of each DynamoDB call, SDK retries included (5s; below 30s)
//	DDBWORKER_CLOCK_SKEW            lease margin before a takeover (2s; 0: none)
//	DDBWORKER_MAX_WCU               write budget of one execution environment (0: unpaced)
//	DDBWORKER_PAYLOAD_MAX_BYTES     largest payload fetched by S3 reference (4 MiB)
//	DDBWORKER_MAX_TAKEOVERS         expired leases taken over before MAX_TAKEOVERS_EXCEEDED (5; 1..100)
//	DDBWORKER_HEALTH_MIN_FAILURES   health gate: failures in the window that trip it (5)
//	DDBWORKER_HEALTH_WINDOW         health gate: how far back calls count (10s)
//	DDBWORKER_PROBE_MAX_INTERVAL    health gate: longest wait between probes (15s)
//	DDBWORKER_PARK_VISIBILITY       health gate: a parked record's shortest hiding (1m; 1s..1h)
//	DDBWORKER_PARK_MAX_VISIBILITY   health gate: its longest (12h; at least the shortest)
//	DDBWORKER_MIN_OUTAGE_COVER      warn when a queue's redrive policy covers a shorter outage (6h)
//	DDBWORKER_ATTENTION_SHARDS      inbox store (16; the table's recorded value unless set)
//	DDBWORKER_INDEX_PROCESSING      inbox store (false; likewise)
//	DDBWORKER_COMPLETED_TTL         inbox record lifetime (840h, at least 672h; likewise)
//	DDBWORKER_FAILED_TTL            inbox record lifetime (840h; likewise)
//	DDBWORKER_PROCESSING_TTL        inbox record lifetime (168h; likewise)
//	DDBWORKER_REQUEST_HASH_VERSION  request hash version of new records, v2 or v3 (v2; likewise)
//	DDBWORKER_LOG_LEVEL             debug, info (default), warn or error
//	DDBWORKER_METRICS_NAMESPACE     CloudWatch namespace of the EMF metrics (ddbworker)
//
// and the inbox layout, for a table whose layout is not recorded (each
// takes the recorded name unless set; the key attributes, the table's key
// schema): DDBWORKER_PK_ATTRIBUTE
// (PK), DDBWORKER_SK_ATTRIBUTE (SK), DDBWORKER_AGGREGATE_INDEX (GSI1),
// DDBWORKER_AGGREGATE_PK_ATTRIBUTE (GSI1PK), DDBWORKER_AGGREGATE_SK_ATTRIBUTE
// (GSI1SK), DDBWORKER_ATTENTION_INDEX (GSI2), DDBWORKER_ATTENTION_PK_ATTRIBUTE
// (GSI2PK), DDBWORKER_ATTENTION_SK_ATTRIBUTE (GSI2SK) and
// DDBWORKER_TTL_ATTRIBUTE (ttl).
//
// DDBWORKER_TABLE has no default here (the daemon's is "ddbworker"): a
// function's table is its stack's. The daemon's receive and shutdown
// settings (batch size, wait time, visibility and message timeouts, drain,
// metrics) do not apply — the mapping receives, and the invocation's
// deadline bounds every record; New logs a warning for each that is set.
//
// Every problem is reported at once, in one line naming each variable, and
// fails the init: Main logs it, posts it to the Runtime API as the init
// error (the invocation that started the environment fails with it) and
// exits 1, before any record is touched.
//
// # The queue
//
// Visibility changes need the queue's URL. With DDBWORKER_QUEUE_URL set,
// its worker is built at init; records of another queue — a function may
// have several SQS event source mappings — get a worker of their own,
// built at their queue's first invocation from their eventSourceARN
// (worker.QueueURLFromARN), as do all records when DDBWORKER_QUEUE_URL is
// not set. The configuration is validated at init either way. Two URLs name
// the same queue when their paths' ACCOUNT/NAME agree, so
// DDBWORKER_QUEUE_URL may use any endpoint's host.
//
// # Metrics
//
// A function serves no /metrics. Each queue's workers count into the
// daemon's collectors (worker.Deps.Metrics, through internal/prommetrics)
// on a registry of their own, and after every invocation what changed is
// written to stdout as CloudWatch Embedded Metric Format documents, one
// JSON line each, which Lambda's log ingestion turns into CloudWatch
// metrics in DDBWORKER_METRICS_NAMESPACE —
// no API call, no permission beyond writing logs. The names and label
// values are the Prometheus ones (one source of truth, package
// lambda/internal/emf): ddbworker_messages_total by message_type and outcome,
// ddbworker_processing_seconds by message_type, ddbworker_transaction_seconds,
// ddbworker_hash_mismatches_total, ddbworker_database_healthy and
// ddbworker_database_capacity, each with the dimensions function_name
// (AWS_LAMBDA_FUNCTION_NAME) and queue_name. A counter is written as its
// increase, a histogram as its new observations (an array of values, at
// the buckets' resolution), a gauge as its value; an invocation in which
// nothing changed writes nothing. An example line:
//
//	{"_aws":{"Timestamp":1796352000000,"CloudWatchMetrics":[{"Namespace":"ddbworker","Dimensions":[["function_name","queue_name","message_type","outcome"]],
//	"Metrics":[{"Name":"ddbworker_messages_total","Unit":"Count","StorageResolution":60}]}]},"function_name":"invoices","queue_name":"orders",
//	"message_type":"OrderInvoiceRequested","outcome":"applied","ddbworker_messages_total":3}
//
// (one line; wrapped here). example/invoices/template.yaml alarms on
// ddbworker_hash_mismatches_total.
package lambda
