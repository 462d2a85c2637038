package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// MRSC is a dynamodb option func under which the table answers as a global
// table with multi-Region strong consistency (MRSC) would, as AWS documents
// it (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html):
// DescribeTable reports MultiRegionConsistency STRONG; DescribeTimeToLive
// reports TTL disabled (MRSC does not support TTL); TransactWriteItems and
// TransactGetItems fail before they are sent ("will return an error if
// those operations are invoked on an MRSC replica": AWS names no code;
// ValidationException here). Everything else reaches the emulator as it
// is. Cross-Region write conflicts are the injector's to add: a Rule with
// Err ReplicatedWriteConflict().
func MRSC(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("faults.mrsc", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			switch op := awsmiddleware.GetOperationName(ctx); op {
			case "TransactWriteItems", "TransactGetItems":
				return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
					Err: &smithy.GenericAPIError{Code: "ValidationException", Message: "injected: a global table with multi-Region strong consistency does not support transactions", Fault: smithy.FaultClient}}
			}
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				return out, md, err
			}
			switch r := out.Result.(type) {
			case *dynamodb.DescribeTableOutput:
				if r.Table != nil {
					r.Table.MultiRegionConsistency = types.MultiRegionConsistencyStrong
				}
			case *dynamodb.DescribeTimeToLiveOutput:
				r.TimeToLiveDescription = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
			}
			return out, md, err
		}), middleware.After)
	})
}

// ReplicatedWriteConflict is the error an MRSC table answers a write with
// when the item is being modified from another Region (nothing written).
func ReplicatedWriteConflict() error {
	return &types.ReplicatedWriteConflictException{Message: aws.String("injected: one or more items in this request are being modified by a request in another Region")}
}
