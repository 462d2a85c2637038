package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// `run` on a table that answers as an MRSC global table (faults.MRSC:
// DescribeTable STRONG, no TTL, transactions refused): the consistency
// mode comes from the DescribeTable the startup checks make, and a route
// whose commit is a transaction stops the start with what to change; the
// single-write route with SkipInboxCheck starts.
func TestRunOnMRSCTable(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	mrsc := daemonext.New(nil, func(*pflag.FlagSet) daemonext.Inject {
		return func(ctx context.Context, _ *slog.Logger) (context.Context, daemonext.ClientOptions, error) {
			return ctx, daemonext.ClientOptions{DynamoDB: []func(*dynamodb.Options){faults.MRSC}}, nil
		}
	})
	handler := ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) { return ddbworker.Result{}, nil })
	run := func(ctx context.Context, opts ...ddbworker.RouteOption) error {
		root := newRootCmd(App{Extension: mrsc, Register: func(reg *ddbworker.Registry, _ Env) error {
			return reg.Register(caseflow.TypeStageChanged, handler, opts...)
		}})
		root.SetArgs([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--sqs-endpoint", os.Getenv("AWS_ENDPOINT_URL_SQS"),
			"--table", env.Table, "run", "--queue-url", env.Queues.URL, "--dlq-url", env.Queues.DLQURL, "--metrics-addr", "", "--startup-timeout", "20s"})
		var o, e bytes.Buffer
		root.SetOut(&o)
		root.SetErr(&e)
		return root.ExecuteContext(ctx)
	}

	for i := range 2 { // the second on warm emulators
		start := time.Now()
		err := run(context.Background())
		t.Logf("start %d refused after %s (the startup checks included)", i+1, time.Since(start).Round(time.Millisecond))
		require.ErrorContains(t, err, "multi-Region strong consistency")
		require.ErrorContains(t, err, caseflow.TypeStageChanged+" (the default gated commit")
		require.ErrorContains(t, err, "ddbworker.SingleWrite() and ddbworker.SkipInboxCheck()")
	}

	// The route an MRSC table serves starts, and stops when asked.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ddbworker.SingleWrite(), ddbworker.SkipInboxCheck()) }()
	env1, err := caseflow.NewStageChange("k-mrsc", "c1", "review", 1)
	require.NoError(t, err)
	body, err := envelope.Encode(env1)
	require.NoError(t, err)
	_, err = env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(env.Queues.URL), MessageBody: aws.String(string(body))})
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, func() bool { return testenv.InspectQueue(t, env.Queues.URL).Total() == 0 },
		"the worker did not take the message")
	select {
	case err := <-done:
		t.Fatalf("run returned before it was stopped: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
}
