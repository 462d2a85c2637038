package s3payload

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/ddbworker/ddbworker/failure"
)

// Codes of payload failures. They travel into inbox records, DLQ message
// attributes, logs and metrics like the worker's own codes.
const (
	// CodeNotFound: the object (or its bucket) does not exist. Terminal.
	CodeNotFound = "PAYLOAD_NOT_FOUND"
	// CodeVersionNotFound: the pinned version does not exist (or is a
	// delete marker, or is no valid version id of the bucket). Terminal.
	CodeVersionNotFound = "PAYLOAD_VERSION_NOT_FOUND"
	// CodeChecksumMismatch: the bytes' SHA-256 is not the reference's.
	// Terminal.
	CodeChecksumMismatch = "PAYLOAD_CHECKSUM_MISMATCH"
	// CodeSizeMismatch: the object's length is not the size the reference
	// (or the Extended Client's size attribute) declares. Terminal.
	CodeSizeMismatch = "PAYLOAD_SIZE_MISMATCH"
	// CodeTooLarge: the object is larger than Config.MaxBytes. Terminal.
	CodeTooLarge = "PAYLOAD_TOO_LARGE"
	// CodeAccessDenied: S3 or KMS refused the worker (permissions, a
	// bucket or key policy, credentials, a disabled KMS key). Retryable:
	// it is the deployment's to fix, not the message's; the worker alerts
	// and retries without counting a business attempt.
	CodeAccessDenied = "PAYLOAD_ACCESS_DENIED"
	// CodePointerInvalid: a message marked as an Extended Client message
	// whose body is no pointer the libraries write. Terminal.
	CodePointerInvalid = "PAYLOAD_POINTER_INVALID"
	// CodeFetchFailed: any other refusal by S3 (a 4xx this package does not
	// know). Retryable, counting business attempts, so it ends terminal
	// when they are used up.
	CodeFetchFailed = "PAYLOAD_FETCH_FAILED"
)

// ErrPayload is matched by every *Error.
var ErrPayload = errors.New("s3payload: payload unavailable")

// Error is why a referenced payload could not be used. Code is one of the
// Code* constants or, for infrastructure trouble, failure.CodeThrottled,
// failure.CodeServiceUnavailable or failure.CodeTimeout.
type Error struct {
	Code      string
	Kind      failure.Kind
	Bucket    string
	Key       string
	VersionID string
	// Message says what happened, without payload content.
	Message string
	// Err is the SDK's error, when there is one.
	Err error
}

func (e *Error) Error() string {
	s := "s3payload: " + e.Code
	if e.Bucket != "" {
		s += " s3://" + e.Bucket + "/" + e.Key
		if e.VersionID != "" {
			s += "?versionId=" + e.VersionID
		}
	}
	s += ": " + e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrPayload and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrPayload}
	}
	return []error{ErrPayload, e.Err}
}

// Failure is the failure the worker records for e: its kind and code, and
// its text as the message.
func (e *Error) Failure() *failure.Error {
	return &failure.Error{Kind: e.Kind, Code: e.Code, Message: e.Error(), Err: e}
}

// Infrastructure reports whether e is S3 trouble (throttling, 5xx,
// transport errors, timeouts) that retrying heals without counting a
// business attempt.
func (e *Error) Infrastructure() bool { return e.Failure().Infrastructure() }

// terminal codes, by S3 error code.
var (
	accessCodes = map[string]bool{
		"AccessDenied": true, "AllAccessDisabled": true, "AccountProblem": true, "InvalidAccessKeyId": true,
		"SignatureDoesNotMatch": true, "ExpiredToken": true, "InvalidToken": true, "TokenRefreshRequired": true,
		"InvalidSecurity": true, "RequestTimeTooSkewed": true,
		"KMS.AccessDeniedException": true, "KMS.DisabledException": true, "KMS.NotFoundException": true,
		"KMS.KMSInvalidStateException": true, "KMS.InvalidKeyUsageException": true, "KMS.UnrecognizedClientException": true,
	}
)

// classify maps an error of GetObject (or of reading its body) on the
// object at where to an *Error.
func classify(err error, where location) *Error {
	e := &Error{Bucket: where.bucket, Key: where.key, VersionID: where.version, Err: err}
	code := apiCode(err)
	status := httpStatus(err)
	switch {
	case code == "NoSuchVersion",
		where.version != "" && (code == "InvalidArgument" || status == http.StatusMethodNotAllowed || (status == http.StatusNotFound && code != "NoSuchBucket")):
		// A version id that does not exist, is not one of the bucket's, or
		// names a delete marker (405).
		e.Kind, e.Code, e.Message = failure.Terminal, CodeVersionNotFound, "the referenced version does not exist"
	case code == "NoSuchKey", code == "NotFound", status == http.StatusNotFound:
		e.Kind, e.Code, e.Message = failure.Terminal, CodeNotFound, "the object does not exist"
		if code == "NoSuchBucket" {
			e.Message = "the bucket does not exist"
		}
	case accessCodes[code], status == http.StatusForbidden && code != "InvalidObjectState":
		e.Kind, e.Code, e.Message = failure.Retryable, CodeAccessDenied, "S3 refused the worker access ("+orUnknown(code)+"): check its IAM policy (s3:GetObject, s3:GetObjectVersion), the bucket policy and, under SSE-KMS, kms:Decrypt"
	default:
		f := failure.Classify(err, CodeFetchFailed)
		e.Kind, e.Code, e.Message = f.Kind, f.Code, "the fetch failed"
		if f.Kind == failure.Terminal {
			// Nothing S3 answers is a request the worker built wrong for
			// good; let attempts bound it.
			e.Kind, e.Code = failure.Retryable, CodeFetchFailed
		}
		if e.Code == CodeFetchFailed && code != "" {
			e.Message = "S3 refused the fetch (" + code + ")"
		}
	}
	return e
}

func orUnknown(s string) string {
	if s == "" {
		return "no code"
	}
	return s
}

// apiCode is err's AWS error code as S3 sends it (KMS codes keep their
// "KMS." prefix).
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// location names an object (and version) in errors.
type location struct{ bucket, key, version string }
