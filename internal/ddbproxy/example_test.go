package ddbproxy_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
)

// A client pointed at the proxy talks to DynamoDB Local (here on its usual
// port) until a fault mode is set; then it gets AWS's own error answers from
// the proxy, and the request never reaches DynamoDB Local — this example
// runs without it. (The DynamoDB client's default retryer makes 4 attempts
// and backs off at least a second after a throttle; this one makes a single
// attempt.)
func ExampleStart() {
	p, err := ddbproxy.Start(ddbproxy.Config{Target: "http://127.0.0.1:8000"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	client := dynamodb.NewFromConfig(emulators.Endpoints{}.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL())
		o.RetryMaxAttempts = 1
	})

	p.SetMode(ddbproxy.Throttle)
	_, err = client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("cases"),
		Key:       map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "case#1"}, "SK": &types.AttributeValueMemberS{Value: "v"}},
	})
	var throttled *types.ProvisionedThroughputExceededException
	fmt.Println(errors.As(err, &throttled), p.Stats().Requests["GetItem"], p.Stats().Forwarded)
	p.SetMode(ddbproxy.Pass)
	// Output: true 1 0
}
