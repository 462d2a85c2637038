package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/s3payload"
)

// Payloads by S3 reference, and where they enter the protocol:
//
//   - An SQS Extended Client message (its body a pointer to the original
//     body in S3) is fetched before it is decoded: until then there is no
//     idempotency key to gate on. A failure is handled like a message that
//     cannot be decoded: terminal ones are recorded as rejections
//     (REJECT#<messageId>) and end with the terminal policy; the rest keep
//     the message for a retry. No checksum exists for these objects; the
//     size attribute and Config.Payload.MaxBytes bound them.
//   - An envelope's payloadRef is fetched after the gate acquired the lease
//     and before the handler runs: a duplicate of completed work costs no
//     S3 read, and a failure is recorded on the work's record. The request
//     hash covers the reference (envelope), never the fetched bytes.
//   - S3 trouble (SlowDown, 5xx, timeouts) is infrastructure: the lease is
//     given back, no business attempt counted, the message retried after a
//     backoff. It does not feed the database health gate, which watches
//     DynamoDB only: S3 trouble stops the messages that carry references,
//     not the worker.
//   - PAYLOAD_ACCESS_DENIED (S3 or KMS refused the worker, or the worker
//     has no S3 client) is the deployment's to fix: each one is an alert
//     (an ERROR log line and ddbworker_payload_access_denied_total), and
//     the message is retried with a backoff that grows with its receive
//     count, without counting business attempts, until the permission is
//     fixed or the queue's redrive policy moves it to the DLQ. Work is
//     never ended terminal because of a policy mistake that a fix heals.
//   - The objects are never deleted: a redelivery, a DLQ redrive or a
//     replay may read them again; the bucket's lifecycle rule removes them.

// errNoS3 is the failure of a referenced payload without an S3 client.
func errNoS3(bucket, key, version string) *s3payload.Error {
	return &s3payload.Error{Kind: failure.Retryable, Code: s3payload.CodeAccessDenied, Bucket: bucket, Key: key, VersionID: version,
		Message: "the worker has no S3 client (worker.Deps.S3) to fetch payloads by reference"}
}

// Payload fetch sources, the metric's label.
const (
	payloadSourceRef      = "payload_ref"
	payloadSourceExtended = "extended_client"
)

// initPayloads sets up the fetcher (with an S3 client) and the decoder of
// Extended Client bodies, or reports cfg's problems.
func (w *Worker) initPayloads(api s3payload.GetObjectAPI, cfg s3payload.Config, env envelope.Config) error {
	var err error
	if api != nil {
		if w.payloads, err = s3payload.New(s3payload.Deps{S3: api}, cfg); err != nil {
			return fmt.Errorf("worker: Config.Payload: %w", err)
		}
	}
	if env.MaxBodyBytes >= 0 && int64(env.MaxBodyBytes) < cfg.MaxBytes {
		env.MaxBodyBytes = int(cfg.MaxBytes)
	}
	if w.extDecoder, err = envelope.NewDecoder(env); err != nil {
		return nil // the envelope's own problem, reported with Config.Envelope
	}
	return nil
}

// messageBody returns the body to decode and its decoder: the message's
// own, or, for an SQS Extended Client message, the object its pointer
// names (bounded by Config.Payload.MaxBytes, not by the envelope's
// MaxBodyBytes, which SQS's message size sets). ok false means the message
// is settled by disp.
func (w *Worker) messageBody(ctx context.Context, d *delivery) (body []byte, dec *envelope.Decoder, disp disposition, ok bool) {
	raw := aws.ToString(d.m.Body)
	p, extended, err := s3payload.ExtendedPointer(raw, d.m.MessageAttributes)
	if !extended {
		return []byte(raw), w.decoder, disposition{}, true
	}
	if err == nil {
		if w.payloads == nil {
			err = errNoS3(p.Bucket, p.Key, "")
		} else {
			body, err = w.payloads.FetchPointer(ctx, p)
		}
	}
	w.observePayload(payloadSourceExtended, err)
	if err == nil {
		return body, w.extDecoder, disposition{}, true
	}
	f := payloadFailure(err)
	switch {
	case f.IsTerminal():
		return nil, nil, w.reject(ctx, d, &gate.Rejection{Code: f.Code, Message: f.Message}), false
	case f.Code == s3payload.CodeAccessDenied:
		w.alertAccessDenied(d, err)
		disp = keepFor(OutcomeRetry, w.cfg.Backoff.delay(max(1, receiveCount(d.m))), f)
	case f.Infrastructure():
		disp = keepFor(OutcomeRetry, w.cfg.Backoff.delay(unleasedStep(d.m)), f)
	default:
		// No record yet to count attempts on: the receive count spaces the
		// retries, the queue's redrive policy ends them.
		disp = keepFor(OutcomeRetry, w.cfg.Backoff.delay(max(1, receiveCount(d.m))), f)
	}
	disp.infra = true // no business attempt was counted
	return nil, nil, disp, false
}

// resolvePayload fetches the payload of an envelope that carries a
// payloadRef (under the lease) and sets it on the envelope, checked
// against the reference.
func (w *Worker) resolvePayload(ctx context.Context, env *envelope.Envelope) error {
	ref := env.PayloadRef
	if ref == nil || env.Payload != nil {
		return nil
	}
	var b []byte
	var err error
	if w.payloads == nil {
		err = errNoS3(ref.Bucket, ref.Key, ref.VersionID)
	} else {
		b, err = w.payloads.Fetch(ctx, *ref)
	}
	w.observePayload(payloadSourceRef, err)
	if err != nil {
		return err
	}
	if err := env.ResolvePayload(b); err != nil {
		// The bytes match the reference but are no payload the decoder
		// accepts inline (not JSON, null, …): the data will not heal.
		code := string(envelope.CodeInvalidField)
		var ee *envelope.Error
		if errors.As(err, &ee) {
			code = string(ee.Code)
		}
		return failure.Wrap(failure.Terminal, code, err)
	}
	return nil
}

// payloadFailed settles a lease whose payload could not be fetched:
// access denied is an alert and a retry that counts no business attempt;
// the rest is settled like any failure (infrastructure: released, no
// attempt; terminal: recorded, terminal policy; otherwise an attempt).
func (w *Worker) payloadFailed(ctx context.Context, d *delivery, lease inbox.Lease, attempts failure.Policy, err error) disposition {
	f := payloadFailure(err)
	if f.Code == s3payload.CodeAccessDenied {
		w.alertAccessDenied(d, err)
		disp, _ := w.giveBack(ctx, lease, f, max(1, receiveCount(d.m)))
		return disp
	}
	return w.settle(ctx, d, lease, attempts, f)
}

// payloadFailure is err as a failure.
func payloadFailure(err error) *failure.Error {
	var pe *s3payload.Error
	if errors.As(err, &pe) {
		return pe.Failure()
	}
	return failure.Classify(err, s3payload.CodeFetchFailed)
}

// alertAccessDenied logs the alert and counts it.
func (w *Worker) alertAccessDenied(d *delivery, err error) {
	w.metrics.PayloadAccessDenied.Inc()
	attrs := []any{"sqsMessageId", aws.ToString(d.m.MessageId), "receiveCount", receiveCount(d.m), "code", s3payload.CodeAccessDenied,
		"error", truncateRunes(err.Error(), maxLoggedMessage)}
	var pe *s3payload.Error
	if errors.As(err, &pe) {
		attrs = append(attrs, "bucket", pe.Bucket, "key", pe.Key)
	}
	if d.env != nil {
		attrs = append(attrs, "idempotencyKey", d.env.IdempotencyKey, "messageType", d.env.MessageType)
	}
	w.log.Error("ALERT payload access denied: the worker may not read the referenced object; the message is retried without counting attempts until the permission is fixed", attrs...)
}

// observePayload counts a fetch by source and result.
func (w *Worker) observePayload(source string, err error) {
	result := "ok"
	if err != nil {
		result = strings.ToLower(payloadFailure(err).Code)
	}
	w.metrics.PayloadFetches.WithLabelValues(source, result).Inc()
}
