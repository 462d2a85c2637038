package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/tables"
)

func TestClassifyCall(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	reasons := func(codes ...string) error {
		e := &types.TransactionCanceledException{}
		for _, c := range codes {
			e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return e
	}
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("boom")}
	}
	for _, tc := range []struct {
		name   string
		parent context.Context
		err    error
		want   dbResult
	}{
		{"ok", context.Background(), nil, dbOK},
		{"condition failed is an answer", context.Background(), &types.ConditionalCheckFailedException{}, dbConditionFailed},
		{"guard failed in a transaction", context.Background(), reasons("ConditionalCheckFailed", "None"), dbConditionFailed},
		{"conflict is contention, not sickness", context.Background(), reasons("None", "TransactionConflict"), dbConflict},
		{"throttled inside a transaction", context.Background(), reasons("ThrottlingError", "None"), dbThrottled},
		{"throttled", context.Background(), &types.ProvisionedThroughputExceededException{}, dbThrottled},
		{"throttled by code", context.Background(), &smithy.GenericAPIError{Code: "ThrottlingException"}, dbThrottled},
		{"a hot key range is not the database's sickness", context.Background(), &types.ProvisionedThroughputExceededException{
			ThrottlingReasons: []types.ThrottlingReason{{Reason: aws.String("TableWriteKeyRangeThroughputExceeded")}}}, dbKeyThrottled},
		{"an index's hot key range", context.Background(), &types.ThrottlingException{
			ThrottlingReasons: []types.ThrottlingReason{{Reason: aws.String("IndexWriteKeyRangeThroughputExceeded")}}}, dbKeyThrottled},
		{"the table's provisioned throughput is", context.Background(), &types.ProvisionedThroughputExceededException{
			ThrottlingReasons: []types.ThrottlingReason{{Reason: aws.String("TableWriteProvisionedThroughputExceeded")}}}, dbThrottled},
		{"the on-demand maximum is", context.Background(), &types.ThrottlingException{
			ThrottlingReasons: []types.ThrottlingReason{{Reason: aws.String("TableWriteMaxOnDemandThroughputExceeded")}}}, dbThrottled},
		{"the account's limit is", context.Background(), &types.RequestLimitExceeded{
			ThrottlingReasons: []types.ThrottlingReason{{Reason: aws.String("IndexWriteAccountLimitExceeded")}}}, dbThrottled},
		{"5xx", context.Background(), status(503), dbUnavailable},
		{"timeout", context.Background(), context.DeadlineExceeded, dbTimeout},
		{"refused", context.Background(), &smithy.GenericAPIError{Code: "ValidationException"}, dbRequestRefused},
		{"the caller gave up", cancelled, context.Canceled, dbCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyCall(tc.parent, tc.err)
			require.Equal(t, tc.want, got, dbResultNames[got])
			require.Equal(t, tc.want == dbThrottled || tc.want == dbUnavailable || tc.want == dbTimeout, got.unhealthy())
		})
	}
}

func TestWriteUnitEstimates(t *testing.T) {
	small := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "IDEMP#k"}, "n": &types.AttributeValueMemberN{Value: "12"}}
	big := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "x"}, "note": &types.AttributeValueMemberS{Value: strings.Repeat("a", 2500)}}
	require.Equal(t, 2, putWCU(small), "1 KB item + its aggregate index entry")
	require.Equal(t, 4, putWCU(big), "3 started KB + index")
	require.Equal(t, 2*3+2+2, transactWCU([]types.TransactWriteItem{{Put: &types.Put{Item: big}}, {Update: &types.Update{}}, {ConditionCheck: &types.ConditionCheck{}}}),
		"2 per started KB of a Put, 2 per other action")
	require.Greater(t, tables.ItemSize(map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: big}}), 2500)
}
