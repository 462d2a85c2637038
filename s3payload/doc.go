// Package s3payload owns payloads that travel by S3 reference instead of
// inside the SQS message:
//
//   - Fetcher reads a referenced object for the worker, bounded in size
//     (Config.MaxBytes, 4 MiB by default), the version the reference pins,
//     and checks it against the reference (size, SHA-256) before anyone
//     trusts the bytes;
//   - the pointer format of the AWS SQS Extended Client libraries
//     (Pointer, ExtendedPointer): a message body such as
//     ["software.amazon.payloadoffloading.PayloadS3Pointer",
//     {"s3BucketName":"b","s3Key":"k"}] with the ExtendedPayloadSize (or
//     legacy SQSLargePayloadSize) message attribute, whose object holds the
//     original body;
//   - Offloader, the producer's side: it uploads a payload with its SHA-256
//     checksum under a content-addressed key and returns the
//     envelope.PayloadRef to send instead of the payload;
//   - Error and its codes (PAYLOAD_NOT_FOUND, PAYLOAD_VERSION_NOT_FOUND,
//     PAYLOAD_CHECKSUM_MISMATCH, PAYLOAD_SIZE_MISMATCH, PAYLOAD_TOO_LARGE,
//     PAYLOAD_ACCESS_DENIED, PAYLOAD_POINTER_INVALID, PAYLOAD_FETCH_FAILED),
//     and for S3 trouble the failure package's infrastructure codes
//     (THROTTLED, SERVICE_UNAVAILABLE, TIMEOUT): which S3 answer means
//     what, and whether waiting can heal it.
//
// It does not own the envelope's payloadRef field, its validation or the
// request hash (package envelope: the hash covers the reference, never the
// fetched bytes), where in the protocol a fetch happens and what a failure
// does to a work item and its message (package worker), or when a producer
// offloads (package producer). It never deletes an object: a payload may be
// read again by a redelivery, a DLQ redrive or a replay long after the
// first successful run, so objects are left to the bucket's lifecycle rule.
package s3payload
