package emulators_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
)

// TestForTest: a pair of its own, both on 127.0.0.1 and nowhere else,
// reached through AWSConfig (no endpoint option), the clients and a child
// process's environment; a table and queues of the test; Stop ends both.
// Old behaviour: DynamoDB Local listened on every interface, and the
// environment had no AWS_DEFAULT_REGION (boto3: NoRegionError).
func TestForTest(t *testing.T) {
	env := emulators.ForTest(t)
	ctx := t.Context()

	for _, ep := range []string{env.Endpoints.DynamoDB, env.Endpoints.SQS} {
		u, err := url.Parse(ep)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", u.Hostname())
		if env.Runtimes.Loopback || ep == env.Endpoints.SQS {
			requireLoopbackOnly(t, u.Port())
		}
	}

	// ddbworker's inbox layout and queues are ddbworkertest's
	// (TestNewTableAndQueues); here a plain table and queue.
	table := emulators.UniqueName("t")
	cfg := env.AWSConfig()
	ddb := dynamodb.NewFromConfig(cfg) // the endpoint comes from the configuration
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	q := sqs.NewFromConfig(cfg)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulators.UniqueName("q"))})
	require.NoError(t, err)
	queueURL := aws.ToString(created.QueueUrl)
	_, err = q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("hello")})
	require.NoError(t, err)
	out, err := env.SQS().ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	u, err := url.Parse(queueURL)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", u.Hostname(), "queue URLs name the loopback address")

	t.Run("a boto3 child process needs nothing but Environ", func(t *testing.T) {
		python, err := exec.LookPath("python3")
		if err != nil || exec.Command(python, "-c", "import boto3").Run() != nil {
			t.Skip("no python3 with boto3")
		}
		cmd := exec.Command(python, "-c", `import boto3; print(",".join(boto3.client("dynamodb").list_tables()["TableNames"]))`)
		cmd.Env = append(cleanAWSEnviron(), env.Environ()...)
		got, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", got)
		require.Contains(t, string(got), table)
	})

	require.NoError(t, env.Stop())
	require.NoError(t, env.Stop(), "Stop is idempotent")
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = env.DynamoDB().ListTables(short, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	require.Error(t, err, "DynamoDB Local still answers after Stop")
}

// TestStartRelativeDir: a relative Config.Dir works (old behaviour:
// `fork/exec …: no such file or directory`, the relative paths taken from
// the emulators' own working directories).
func TestStartRelativeDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir, err := emulators.Install(ctx, emulators.Config{})
	if errors.Is(err, emulators.ErrUnavailable) && !emulators.Required() {
		t.Skip(err)
	}
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(dir))
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, dir)
	require.NoError(t, err)
	require.False(t, filepath.IsAbs(rel))

	env := emulators.Config{Dir: rel}.ForTest(t)
	require.Equal(t, dir, env.Dir, "the directory, made absolute")
	_, err = env.DynamoDB().ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)
}

// TestStartUnavailable: a missing runtime is ErrUnavailable, one line, and
// found before anything is installed.
func TestStartUnavailable(t *testing.T) {
	dir := t.TempDir()
	_, err := emulators.Start(t.Context(), emulators.Config{Dir: dir, Java: filepath.Join(dir, "no-java")})
	require.ErrorIs(t, err, emulators.ErrUnavailable)
	require.NotContains(t, err.Error(), "\n")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing installed without Java")
}

// requireLoopbackOnly fails unless port refuses connections on every
// address of this machine but the loopback ones.
func requireLoopbackOnly(t *testing.T, port string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	checked := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), port), time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("port %s answers on %s: it must listen on 127.0.0.1 only", port, ipn.IP)
		}
		checked++
	}
	if checked == 0 {
		t.Logf("no address but loopback here: port %s not checked", port)
	}
}

// cleanAWSEnviron is the environment without the AWS_ variables a test
// runner may carry (the emulators' Environ must be enough).
func cleanAWSEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}

// TestEndpointsAWSConfig: clients built from AWSConfig get each service's
// emulator, with no endpoint option and no AWS_* variable.
func TestEndpointsAWSConfig(t *testing.T) {
	ep := emulators.Endpoints{DynamoDB: "http://127.0.0.1:1", SQS: "http://127.0.0.1:2"}
	for _, tc := range []struct{ sdkID, want string }{
		{"DynamoDB", ep.DynamoDB}, {"DynamoDB Streams", ep.DynamoDB}, {"SQS", ep.SQS}, {"S3", ep.SQS}, {"SNS", ep.SQS},
	} {
		got, ok, err := ep.GetServiceBaseEndpoint(context.Background(), tc.sdkID)
		require.NoError(t, err)
		require.True(t, ok, tc.sdkID)
		require.Equal(t, tc.want, got, tc.sdkID)
	}
	_, ok, _ := ep.GetServiceBaseEndpoint(context.Background(), "Lambda")
	require.False(t, ok)

	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cfg := ep.AWSConfig()
	require.Equal(t, emulators.Region, cfg.Region)
	creds, err := cfg.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	require.Equal(t, emulators.AccessKeyID, creds.AccessKeyID)
	ddb := dynamodb.NewFromConfig(cfg)
	require.Equal(t, ep.DynamoDB, aws.ToString(ddb.Options().BaseEndpoint))
	q := sqs.NewFromConfig(cfg)
	require.Equal(t, ep.SQS, aws.ToString(q.Options().BaseEndpoint))
	require.Equal(t, ep.SQS, aws.ToString(sns.NewFromConfig(cfg).Options().BaseEndpoint), "fauxqs serves SNS on the SQS endpoint")

	env := map[string]string{}
	for _, kv := range ep.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	require.Equal(t, map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": ep.DynamoDB, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": ep.DynamoDB,
		"AWS_ENDPOINT_URL_SQS": ep.SQS, "AWS_ENDPOINT_URL_S3": ep.SQS, "AWS_ENDPOINT_URL_SNS": ep.SQS,
		"AWS_ACCESS_KEY_ID": emulators.AccessKeyID, "AWS_SECRET_ACCESS_KEY": emulators.SecretAccessKey,
		"AWS_REGION": emulators.Region, "AWS_DEFAULT_REGION": emulators.Region, "AWS_EC2_METADATA_DISABLED": "true",
	}, env)
}

// TestRequired reads DDBWORKER_REQUIRE_EMULATORS as make test and CI set it.
func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(emulators.RequireEnv, v)
		require.Equal(t, want, emulators.Required(), "%s=%q", emulators.RequireEnv, v)
	}
}

func TestUniqueName(t *testing.T) {
	a, b := emulators.UniqueName("orders"), emulators.UniqueName("orders-")
	require.Regexp(t, `^orders-[0-9a-f]{12}$`, a)
	require.Regexp(t, `^orders-[0-9a-f]{12}$`, b)
	require.NotEqual(t, a, b)
}
