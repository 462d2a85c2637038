package tables_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

func TestEnableStream(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		existing types.StreamViewType // "" : no stream yet
		wantErr  bool
	}{
		{name: "no stream", existing: ""},
		{name: "new image", existing: types.StreamViewTypeNewImage},
		{name: "new and old images", existing: types.StreamViewTypeNewAndOldImages},
		{name: "keys only", existing: types.StreamViewTypeKeysOnly, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.New(t, testenv.Options{NoQueue: true})
			if tt.existing != "" {
				_, err := env.DynamoDB.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(env.Table),
					StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: tt.existing}})
				require.NoError(t, err)
			}
			arn, err := tables.EnableStream(ctx, env.DynamoDB, env.Table, time.Minute)
			if tt.wantErr {
				require.ErrorIs(t, err, tables.ErrIncompatible)
				require.ErrorContains(t, err, "KEYS_ONLY")
				return
			}
			require.NoError(t, err)
			require.Contains(t, arn, "table/"+env.Table+"/stream/")
			again, err := tables.EnableStream(ctx, env.DynamoDB, env.Table, time.Minute)
			require.NoError(t, err)
			require.Equal(t, arn, again, "idempotent: the same stream")
			desc, err := env.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(env.Table)})
			require.NoError(t, err)
			want := tt.existing
			if want == "" {
				want = types.StreamViewTypeNewImage
			}
			require.Equal(t, want, desc.Table.StreamSpecification.StreamViewType)
		})
	}
}
