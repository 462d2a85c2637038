package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"
)

// S3Endpoint is the S3 endpoint of the emulators Main prepared: fauxqs
// serves S3 on its SQS endpoint (AWS_ENDPOINT_URL_S3 wins when set). It
// skips the test when the emulators are not available.
func S3Endpoint(t testing.TB) string {
	t.Helper()
	_, sqsEndpoint := Endpoints(t)
	if v := os.Getenv("AWS_ENDPOINT_URL_S3"); v != "" {
		return v
	}
	return sqsEndpoint
}

// S3 returns an S3 client of the emulators, path-style (fauxqs cannot
// resolve bucket host names), with optFns applied (e.g. an S3Faults'
// Options). It skips the test when the emulators are not available.
func S3(t testing.TB, optFns ...func(*s3.Options)) *s3.Client {
	t.Helper()
	cfg := AWSConfig(t)
	endpoint := S3Endpoint(t)
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		// fauxqs sends no checksum for objects uploaded without one.
		o.DisableLogOutputChecksumValidationSkipped = true
	}}, optFns...)...)
}

// NewBucket creates a bucket with a unique name and empties and deletes it
// when the test ends.
func NewBucket(t testing.TB, c *s3.Client) string {
	t.Helper()
	name := Unique("b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		if err == nil {
			for _, o := range out.Contents {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

// S3Faults is SDK middleware for an S3 client of the emulators: it does
// what fauxqs's S3 cannot — object versions — and what a test wants of S3
// on purpose — error responses (SlowDown, 503, AccessDenied, …) and lost
// responses. Errors are served as S3 serves them, an HTTP response with an
// XML error body, so the SDK's own deserializer and retryer handle them
// exactly as they would S3's. Its methods are safe for concurrent use.
type S3Faults struct {
	mu         sync.Mutex
	versioning bool
	versions   map[string][]s3Version // by bucket + "/" + key, oldest first
	faults     []*s3Fault
	calls      map[string]int // API calls (not attempts) by operation
	attempts   map[string]int // attempts (what reached the wire, or would have) by operation
}

type s3Version struct {
	id   string
	body []byte
}

// S3Fault is one injected S3 answer.
type S3Fault struct {
	// Operation is "GetObject", "PutObject", …; empty matches all.
	Operation string
	// Status and Code make an S3 error response (e.g. 503 "SlowDown", 403
	// "AccessDenied", 500 "InternalError"); Message is its text.
	Status  int
	Code    string
	Message string
	// Lost sends the request, lets S3 apply it, and loses the response:
	// the SDK sees a connection reset (and retries).
	Lost bool
	// Delay holds the attempt this long before it goes on (normally, or
	// with Status/Lost): a slow S3 that a call's timeout cuts off.
	Delay time.Duration
	// Times fires it on the next Times matching attempts; 0: every one.
	Times int
}

type s3Fault struct {
	S3Fault
	left int
}

// NewS3Faults returns middleware without faults and without versioning.
func NewS3Faults() *S3Faults {
	return &S3Faults{versions: map[string][]s3Version{}, calls: map[string]int{}, attempts: map[string]int{}}
}

// EnableVersioning makes the bucket behave as a versioned one, as far as
// PutObject and GetObject go: every PutObject returns a new VersionId, and a
// GetObject with a VersionId reads that version (404 NoSuchVersion for one
// that was never written).
func (f *S3Faults) EnableVersioning() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versioning = true
}

// Add installs a fault.
func (f *S3Faults) Add(fault S3Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &s3Fault{S3Fault: fault, left: fault.Times})
}

// Clear removes every fault (versions and tallies stay).
func (f *S3Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Calls returns how many API calls of operation were made (an SDK retry
// is the same call).
func (f *S3Faults) Calls(operation string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[operation]
}

// Attempts returns how many attempts of operation were made (each SDK
// retry is one more).
func (f *S3Faults) Attempts(operation string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[operation]
}

// Versions returns the version ids written to bucket/key, oldest first.
func (f *S3Faults) Versions(bucket, key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, v := range f.versions[bucket+"/"+key] {
		ids = append(ids, v.id)
	}
	return ids
}

// Options installs the middleware on an S3 client: pass it to S3 or
// s3.NewFromConfig.
func (f *S3Faults) Options(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, f.install)
}

type s3InputKey struct{}

func (f *S3Faults) install(stack *middleware.Stack) error {
	// Initialize: count the call, keep the input, and for a versioned
	// PutObject keep the bytes written and name the version.
	init := middleware.InitializeMiddlewareFunc("testenv.s3faults.init", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		op := awsmiddleware.GetOperationName(ctx)
		f.mu.Lock()
		f.calls[op]++
		versioning := f.versioning
		f.mu.Unlock()
		put, isPut := in.Parameters.(*s3.PutObjectInput)
		var body []byte
		if isPut && versioning && put.Body != nil {
			b, err := io.ReadAll(put.Body)
			if err != nil {
				return middleware.InitializeOutput{}, middleware.Metadata{}, err
			}
			body = b
			cp := *put
			cp.Body = bytes.NewReader(b)
			in.Parameters = &cp
		}
		out, md, err := next.HandleInitialize(context.WithValue(ctx, s3InputKey{}, in.Parameters), in)
		if err != nil || !isPut || !versioning {
			return out, md, err
		}
		id := newVersionID()
		f.mu.Lock()
		k := aws.ToString(put.Bucket) + "/" + aws.ToString(put.Key)
		f.versions[k] = append(f.versions[k], s3Version{id: id, body: body})
		f.mu.Unlock()
		if po, ok := out.Result.(*s3.PutObjectOutput); ok {
			po.VersionId = aws.String(id)
		}
		return out, md, err
	})
	if err := stack.Initialize.Add(init, middleware.Before); err != nil {
		return err
	}
	// Deserialize, innermost (next to the wire): injected answers and
	// versioned reads are served here as HTTP responses, which the SDK's
	// deserializer then reads as it reads S3's.
	wire := middleware.DeserializeMiddlewareFunc("testenv.s3faults.wire", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		op := awsmiddleware.GetOperationName(ctx)
		f.mu.Lock()
		f.attempts[op]++
		fault := f.pick(op)
		f.mu.Unlock()
		if fault != nil && fault.Delay > 0 {
			select {
			case <-time.After(fault.Delay):
			case <-ctx.Done():
				return middleware.DeserializeOutput{}, middleware.Metadata{}, ctx.Err()
			}
		}
		switch {
		case fault != nil && fault.Lost:
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil {
				return out, md, err
			}
			if r, ok := out.RawResponse.(*smithyhttp.Response); ok && r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			return middleware.DeserializeOutput{}, md, fmt.Errorf("testenv: %s: read: connection reset by peer (injected: response lost after S3 applied the request)", op)
		case fault != nil && fault.Status != 0:
			return middleware.DeserializeOutput{RawResponse: errorResponse(fault.Status, fault.Code, fault.Message)}, middleware.Metadata{}, nil
		}
		if get, ok := ctx.Value(s3InputKey{}).(*s3.GetObjectInput); ok && get.VersionId != nil {
			if r := f.versionedRead(get); r != nil {
				return middleware.DeserializeOutput{RawResponse: r}, middleware.Metadata{}, nil
			}
		}
		return next.HandleDeserialize(ctx, in)
	})
	return stack.Deserialize.Add(wire, middleware.After)
}

// pick returns the fault for this attempt of op (f.mu held).
func (f *S3Faults) pick(op string) *s3Fault {
	for _, r := range f.faults {
		if r.Operation != "" && r.Operation != op {
			continue
		}
		if r.Times > 0 {
			if r.left == 0 {
				continue
			}
			r.left--
		}
		return r
	}
	return nil
}

// versionedRead answers a GetObject that names a version, when versioning
// is on: the version's bytes, or 404 NoSuchVersion.
func (f *S3Faults) versionedRead(in *s3.GetObjectInput) *smithyhttp.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.versioning {
		return nil
	}
	for _, v := range f.versions[aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key)] {
		if v.id == aws.ToString(in.VersionId) {
			h := http.Header{}
			h.Set("Content-Length", strconv.Itoa(len(v.body)))
			h.Set("Content-Type", "application/json")
			h.Set("x-amz-version-id", v.id)
			h.Set("ETag", `"`+v.id+`"`)
			return &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusOK, Header: h,
				ContentLength: int64(len(v.body)), Body: io.NopCloser(bytes.NewReader(v.body))}}
		}
	}
	return errorResponse(http.StatusNotFound, "NoSuchVersion", "The specified version does not exist.")
}

// errorResponse is an S3 error as S3 sends it.
func errorResponse(status int, code, message string) *smithyhttp.Response {
	if message == "" {
		message = "injected " + code
	}
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message><RequestId>TESTENV%s</RequestId><HostId>testenv</HostId></Error>`,
		code, message, newVersionID()[:8])
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("x-amz-request-id", "TESTENV")
	return &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: h, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader([]byte(body)))}}
}

func newVersionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// S3ObjectInput is a PutObjectInput for body at bucket/key, for tests that
// write objects directly.
func S3ObjectInput(bucket, key string, body []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256}
}
