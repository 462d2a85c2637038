// Package dlq reads and replays a dead-letter queue: Stats counts what it
// holds by failure code and message type, Peek shows messages without
// losing any (Message.Payload: the body a route reads inside an SNS or
// EventBridge wrapper), Redrive moves a bounded, paced, filtered selection
// back to the work queue (DESIGN §8: redrive a few first, never all at
// once), and Discard removes one for good, each removal recorded first.
//
// Two kinds of message reach a DLQ. The worker's terminal policy "dlq"
// sends a copy carrying the failure as ddbworker.* message attributes
// (AttrFailureCode and the others); SQS's redrive policy moves a message
// after maxReceiveCount receives with no such attributes, and then the
// message type and idempotency key are read from the JSON envelope in the
// body and the failure code is CodeNone.
//
// Reading a queue without deleting means receiving with a visibility
// timeout (Config.Hide), holding every received message hidden until the
// operation ends and then making all of them visible again
// (ChangeMessageVisibility 0), even when the operation fails or its context
// ends. Every scan adds one to each message's ApproximateReceiveCount in the
// DLQ: harmless while the DLQ has no redrive policy of its own (ddbworker's
// queues create none), but a DLQ with one would move messages onward after
// that many scans.
//
// Redrive sends a message's original body and its producer's attributes
// (the ddbworker.* ones stripped, AttrFirstSentAt and AttrRedrivenFrom
// added; its trace context kept, an AWSTraceHeader as traceparent, so the
// redriven delivery's span links to the original producer) to the work
// queue and deletes it from the DLQ only after the send succeeded. A copy
// keeps within SQS's limits (10 attributes, 1 MiB with the body): an
// attribute that does not fit is left off in FitAttributesFor's order —
// the one ranking of every copy ddbworker makes, AttrRedrivenFrom and
// AttrFirstSentAt kept first, then every other attribute of the
// producer's (a route may read any: an adapter's TypeAttribute), the trace
// context shed first (Moved.DroppedAttributes names them) —, and calls are sized by package
// internal/sqsbatch, a message larger than a call's payload limit alone. A
// crash or an error between the two leaves the message in the DLQ as well: a
// later
// redrive sends it again, and the consumer's idempotency gate absorbs the
// copy — a COMPLETED work item comes back as a duplicate, a FAILED_TERMINAL
// one fails again with its recorded code. Its report says what was left
// only as sure as the scan allows: past Max it scans on, moving nothing,
// until one more matching message (OverMax, LimitReached: some remain) or
// the end of the DLQ (Complete: none remain), and it counts what it scanned
// and what matched.
//
// Discard removes a filtered, bounded selection for good — messages that
// can never be fixed — and deletes each only after DiscardOptions.Account
// recorded its removal where the work is accounted for (the daemon's
// `dlq discard` marks the work's FAILED_TERMINAL inbox record, or its
// rejection record, or creates one), so that no message leaves the DLQ
// without a trace; this package knows no table, the caller does. A dry run
// calls Account too, to say what it would record.
//
// It does not process messages (worker), decide what a delivery may do
// (gate) or create queues (worker.CreateQueues). It is internal: its users
// are the daemon's `dlq` commands, the worker's DLQ copies and the relay;
// an operator reaches it through `ddbworker dlq`.
package dlq
