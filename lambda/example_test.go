package lambda_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/lambda"
)

// A function's main: register the handlers; Main reads DDBWORKER_* from the
// environment and runs the Lambda runtime loop (example/invoices/lambda).
func ExampleMain() {
	lambda.Main(func(reg *lambda.Registry, env lambda.Env) error {
		return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
	})
}

// A custom main: New returns the handler, to wrap or to start with the
// runtime's own options. Configuration problems come back from New, before
// lambda.Start.
func ExampleNew() {
	handle, err := lambda.New(context.Background(), func(reg *lambda.Registry, env lambda.Env) error {
		return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
	}, os.LookupEnv)
	if err != nil {
		slog.Error("init failed", "error", err.Error())
		os.Exit(1)
	}
	awslambda.StartWithOptions(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := handle(ctx, ev)
		slog.InfoContext(ctx, "batch", "records", len(ev.Records), "failed", len(resp.BatchItemFailures))
		return resp, err
	}, awslambda.WithEnableSIGTERM(func() { slog.Info("shutting down") }))
}
