package devcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/internal/daemonext"
)

// Extension is the development binary's addition to the daemon's command
// line: the demo, the benchmark, the chaos run, example traffic, the local
// emulators and the fault proxy as commands, and the fault-injection flags
// of run and relay (hidden).
func Extension() daemonext.Extension {
	return daemonext.New(func(g daemonext.Globals) []*cobra.Command {
		// The shared flags each reads, which its help shows (the
		// emulators start their own endpoints and read none).
		aws := []string{daemonext.GlobalsAWS, daemonext.GlobalsDynamoDB, daemonext.GlobalsSQS}
		return []*cobra.Command{
			daemonext.Uses(newDemoCmd(g), aws...), daemonext.Uses(newBenchCmd(g), aws...), daemonext.Uses(newChaosCmd(g), aws...),
			daemonext.Uses(newExploreCmd(g), aws...), daemonext.Uses(newSendCmd(g), append(aws, daemonext.GlobalsTable)...),
			daemonext.Uses(newEmulatorsCmd()), daemonext.Uses(newFaultProxyCmd(g), daemonext.GlobalsDynamoDB),
		}
	}, registerFaults)
}

// endpoints are the SDK configuration and the DynamoDB and SQS endpoints a
// command talks to ("": the SDK's).
type endpoints struct {
	aws      aws.Config
	dynamoDB string
	sqs      string
}

// given are the endpoints the shared flags name.
func given(ctx context.Context, g daemonext.Globals) (endpoints, error) {
	cfg, err := g.AWSConfig(ctx)
	ddb, q := g.Endpoints()
	return endpoints{aws: cfg, dynamoDB: ddb, sqs: q}, err
}

// localOrGiven returns the endpoints of a command that runs on local
// emulators: when --dynamodb-endpoint and --sqs-endpoint are both set,
// those, with the SDK's own configuration; otherwise it starts the
// emulators from dir and returns theirs, with their static configuration.
// stop ends what it started (a no-op otherwise).
func localOrGiven(ctx context.Context, g daemonext.Globals, dir string, log io.Writer, label string) (e endpoints, stop func(), err error) {
	if ddb, q := g.Endpoints(); ddb != "" && q != "" {
		e, err = given(ctx, g)
		return e, func() {}, err
	}
	started := time.Now()
	fmt.Fprintf(log, "[%s] starting DynamoDB Local and the SQS emulator on 127.0.0.1 …\n", label)
	env, err := emulators.Start(ctx, emulators.Config{Dir: dir})
	if err != nil {
		return endpoints{}, nil, err
	}
	fmt.Fprintf(log, "[%s] DynamoDB Local %s, SQS %s (ready in %s)\n", label, env.Endpoints.DynamoDB, env.Endpoints.SQS, time.Since(started).Round(time.Millisecond))
	return endpoints{aws: env.AWSConfig(), dynamoDB: env.Endpoints.DynamoDB, sqs: env.Endpoints.SQS}, func() {
		_ = env.Stop()
		fmt.Fprintf(log, "[%s] emulators stopped\n", label)
	}, nil
}

// options point clients at the endpoints.
func (e endpoints) options() (ddbOpts []func(*dynamodb.Options), sqsOpts []func(*sqs.Options)) {
	if e.dynamoDB != "" {
		ddbOpts = append(ddbOpts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.dynamoDB) })
	}
	if e.sqs != "" {
		sqsOpts = append(sqsOpts, func(o *sqs.Options) { o.BaseEndpoint = aws.String(e.sqs) })
	}
	return ddbOpts, sqsOpts
}

// clients builds DynamoDB and SQS clients on the endpoints, with opts
// (applied before the endpoints').
func (e endpoints) clients(ddbOpts []func(*dynamodb.Options), sqsOpts []func(*sqs.Options)) (*dynamodb.Client, *sqs.Client) {
	d, s := e.options()
	return dynamodb.NewFromConfig(e.aws, append(ddbOpts, d...)...), sqs.NewFromConfig(e.aws, append(sqsOpts, s...)...)
}
