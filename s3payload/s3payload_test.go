package s3payload_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/s3payload"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// put writes body at bucket/key through c.
func put(t *testing.T, c *s3.Client, bucket, key string, body []byte) *s3.PutObjectOutput {
	t.Helper()
	out, err := c.PutObject(context.Background(), testenv.S3ObjectInput(bucket, key, body))
	require.NoError(t, err)
	return out
}

func requirePayloadError(t *testing.T, err error, code string, kind failure.Kind, infra bool) *s3payload.Error {
	t.Helper()
	require.Error(t, err)
	var pe *s3payload.Error
	require.ErrorAs(t, err, &pe, "%v", err)
	require.ErrorIs(t, err, s3payload.ErrPayload)
	require.Equal(t, code, pe.Code, pe.Error())
	require.Equal(t, kind, pe.Kind, pe.Error())
	require.Equal(t, infra, pe.Infrastructure(), pe.Error())
	f := pe.Failure()
	require.Equal(t, code, f.Code)
	require.Equal(t, kind, f.Kind)
	return pe
}

// TestFetch runs every classification against fauxqs's S3 through the
// SDK; what fauxqs cannot do (versions, SlowDown, 5xx, AccessDenied, KMS,
// lost responses, a slow S3) is served by testenv.S3Faults on the wire.
func TestFetch(t *testing.T) {
	payload := []byte(`{"caseId":"c-1","amount":1234,"note":"by reference"}`)
	other := []byte(`{"caseId":"c-1","amount":9999,"note":"by reference"}`) // same length
	type setup struct {
		faults *testenv.S3Faults
		c      *s3.Client
		bucket string
		ref    envelope.PayloadRef
	}
	for _, tc := range []struct {
		name    string
		cfg     s3payload.Config
		prepare func(t *testing.T, s *setup)
		code    string // "": success
		kind    failure.Kind
		infra   bool
		// attempts of GetObject expected on the wire (-1: don't check)
		attempts int
	}{
		{name: "current object", attempts: 1},
		{name: "pinned version of a versioned bucket, after the key was overwritten", attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.faults.EnableVersioning()
			s.ref.VersionID = aws.ToString(put(t, s.c, s.bucket, s.ref.Key, payload).VersionId)
			require.NotEmpty(t, s.ref.VersionID)
			put(t, s.c, s.bucket, s.ref.Key, other) // the current version is other now
		}},
		{name: "missing object", code: s3payload.CodeNotFound, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.ref.Key = "nothing-here"
		}},
		{name: "missing bucket", code: s3payload.CodeNotFound, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.ref.Bucket = testenv.Unique("nobucket")
		}},
		{name: "missing version", code: s3payload.CodeVersionNotFound, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.faults.EnableVersioning()
			put(t, s.c, s.bucket, s.ref.Key, payload)
			s.ref.VersionID = "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"
		}},
		{name: "version id of a delete marker (405)", code: s3payload.CodeVersionNotFound, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.ref.VersionID = "deletemarker"
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed"})
		}},
		{name: "checksum mismatch", code: s3payload.CodeChecksumMismatch, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			put(t, s.c, s.bucket, s.ref.Key, other)
		}},
		{name: "size mismatch", code: s3payload.CodeSizeMismatch, kind: failure.Terminal, attempts: 1, prepare: func(t *testing.T, s *setup) {
			put(t, s.c, s.bucket, s.ref.Key, append(append([]byte{}, payload...), ' '))
		}},
		{name: "reference larger than MaxBytes: not fetched", cfg: s3payload.Config{MaxBytes: 16}, code: s3payload.CodeTooLarge,
			kind: failure.Terminal, attempts: 0},
		{name: "object larger than MaxBytes", cfg: s3payload.Config{MaxBytes: 64}, code: s3payload.CodeTooLarge, kind: failure.Terminal, attempts: 1,
			prepare: func(t *testing.T, s *setup) {
				put(t, s.c, s.bucket, s.ref.Key, []byte(strings.Repeat("x", 100)))
				s.ref.Size = 60
			}},
		{name: "SlowDown once: the SDK retries", attempts: 2, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusServiceUnavailable, Code: "SlowDown", Times: 1})
		}},
		{name: "SlowDown on every attempt", code: failure.CodeThrottled, kind: failure.Retryable, infra: true, attempts: 3, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusServiceUnavailable, Code: "SlowDown"})
		}},
		{name: "503 ServiceUnavailable", code: failure.CodeServiceUnavailable, kind: failure.Retryable, infra: true, attempts: 3, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable"})
		}},
		{name: "500 InternalError", code: failure.CodeServiceUnavailable, kind: failure.Retryable, infra: true, attempts: 3, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusInternalServerError, Code: "InternalError"})
		}},
		{name: "slow S3: the call's timeout", cfg: s3payload.Config{CallTimeout: 200 * time.Millisecond}, code: failure.CodeTimeout,
			kind: failure.Retryable, infra: true, attempts: -1, prepare: func(t *testing.T, s *setup) {
				s.faults.Add(testenv.S3Fault{Operation: "GetObject", Delay: 5 * time.Second})
			}},
		{name: "response lost once: fetched again", attempts: 2, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Lost: true, Times: 1})
		}},
		{name: "AccessDenied", code: s3payload.CodeAccessDenied, kind: failure.Retryable, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusForbidden, Code: "AccessDenied", Message: "Access Denied"})
		}},
		{name: "KMS key disabled", code: s3payload.CodeAccessDenied, kind: failure.Retryable, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusBadRequest, Code: "KMS.DisabledException"})
		}},
		{name: "another 4xx", code: s3payload.CodeFetchFailed, kind: failure.Retryable, attempts: 1, prepare: func(t *testing.T, s *setup) {
			s.faults.Add(testenv.S3Fault{Operation: "GetObject", Status: http.StatusBadRequest, Code: "InvalidRequest"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &setup{faults: testenv.NewS3Faults()}
			s.c = testenv.S3(t, s.faults.Options)
			s.bucket = testenv.NewBucket(t, s.c)
			s.ref = envelope.PayloadRef{Bucket: s.bucket, Key: "payloads/" + t.Name(), SHA256: sum(payload), Size: int64(len(payload))}
			put(t, s.c, s.bucket, s.ref.Key, payload)
			if tc.prepare != nil {
				tc.prepare(t, s)
			}
			f, err := s3payload.New(s3payload.Deps{S3: s.c}, tc.cfg)
			require.NoError(t, err)
			before := s.faults.Attempts("GetObject")
			got, err := f.Fetch(context.Background(), s.ref)
			if tc.code == "" {
				require.NoError(t, err)
				require.Equal(t, string(payload), string(got))
			} else {
				require.Nil(t, got)
				pe := requirePayloadError(t, err, tc.code, tc.kind, tc.infra)
				require.Equal(t, s.ref.Bucket, pe.Bucket)
				require.Equal(t, s.ref.VersionID, pe.VersionID)
			}
			if tc.attempts >= 0 {
				require.Equal(t, tc.attempts, s.faults.Attempts("GetObject")-before, "GetObject attempts on the wire")
			}
		})
	}
}

func TestExtendedPointer(t *testing.T) {
	attr := func(name, v string) map[string]sqstypes.MessageAttributeValue {
		return map[string]sqstypes.MessageAttributeValue{name: {DataType: aws.String("Number"), StringValue: aws.String(v)}}
	}
	javaBody := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"bkt","s3Key":"3f1c-uuid"}]`
	legacyBody := `["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"bkt","s3Key":"k/2"}]`
	for _, tc := range []struct {
		name  string
		body  string
		attrs map[string]sqstypes.MessageAttributeValue
		ok    bool
		want  s3payload.Pointer
		code  string
	}{
		{"Java 2.x / Python", javaBody, attr("ExtendedPayloadSize", "300000"), true,
			s3payload.Pointer{Class: s3payload.ClassPayloadS3Pointer, Bucket: "bkt", Key: "3f1c-uuid", Size: 300000, SizeAttribute: "ExtendedPayloadSize"}, ""},
		{"legacy attribute and class", legacyBody, attr("SQSLargePayloadSize", "12"), true,
			s3payload.Pointer{Class: s3payload.ClassLegacyMessageS3Pointer, Bucket: "bkt", Key: "k/2", Size: 12, SizeAttribute: "SQSLargePayloadSize"}, ""},
		{"pointer whose attribute was shed (a DLQ copy)", javaBody, nil, true,
			s3payload.Pointer{Class: s3payload.ClassPayloadS3Pointer, Bucket: "bkt", Key: "3f1c-uuid"}, ""},
		{"an envelope", `{"messageId":"m"}`, nil, false, s3payload.Pointer{}, ""},
		{"some other array without the attribute", `[1,2]`, nil, false, s3payload.Pointer{}, ""},
		{"attribute with an envelope body", `{"messageId":"m"}`, attr("ExtendedPayloadSize", "10"), true, s3payload.Pointer{}, s3payload.CodePointerInvalid},
		{"attribute with an unknown class", `["x.Y",{"s3BucketName":"b","s3Key":"k"}]`, attr("ExtendedPayloadSize", "10"), true, s3payload.Pointer{}, s3payload.CodePointerInvalid},
		{"attribute with no key", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b"}]`, attr("ExtendedPayloadSize", "10"), true, s3payload.Pointer{}, s3payload.CodePointerInvalid},
		{"size attribute not a number", javaBody, attr("ExtendedPayloadSize", "big"), true, s3payload.Pointer{}, s3payload.CodePointerInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok, err := s3payload.ExtendedPointer(tc.body, tc.attrs)
			require.Equal(t, tc.ok, ok)
			if tc.code != "" {
				requirePayloadError(t, err, tc.code, failure.Terminal, false)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, p)
			if ok {
				// What Body and Attributes write reads back the same.
				again, ok2, err := s3payload.ExtendedPointer(p.Body(), p.Attributes())
				require.NoError(t, err)
				require.True(t, ok2)
				if p.SizeAttribute == "" {
					again.SizeAttribute = ""
				}
				require.Equal(t, p, again)
			}
		})
	}
	require.JSONEq(t, javaBody, s3payload.Pointer{Bucket: "bkt", Key: "3f1c-uuid"}.Body(), "the libraries' body, byte for byte in meaning")
}

func TestFetchPointer(t *testing.T) {
	c := testenv.S3(t)
	bucket := testenv.NewBucket(t, c)
	body := []byte(`{"schemaVersion":1,"messageId":"m-1"}`)
	put(t, c, bucket, "k", body)
	f, err := s3payload.New(s3payload.Deps{S3: c}, s3payload.Config{MaxBytes: 1024})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		p    s3payload.Pointer
		code string
	}{
		{"declared size matches", s3payload.Pointer{Bucket: bucket, Key: "k", Size: int64(len(body)), SizeAttribute: s3payload.AttrExtendedPayloadSize}, ""},
		{"no size declared", s3payload.Pointer{Bucket: bucket, Key: "k"}, ""},
		{"declared size differs", s3payload.Pointer{Bucket: bucket, Key: "k", Size: 7, SizeAttribute: s3payload.AttrExtendedPayloadSize}, s3payload.CodeSizeMismatch},
		{"declared size over MaxBytes", s3payload.Pointer{Bucket: bucket, Key: "k", Size: 300000, SizeAttribute: s3payload.AttrExtendedPayloadSize}, s3payload.CodeTooLarge},
		{"missing object", s3payload.Pointer{Bucket: bucket, Key: "gone"}, s3payload.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.FetchPointer(context.Background(), tc.p)
			if tc.code == "" {
				require.NoError(t, err)
				require.Equal(t, string(body), string(got))
				return
			}
			requirePayloadError(t, err, tc.code, failure.Terminal, false)
		})
	}
}

func TestOffloader(t *testing.T) {
	payload := []byte(`{"invoiceId":"inv-9","lines":[1,2,3]}`)
	t.Run("uploads with its checksum; the reference fetches the same bytes", func(t *testing.T) {
		faults := testenv.NewS3Faults()
		c := testenv.S3(t, faults.Options)
		bucket := testenv.NewBucket(t, c)
		o, err := s3payload.NewOffloader(s3payload.OffloaderDeps{S3: c}, s3payload.OffloaderConfig{Bucket: bucket, Prefix: "p/"})
		require.NoError(t, err)
		ref, err := o.Offload(context.Background(), "InvoiceIssued", payload)
		require.NoError(t, err)
		require.Equal(t, envelope.PayloadRef{Bucket: bucket, Key: "p/InvoiceIssued/" + sum(payload), SHA256: sum(payload), Size: int64(len(payload))}, ref)
		head, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(ref.Key), ChecksumMode: "ENABLED"})
		require.NoError(t, err)
		require.NotEmpty(t, aws.ToString(head.ChecksumSHA256), "the upload carried its SHA-256")
		f, err := s3payload.New(s3payload.Deps{S3: c}, s3payload.Config{})
		require.NoError(t, err)
		got, err := f.Fetch(context.Background(), ref)
		require.NoError(t, err)
		require.Equal(t, string(payload), string(got))

		// A lost response: the SDK retries, the same key gets the same
		// bytes, and the reference is the same.
		faults.Add(testenv.S3Fault{Operation: "PutObject", Lost: true, Times: 1})
		before := faults.Attempts("PutObject")
		again, err := o.Offload(context.Background(), "InvoiceIssued", payload)
		require.NoError(t, err)
		require.Equal(t, ref, again)
		require.Equal(t, 2, faults.Attempts("PutObject")-before)
	})
	t.Run("versioned bucket: the reference pins the version", func(t *testing.T) {
		faults := testenv.NewS3Faults()
		faults.EnableVersioning()
		c := testenv.S3(t, faults.Options)
		bucket := testenv.NewBucket(t, c)
		o, err := s3payload.NewOffloader(s3payload.OffloaderDeps{S3: c}, s3payload.OffloaderConfig{Bucket: bucket})
		require.NoError(t, err)
		ref, err := o.Offload(context.Background(), "InvoiceIssued", payload)
		require.NoError(t, err)
		require.Equal(t, faults.Versions(bucket, ref.Key), []string{ref.VersionID})
		require.True(t, strings.HasPrefix(ref.Key, s3payload.DefaultPrefix))
	})
	t.Run("refusals", func(t *testing.T) {
		c := testenv.S3(t)
		o, err := s3payload.NewOffloader(s3payload.OffloaderDeps{S3: c}, s3payload.OffloaderConfig{Bucket: "b-unused", MaxBytes: 8})
		require.NoError(t, err)
		_, err = o.Offload(context.Background(), "T", []byte(`{"a":"123456789"}`))
		require.ErrorContains(t, err, "MaxBytes")
		_, err = o.Offload(context.Background(), "T", nil)
		require.Error(t, err)
		_, err = o.Offload(context.Background(), "a/b", []byte(`1`))
		require.Error(t, err)
	})
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := s3payload.New(s3payload.Deps{}, s3payload.Config{MaxBytes: -1, CallTimeout: time.Millisecond, CallAttempts: 11})
	require.Error(t, err)
	for _, want := range []string{"Deps.S3", "MaxBytes", "CallTimeout", "CallAttempts"} {
		require.ErrorContains(t, err, want)
	}
	_, err = s3payload.NewOffloader(s3payload.OffloaderDeps{}, s3payload.OffloaderConfig{SSEKMSKeyID: "k"})
	for _, want := range []string{"OffloaderDeps.S3", "Bucket", "SSEKMSKeyID"} {
		require.ErrorContains(t, err, want)
	}
	cfg, err := s3payload.Config{}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, s3payload.Config{MaxBytes: 4 << 20, CallTimeout: 10 * time.Second, CallAttempts: 3}, cfg)
}
