package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/mutation"
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

// payloadCodeAccessDenied is the failure code of a payload the worker may
// not read: an alert, retried without a business attempt.
const payloadCodeAccessDenied = s3payload.CodeAccessDenied

// messageBody returns the body to decode and its decoder: the message's
// own, or, for an SQS Extended Client message, the object its pointer
// names (bounded by Config.Payload.MaxBytes, not by the envelope's
// MaxBodyBytes, which SQS's message size sets). A body it cannot fetch
// is the delivery's verdict.
func (w *Worker) messageBody(ctx context.Context, d *delivery) ([]byte, *envelope.Decoder, verdict) {
	raw := aws.ToString(d.m.Body)
	p, extended, err := s3payload.ExtendedPointer(raw, d.m.MessageAttributes)
	if !extended {
		return []byte(raw), w.decoder, nil
	}
	var body []byte
	if err == nil {
		if w.payloads == nil {
			err = errNoS3(p.Bucket, p.Key, "")
		} else {
			body, err = w.payloads.FetchPointer(ctx, p)
		}
	}
	w.observePayload(payloadSourceExtended, err)
	if err == nil {
		return body, w.extDecoder, nil
	}
	f := payloadFailure(err)
	switch {
	case f.IsTerminal():
		return nil, nil, rejected{rejection: mutation.Rejection{Code: f.Code, Message: f.Message}}
	case f.Infrastructure():
		return nil, nil, troubled{failure: f, step: infraStep(d)}
	}
	// Access denied, or a failure with no record yet to count attempts
	// on: the receive count spaces the retries, the queue's redrive
	// policy ends them.
	return nil, nil, troubled{failure: f, step: max(1, d.receives)}
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

// payloadFailure is err as a failure.
func payloadFailure(err error) *failure.Error {
	var pe *s3payload.Error
	if errors.As(err, &pe) {
		return pe.Failure()
	}
	return failure.Classify(err, s3payload.CodeFetchFailed)
}

// observePayload counts a fetch by source and result.
func (w *Worker) observePayload(source string, err error) {
	result := "ok"
	if err != nil {
		result = strings.ToLower(payloadFailure(err).Code)
	}
	w.metrics.PayloadFetches.WithLabelValues(source, result).Inc()
}
