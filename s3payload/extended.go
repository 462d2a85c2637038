package s3payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/failure"
)

// The AWS SQS Extended Client libraries' format, as written by
// amazon-sqs-java-extended-client-lib 2.0.4 (with
// payloadoffloading-common 2.1.3) and amazon-sqs-python-extended-client-lib
// (amazon-sqs-extended-client 0.1.0 on PyPI): the message body is a JSON
// array of the pointer's Java class name and the pointer,
//
//	["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]
//
// and the message carries the original body's size in UTF-8 bytes as the
// Number attribute ExtendedPayloadSize (SQSLargePayloadSize when the
// producer's library uses the legacy name). The object holds the original
// body unchanged.
const (
	// AttrExtendedPayloadSize is the libraries' reserved message attribute.
	AttrExtendedPayloadSize = "ExtendedPayloadSize"
	// AttrLegacyPayloadSize is its legacy name (Java 1.x; Python's
	// use_legacy_attribute).
	AttrLegacyPayloadSize = "SQSLargePayloadSize"
	// ClassPayloadS3Pointer is the pointer class the current libraries name.
	ClassPayloadS3Pointer = "software.amazon.payloadoffloading.PayloadS3Pointer"
	// ClassLegacyMessageS3Pointer is the class older Java libraries (1.x),
	// and Python with use_legacy_attribute, name.
	ClassLegacyMessageS3Pointer = "com.amazon.sqs.javamessaging.MessageS3Pointer"
)

// Pointer is an Extended Client message's reference to its body in S3.
type Pointer struct {
	// Class is the Java class name the body names (ClassPayloadS3Pointer
	// or ClassLegacyMessageS3Pointer).
	Class  string
	Bucket string
	Key    string
	// Size is the original body's size the size attribute declares (0:
	// the message carried no size attribute).
	Size int64
	// SizeAttribute names the attribute Size came from ("" without one).
	SizeAttribute string
}

// Body returns the message body the libraries write for p.
func (p Pointer) Body() string {
	class := p.Class
	if class == "" {
		class = ClassPayloadS3Pointer
	}
	b, _ := json.Marshal([]any{class, struct {
		Bucket string `json:"s3BucketName"`
		Key    string `json:"s3Key"`
	}{p.Bucket, p.Key}})
	return string(b)
}

// Attributes returns the message attributes the libraries send with p:
// the size attribute (AttrExtendedPayloadSize unless p.SizeAttribute names
// the legacy one).
func (p Pointer) Attributes() map[string]sqstypes.MessageAttributeValue {
	name := AttrExtendedPayloadSize
	if p.SizeAttribute == AttrLegacyPayloadSize {
		name = AttrLegacyPayloadSize
	}
	return map[string]sqstypes.MessageAttributeValue{
		name: {DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(p.Size, 10))},
	}
}

// ExtendedPointer reads an SQS message as an Extended Client message. It
// returns ok false for any other message. A message is one when it carries
// a size attribute (then a body that is no pointer is an *Error
// PAYLOAD_POINTER_INVALID), or when its body is a pointer of a known class
// without the attribute: a DLQ copy or a redrive may have shed the
// producer's attributes, and no envelope is a JSON array.
func ExtendedPointer(body string, attrs map[string]sqstypes.MessageAttributeValue) (p Pointer, ok bool, err error) {
	for _, name := range []string{AttrExtendedPayloadSize, AttrLegacyPayloadSize} {
		v, found := attrs[name]
		if !found {
			continue
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(aws.ToString(v.StringValue)), 10, 64)
		if perr != nil || n < 0 {
			return Pointer{}, true, invalidPointer(fmt.Sprintf("its %s attribute %q is no size in bytes", name, aws.ToString(v.StringValue)))
		}
		p.Size, p.SizeAttribute = n, name
		break
	}
	trimmed := bytes.TrimSpace([]byte(body))
	if p.SizeAttribute == "" && (len(trimmed) == 0 || trimmed[0] != '[') {
		return Pointer{}, false, nil
	}
	q, perr := parsePointer(trimmed)
	if perr != "" {
		if p.SizeAttribute == "" {
			return Pointer{}, false, nil // some other array: the decoder rejects it
		}
		return Pointer{}, true, invalidPointer(perr)
	}
	q.Size, q.SizeAttribute = p.Size, p.SizeAttribute
	return q, true, nil
}

// parsePointer decodes a pointer body; the problem, or "".
func parsePointer(body []byte) (Pointer, string) {
	var parts []json.RawMessage
	if err := json.Unmarshal(body, &parts); err != nil || len(parts) != 2 {
		return Pointer{}, `its body is not the libraries' ["<class>",{"s3BucketName":…,"s3Key":…}]`
	}
	var p Pointer
	if err := json.Unmarshal(parts[0], &p.Class); err != nil || (p.Class != ClassPayloadS3Pointer && p.Class != ClassLegacyMessageS3Pointer) {
		return Pointer{}, fmt.Sprintf("its body names no known pointer class (%s or %s)", ClassPayloadS3Pointer, ClassLegacyMessageS3Pointer)
	}
	var ref struct {
		Bucket *string `json:"s3BucketName"`
		Key    *string `json:"s3Key"`
	}
	if err := json.Unmarshal(parts[1], &ref); err != nil || ref.Bucket == nil || ref.Key == nil || *ref.Bucket == "" || *ref.Key == "" {
		return Pointer{}, "its pointer lacks s3BucketName or s3Key"
	}
	p.Bucket, p.Key = *ref.Bucket, *ref.Key
	return p, ""
}

func invalidPointer(msg string) *Error {
	return &Error{Kind: failure.Terminal, Code: CodePointerInvalid, Message: "an SQS Extended Client message, but " + msg}
}
