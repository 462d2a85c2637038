package failure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
)

func TestClassify(t *testing.T) {
	resp500 := &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 503}}, Err: errors.New("boom")}
	tests := []struct {
		name string
		err  error
		kind failure.Kind
		code string
	}{
		{"typed terminal passes through", fmt.Errorf("wrapped: %w", failure.NewTerminal("CASE_NOT_FOUND", "no case")), failure.Terminal, "CASE_NOT_FOUND"},
		{"typed retryable passes through", failure.NewRetryable("DOWNSTREAM", "x"), failure.Retryable, "DOWNSTREAM"},
		{"dynamodb throttling", &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, failure.Retryable, failure.CodeThrottled},
		{"sqs prefixed throttling", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.RequestThrottled"}, failure.Retryable, failure.CodeThrottled},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), failure.Retryable, failure.CodeTimeout},
		{"5xx", resp500, failure.Retryable, failure.CodeServiceUnavailable},
		{"validation is terminal", &smithy.GenericAPIError{Code: "ValidationException", Message: "two ops on one item"}, failure.Terminal, failure.CodeInvalidTransaction},
		{"unknown is retryable with fallback", errors.New("mystery"), failure.Retryable, failure.CodeHandlerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := failure.Classify(tt.err, failure.CodeHandlerError)
			require.Equal(t, tt.kind, f.Kind)
			require.Equal(t, tt.code, f.Code)
		})
	}
	require.Nil(t, failure.Classify(nil, "X"))
}

// TestClassifyReplicatedWriteConflict: an MRSC global table answers a
// write to an item being modified from another Region with
// ReplicatedWriteConflictException, which AWS documents as retryable. It
// is infrastructure (no business attempt, never terminal by itself), with
// its own code. Before, it fell through to the caller's fallback code: a
// handler error that counted a business attempt. (The code is spelled out:
// the test must compile on the code it guards against.)
func TestClassifyReplicatedWriteConflict(t *testing.T) {
	for name, err := range map[string]error{
		"typed, as the SDK returns it": &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem",
			Err: &ddbtypes.ReplicatedWriteConflictException{Message: aws.String("item is being modified in another Region")}},
		"generic, by its code": fmt.Errorf("commit: %w", &smithy.GenericAPIError{Code: "ReplicatedWriteConflictException"}),
	} {
		t.Run(name, func(t *testing.T) {
			f := failure.Classify(err, failure.CodeHandlerError)
			require.Equal(t, failure.Retryable, f.Kind)
			require.Equal(t, "REPLICATED_WRITE_CONFLICT", f.Code)
			require.True(t, f.Infrastructure(), "a cross-Region write conflict is infrastructure: it charges no business attempt")
			require.ErrorIs(t, f, err)
		})
	}
}

func TestErrorIsKindSentinel(t *testing.T) {
	err := fmt.Errorf("handler: %w", failure.NewTerminal("BAD", "bad data"))
	require.ErrorIs(t, err, failure.ErrTerminal)
	require.NotErrorIs(t, err, failure.ErrRetryable)
	cause := errors.New("cause")
	w := failure.Wrap(failure.Retryable, "X", cause)
	require.ErrorIs(t, w, cause)
	require.ErrorIs(t, w, failure.ErrRetryable)
	require.Equal(t, "failure: retryable X: cause", w.Error())
}

func ExampleNewTerminal() {
	err := fmt.Errorf("load case: %w", failure.NewTerminal("CASE_NOT_FOUND", "case c-1 does not exist"))
	f, _ := failure.As(err)
	fmt.Println(f.Kind, f.Code, errors.Is(err, failure.ErrTerminal))
	// Output: terminal CASE_NOT_FOUND true
}

// Throttling whose reasons all name a key range is a hot partition, not a
// sick table (KeyRangeThrottle); every other reason, none, or a mix is
// database-wide. One case per reason AWS documents (16), and the shapes.
func TestKeyRangeThrottle(t *testing.T) {
	reasons := func(rs ...string) []ddbtypes.ThrottlingReason {
		out := make([]ddbtypes.ThrottlingReason, len(rs))
		for i, r := range rs {
			out[i] = ddbtypes.ThrottlingReason{Reason: aws.String(r), Resource: aws.String("arn:aws:dynamodb:eu-west-1:123456789012:table/t")}
		}
		return out
	}
	for _, tc := range []struct {
		reason   string
		keyRange bool
	}{
		{"TableReadKeyRangeThroughputExceeded", true},
		{"TableWriteKeyRangeThroughputExceeded", true},
		{"IndexReadKeyRangeThroughputExceeded", true},
		{"IndexWriteKeyRangeThroughputExceeded", true},
		{"TableReadProvisionedThroughputExceeded", false},
		{"TableWriteProvisionedThroughputExceeded", false},
		{"IndexReadProvisionedThroughputExceeded", false},
		{"IndexWriteProvisionedThroughputExceeded", false},
		{"TableReadAccountLimitExceeded", false},
		{"TableWriteAccountLimitExceeded", false},
		{"IndexReadAccountLimitExceeded", false},
		{"IndexWriteAccountLimitExceeded", false},
		{"TableReadMaxOnDemandThroughputExceeded", false},
		{"TableWriteMaxOnDemandThroughputExceeded", false},
		{"IndexReadMaxOnDemandThroughputExceeded", false},
		{"IndexWriteMaxOnDemandThroughputExceeded", false},
		{"SomeFutureReason", false},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			require.Equal(t, tc.keyRange, failure.IsKeyRangeReason(tc.reason))
			for _, err := range []error{
				&ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("x"), ThrottlingReasons: reasons(tc.reason)},
				&ddbtypes.ThrottlingException{Message: aws.String("x"), ThrottlingReasons: reasons(tc.reason)},
				&ddbtypes.RequestLimitExceeded{Message: aws.String("x"), ThrottlingReasons: reasons(tc.reason)},
			} {
				wrapped := fmt.Errorf("mutation: commit: %w", err)
				require.Equal(t, tc.keyRange, failure.KeyRangeThrottle(wrapped), "%T", err)
				f := failure.Classify(wrapped, failure.CodeHandlerError)
				require.Equal(t, failure.CodeThrottled, f.Code, "still a throttle, still infrastructure")
				require.True(t, f.Infrastructure())
				require.Equal(t, tc.keyRange, failure.KeyRangeThrottle(f), "the failure keeps its cause")
			}
		})
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"no reasons", &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("x")}},
		{"key range beside a table reason", &ddbtypes.ProvisionedThroughputExceededException{
			ThrottlingReasons: reasons("TableWriteKeyRangeThroughputExceeded", "TableWriteProvisionedThroughputExceeded")}},
		{"a generic throttle", &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}},
		{"a transaction's ThrottlingError names no reason", &ddbtypes.TransactionCanceledException{
			CancellationReasons: []ddbtypes.CancellationReason{{Code: aws.String("ThrottlingError")}}}},
		{"nil", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.False(t, failure.KeyRangeThrottle(tc.err), "database-wide: the health gate's")
		})
	}
	require.True(t, failure.KeyRangeThrottle(&ddbtypes.ThrottlingException{
		ThrottlingReasons: reasons("TableWriteKeyRangeThroughputExceeded", "IndexWriteKeyRangeThroughputExceeded")}), "key ranges of a table and its index")
}
