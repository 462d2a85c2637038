package s3payload_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/s3payload"
)

// A message sent by the AWS SQS Extended Client library for Java or
// Python: the body points at the original body in S3, and the size
// attribute says how large it is.
func ExampleExtendedPointer() {
	body := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"acme-payloads","s3Key":"0b7e9c2a-5f1d-4c1e-9a51-2f0c1f3f8f11"}]`
	attrs := map[string]sqstypes.MessageAttributeValue{
		s3payload.AttrExtendedPayloadSize: {DataType: aws.String("Number"), StringValue: aws.String("734003")},
	}
	p, ok, err := s3payload.ExtendedPointer(body, attrs)
	fmt.Println(ok, err)
	fmt.Printf("s3://%s/%s, %d bytes (%s)\n", p.Bucket, p.Key, p.Size, p.SizeAttribute)

	// An ordinary envelope is not one.
	_, ok, _ = s3payload.ExtendedPointer(`{"schemaVersion":1}`, nil)
	fmt.Println(ok)
	// Output:
	// true <nil>
	// s3://acme-payloads/0b7e9c2a-5f1d-4c1e-9a51-2f0c1f3f8f11, 734003 bytes (ExtendedPayloadSize)
	// false
}
