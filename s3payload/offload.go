package s3payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbworker/ddbworker/envelope"
)

// PutObjectAPI is what an Offloader needs of S3.
type PutObjectAPI interface {
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// DefaultPrefix is OffloaderConfig.Prefix's default.
const DefaultPrefix = "ddbworker/payloads/"

// OffloaderConfig configures an Offloader.
type OffloaderConfig struct {
	// Bucket receives the payloads. Required. Give it a lifecycle rule
	// that expires them (with noncurrent versions, on a versioned bucket)
	// later than a message can still be delivered, redriven or replayed:
	// the queue's retention plus the DLQ's, with a margin.
	Bucket string
	// Prefix starts every key; the worker's read permission can be scoped
	// to it. Keys are Prefix + messageType + "/" + the payload's SHA-256
	// (hex): the same payload is one object, and re-sending it uploads the
	// same bytes again. Default: "ddbworker/payloads/" (DefaultPrefix).
	Prefix string
	// ServerSideEncryption, when set, is asked of every upload (e.g.
	// types.ServerSideEncryptionAwsKms). Default: the bucket's default
	// encryption.
	ServerSideEncryption types.ServerSideEncryption
	// SSEKMSKeyID is the KMS key with ServerSideEncryption aws:kms.
	// Default: the bucket's (or AWS's managed) key.
	SSEKMSKeyID string
	// MaxBytes refuses payloads the worker would refuse to read. Default:
	// 4 MiB (DefaultMaxBytes), the worker's default; keep both equal.
	MaxBytes int64
	// CallTimeout bounds one upload with its SDK attempts. Default: 10s.
	CallTimeout time.Duration
	// CallAttempts is how many attempts the SDK makes of one PutObject.
	// Default: 3.
	CallAttempts int
}

// OffloaderDeps are an Offloader's collaborators.
type OffloaderDeps struct {
	// S3 client. Required.
	S3 PutObjectAPI
}

// Offloader uploads payloads to S3 and returns the references to send
// instead: it implements the producer's Offloader. It is safe for
// concurrent use.
type Offloader struct {
	api PutObjectAPI
	cfg OffloaderConfig
	opt func(*s3.Options)
}

// NewOffloader validates deps and cfg and returns an Offloader; every
// problem is reported, joined.
func NewOffloader(deps OffloaderDeps, cfg OffloaderConfig) (*Offloader, error) {
	var errs []error
	if deps.S3 == nil {
		errs = append(errs, errors.New("s3payload: OffloaderDeps.S3 is required"))
	}
	if cfg.Bucket == "" {
		errs = append(errs, errors.New("s3payload: OffloaderConfig.Bucket is required"))
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.SSEKMSKeyID != "" && cfg.ServerSideEncryption != types.ServerSideEncryptionAwsKms && cfg.ServerSideEncryption != types.ServerSideEncryptionAwsKmsDsse {
		errs = append(errs, fmt.Errorf("s3payload: OffloaderConfig.SSEKMSKeyID needs ServerSideEncryption aws:kms (got %q)", cfg.ServerSideEncryption))
	}
	fc, err := Config{MaxBytes: cfg.MaxBytes, CallTimeout: cfg.CallTimeout, CallAttempts: cfg.CallAttempts}.WithDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	cfg.MaxBytes, cfg.CallTimeout, cfg.CallAttempts = fc.MaxBytes, fc.CallTimeout, fc.CallAttempts
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = cfg.CallAttempts
		o.MaxBackoff = callMaxBackoff
		o.RateLimiter = ratelimit.None
	})
	return &Offloader{api: deps.S3, cfg: cfg, opt: func(o *s3.Options) { o.Retryer = retryer }}, nil
}

// Key returns the object key Offload uses for payload of messageType.
func (o *Offloader) Key(messageType string, payload []byte) string {
	sum := sha256.Sum256(payload)
	return o.cfg.Prefix + messageType + "/" + hex.EncodeToString(sum[:])
}

// Offload uploads payload — with its SHA-256 as the upload's checksum, so
// S3 refuses bytes that arrive damaged — and returns the reference to send
// in its place: bucket, key, SHA-256, size, and the version S3 created
// when the bucket is versioned. An upload retried after a lost response
// writes the same key with the same bytes.
func (o *Offloader) Offload(ctx context.Context, messageType string, payload []byte) (envelope.PayloadRef, error) {
	if len(payload) == 0 {
		return envelope.PayloadRef{}, errors.New("s3payload: offload: empty payload")
	}
	if int64(len(payload)) > o.cfg.MaxBytes {
		return envelope.PayloadRef{}, fmt.Errorf("s3payload: offload: payload of %d bytes is larger than MaxBytes %d (the worker would refuse it PAYLOAD_TOO_LARGE)", len(payload), o.cfg.MaxBytes)
	}
	if messageType == "" || strings.ContainsAny(messageType, "/") {
		return envelope.PayloadRef{}, fmt.Errorf("s3payload: offload: message type %q cannot name a key", messageType)
	}
	sum := sha256.Sum256(payload)
	key := o.Key(messageType, payload)
	in := &s3.PutObjectInput{
		Bucket: aws.String(o.cfg.Bucket), Key: aws.String(key), Body: bytes.NewReader(payload),
		ContentLength: aws.Int64(int64(len(payload))), ContentType: aws.String("application/json"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	if o.cfg.ServerSideEncryption != "" {
		in.ServerSideEncryption = o.cfg.ServerSideEncryption
	}
	if o.cfg.SSEKMSKeyID != "" {
		in.SSEKMSKeyId = aws.String(o.cfg.SSEKMSKeyID)
	}
	callCtx, cancel := context.WithTimeout(ctx, o.cfg.CallTimeout)
	defer cancel()
	out, err := o.api.PutObject(callCtx, in, o.opt)
	if err != nil {
		return envelope.PayloadRef{}, fmt.Errorf("s3payload: offload s3://%s/%s: %w", o.cfg.Bucket, key, err)
	}
	ref := envelope.PayloadRef{Bucket: o.cfg.Bucket, Key: key, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(payload))}
	if v := aws.ToString(out.VersionId); v != "" && v != "null" {
		ref.VersionID = v
	}
	return ref, nil
}
