package s3payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

// GetObjectAPI is what a Fetcher needs of S3.
type GetObjectAPI interface {
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Defaults of Config.
const (
	DefaultMaxBytes     = 4 << 20
	DefaultCallTimeout  = 10 * time.Second
	DefaultCallAttempts = 3
)

// callMaxBackoff caps the SDK's wait between the attempts of one call.
const callMaxBackoff = time.Second

// Config configures a Fetcher.
type Config struct {
	// MaxBytes is the largest object a fetch reads; a reference or an
	// object that declares more is refused PAYLOAD_TOO_LARGE without
	// reading it. Default: 4 MiB (DefaultMaxBytes).
	MaxBytes int64
	// CallTimeout bounds one fetch: GetObject with its SDK attempts and
	// the read of the body. Default: 10s.
	CallTimeout time.Duration
	// CallAttempts is how many attempts the SDK makes of one GetObject
	// (throttling, 5xx and transport errors are retried within the call,
	// waiting at most 1s between attempts); a body whose read breaks off
	// is fetched again within the same budget. Default: 3.
	CallAttempts int
}

// WithDefaults returns c with its zero fields set to their defaults, or
// the problems of c, joined.
func (c Config) WithDefaults() (Config, error) {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.CallAttempts == 0 {
		c.CallAttempts = DefaultCallAttempts
	}
	var errs []error
	if c.MaxBytes < 1 || c.MaxBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("s3payload: Config.MaxBytes %d must be within 1..1 GiB", c.MaxBytes))
	}
	if c.CallTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("s3payload: Config.CallTimeout %s must be at least 100ms", c.CallTimeout))
	}
	if c.CallAttempts < 1 || c.CallAttempts > 10 {
		errs = append(errs, fmt.Errorf("s3payload: Config.CallAttempts %d must be within 1..10", c.CallAttempts))
	}
	return c, errors.Join(errs...)
}

// Deps are a Fetcher's collaborators.
type Deps struct {
	// S3 client. Required. An emulator needs path-style addressing
	// (s3.Options.UsePathStyle).
	S3 GetObjectAPI
}

// Fetcher reads referenced payloads. It is safe for concurrent use.
type Fetcher struct {
	api GetObjectAPI
	cfg Config
	opt func(*s3.Options)
}

// New validates deps and cfg and returns a Fetcher; every problem is
// reported, joined.
func New(deps Deps, cfg Config) (*Fetcher, error) {
	var errs []error
	if deps.S3 == nil {
		errs = append(errs, errors.New("s3payload: Deps.S3 is required"))
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = cfg.CallAttempts
		o.MaxBackoff = callMaxBackoff
		o.RateLimiter = ratelimit.None
	})
	return &Fetcher{api: deps.S3, cfg: cfg, opt: func(o *s3.Options) { o.Retryer = retryer }}, nil
}

// Fetch reads the object ref points at — the version it pins, when it
// pins one — and returns its bytes once their length is ref.Size and their
// SHA-256 is ref.SHA256. Every error is an *Error.
func (f *Fetcher) Fetch(ctx context.Context, ref envelope.PayloadRef) ([]byte, error) {
	where := location{bucket: ref.Bucket, key: ref.Key, version: ref.VersionID}
	if ref.Size > f.cfg.MaxBytes {
		return nil, tooLarge(where, ref.Size, f.cfg.MaxBytes, "the reference declares")
	}
	b, err := f.get(ctx, where, ref.Size)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, ref.SHA256) {
		return nil, &Error{Kind: failure.Terminal, Code: CodeChecksumMismatch, Bucket: where.bucket, Key: where.key, VersionID: where.version,
			Message: fmt.Sprintf("the object's SHA-256 is %s, the reference's %s", got, strings.ToLower(ref.SHA256))}
	}
	return b, nil
}

// FetchPointer reads the object an Extended Client pointer points at: the
// original message body. The libraries record no checksum, so only the
// size is checked (against p.Size, when the message declared one) and
// bounded.
func (f *Fetcher) FetchPointer(ctx context.Context, p Pointer) ([]byte, error) {
	where := location{bucket: p.Bucket, key: p.Key}
	if p.Size > f.cfg.MaxBytes {
		return nil, tooLarge(where, p.Size, f.cfg.MaxBytes, "the message's "+p.SizeAttribute+" attribute declares")
	}
	return f.get(ctx, where, p.Size)
}

// get reads the object at where, at most MaxBytes, checking its length
// against want (0: unknown). A body whose read breaks off is fetched again
// while attempts and time are left.
func (f *Fetcher) get(ctx context.Context, where location, want int64) ([]byte, error) {
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.CallTimeout)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(where.bucket), Key: aws.String(where.key)}
	if where.version != "" {
		in.VersionId = aws.String(where.version)
	}
	var lastErr error
	for range f.cfg.CallAttempts {
		b, again, err := f.getOnce(callCtx, in, where, want)
		if !again || callCtx.Err() != nil {
			return b, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// getOnce is one GetObject and the read of its body; again reports a read
// that broke off (worth another try).
func (f *Fetcher) getOnce(ctx context.Context, in *s3.GetObjectInput, where location, want int64) (b []byte, again bool, err error) {
	out, err := f.api.GetObject(ctx, in, f.opt)
	if err != nil {
		return nil, false, classify(err, where)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil {
		if n > f.cfg.MaxBytes {
			return nil, false, tooLarge(where, n, f.cfg.MaxBytes, "S3 reports")
		}
		if want > 0 && n != want {
			return nil, false, sizeMismatch(where, n, want)
		}
	}
	b, err = io.ReadAll(io.LimitReader(out.Body, f.cfg.MaxBytes+1))
	if err != nil {
		// A transport failure mid-body (the response was cut off), or the
		// call's time ran out: infrastructure either way.
		e := &Error{Kind: failure.Retryable, Code: failure.CodeServiceUnavailable, Bucket: where.bucket, Key: where.key, VersionID: where.version,
			Message: "reading the object broke off", Err: err}
		if ctx.Err() != nil {
			e.Code = failure.CodeTimeout
		}
		return nil, true, e
	}
	switch n := int64(len(b)); {
	case n > f.cfg.MaxBytes:
		return nil, false, tooLarge(where, n, f.cfg.MaxBytes, "S3 sent")
	case out.ContentLength != nil && n != aws.ToInt64(out.ContentLength):
		e := &Error{Kind: failure.Retryable, Code: failure.CodeServiceUnavailable, Bucket: where.bucket, Key: where.key, VersionID: where.version,
			Message: fmt.Sprintf("S3 sent %d of %d bytes", n, aws.ToInt64(out.ContentLength))}
		return nil, true, e
	case want > 0 && n != want:
		return nil, false, sizeMismatch(where, n, want)
	}
	return b, false, nil
}

func tooLarge(where location, n, max int64, who string) *Error {
	return &Error{Kind: failure.Terminal, Code: CodeTooLarge, Bucket: where.bucket, Key: where.key, VersionID: where.version,
		Message: fmt.Sprintf("%s %d bytes; the worker reads at most %d (MaxBytes)", who, n, max)}
}

func sizeMismatch(where location, got, want int64) *Error {
	return &Error{Kind: failure.Terminal, Code: CodeSizeMismatch, Bucket: where.bucket, Key: where.key, VersionID: where.version,
		Message: fmt.Sprintf("the object is %d bytes, the message declares %d", got, want)}
}
