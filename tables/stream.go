package tables

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// StreamAPI is what EnableStream needs of DynamoDB.
type StreamAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, params *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// EnableStream turns the table's DynamoDB Stream on with NEW_IMAGE records
// (what the outbox relay reads), waits until the table is ACTIVE again and
// returns the stream's ARN; wait bounds the wait (≤ 0:
// DefaultWaitTimeout). A table whose stream is already on keeps it
// when its view type carries the new image (NEW_IMAGE or
// NEW_AND_OLD_IMAGES); a KEYS_ONLY or OLD_IMAGE stream is an
// *IncompatibleError (changing it would break its other readers).
func EnableStream(ctx context.Context, api StreamAPI, name string, wait time.Duration) (string, error) {
	if wait <= 0 {
		wait = DefaultWaitTimeout
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("tables: describe %s: %w", name, err)
	}
	if s := desc.Table.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		switch s.StreamViewType {
		case types.StreamViewTypeNewImage, types.StreamViewTypeNewAndOldImages:
			return aws.ToString(desc.Table.LatestStreamArn), nil
		}
		return "", &IncompatibleError{Table: name, Problem: fmt.Sprintf("its stream's view type is %s: the outbox relay needs NEW_IMAGE or NEW_AND_OLD_IMAGES", s.StreamViewType)}
	}
	_, err = api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}})
	if err != nil {
		return "", fmt.Errorf("tables: enable the stream of %s: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, wait)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNotActive, name, err)
	}
	return aws.ToString(out.Table.LatestStreamArn), nil
}
