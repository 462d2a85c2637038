package emulators_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/dev/emulators"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
)

// TestStartStop starts its own pair (independent of any shared one), talks
// to both through the SDK, and checks that Stop really ends them.
func TestStartStop(t *testing.T) {
	testenv.SkipWithoutRuntimes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := emulators.Start(ctx, emulators.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })

	for _, ep := range []string{env.DynamoDBEndpoint, env.SQSEndpoint} {
		u, err := url.Parse(ep)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", u.Hostname())
	}

	ddb := dynamodb.NewFromConfig(emulators.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(env.DynamoDBEndpoint) })
	_, err = ddb.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)

	q := sqs.NewFromConfig(emulators.AWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(env.SQSEndpoint) })
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("emulators-start-stop")})
	require.NoError(t, err)
	u, err := url.Parse(aws.ToString(out.QueueUrl))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", u.Hostname(), "queue URLs must name the loopback address")

	require.NoError(t, env.Stop())
	require.NoError(t, env.Stop(), "Stop is idempotent")
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	_, err = ddb.ListTables(short, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	require.Error(t, err, "DynamoDB Local still answers after Stop")
}

func TestStartMissingInstall(t *testing.T) {
	_, err := emulators.Start(context.Background(), emulators.Config{Dir: t.TempDir()})
	require.ErrorIs(t, err, emulators.ErrNotInstalled)
}
