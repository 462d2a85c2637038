//go:build !ddbworker_dev

package daemon

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
)

// faultFlags: the production build has no fault injection and no
// failpoints — no flag and no environment variable reaches them. They live
// in faults.go, built only with -tags ddbworker_dev.
type faultFlags struct{}

func (*faultFlags) register(*cobra.Command) {}

func (*faultFlags) apply(ctx context.Context, _ *slog.Logger) (context.Context, []func(*dynamodb.Options), []func(*sqs.Options), error) {
	return ctx, nil, nil, nil
}
