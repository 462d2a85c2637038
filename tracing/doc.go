// Package tracing owns how ddbworker carries a trace across SQS and names
// what it records, per the OpenTelemetry messaging semantic conventions
// (semconv v1.43.0: messaging spans, AWS SQS, AWS Lambda):
//
//   - the message attributes that carry a message's creation context —
//     W3C Trace Context as String message attributes traceparent and
//     tracestate (AttrTraceparent, AttrTracestate) — and the system
//     attribute AWS sets from X-Ray's header, AWSTraceHeader;
//   - Inject (a send's attributes: the sender's context, within SQS's 10
//     attributes), Extract (a received message's creation context:
//     traceparent first, else AWSTraceHeader), ExtractDelivery (the same
//     with the body read: an SNS notification's MessageAttributes'
//     traceparent between the two, FromSNS) and FromXRay (X-Ray's
//     Root=1-…;Parent=…;Sampled=… as a W3C span context);
//   - KeyHash, the idempotency key as a span attribute (the span names
//     and ddbworker's own attribute keys are the engine's: internal/spans);
//   - LogHandler, the slog.Handler wrapper that writes the trace and span
//     ids of the record's context into every record logged inside a span.
//
// Every send ddbworker makes injects the context (package producer, the
// outbox record and its relay, the worker's DLQ copies and deferral
// re-sends, dlq redrive); a Go producer of its own calls Inject; producers
// in other languages set traceparent themselves (docs/producers.md), or
// get AWSTraceHeader from the X-Ray SDK, Powertools or the OpenTelemetry
// AWS SDK instrumentation.
//
// It holds no state and needs no global provider: the worker, the relay
// and the Lambda adapter take a trace.TracerProvider (nil: no tracing); the
// propagation format is fixed (W3C Trace Context), so it does not read
// otel.GetTextMapPropagator. It does not configure exporters (the daemon
// and the Lambda adapter do, from the OTEL_* variables) or create spans.
package tracing
