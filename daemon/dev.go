//go:build ddbworker_dev

package daemon

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/dev/emulators"
)

// devCommands are the development build's tools — the demo, the benchmark,
// the chaos run, example traffic, the local emulators and the fault proxy —
// which the production build (and a team's binary) does not contain.
func devCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newDemoCmd(g), newBenchCmd(g), newChaosCmd(g), newSendCmd(g), newEmulatorsCmd(), newFaultProxyCmd(g)}
}

// localOrGiven returns the SDK configuration for a command that runs on
// local emulators: when --dynamodb-endpoint and --sqs-endpoint are both set,
// the SDK's own configuration for them; otherwise it starts the emulators
// from dir, points both endpoints at them and returns their static
// configuration. stop ends what it started (a no-op otherwise).
func (g *globals) localOrGiven(ctx context.Context, dir string, log io.Writer, label string) (cfg aws.Config, stop func(), err error) {
	if g.ddbEndpoint != "" && g.sqsEndpoint != "" {
		cfg, err = g.awsConfig(ctx)
		return cfg, func() {}, err
	}
	started := time.Now()
	fmt.Fprintf(log, "[%s] starting DynamoDB Local and the SQS emulator on 127.0.0.1 …\n", label)
	env, err := emulators.Start(ctx, emulators.Config{Dir: dir})
	if err != nil {
		return aws.Config{}, nil, err
	}
	g.ddbEndpoint, g.sqsEndpoint = env.DynamoDBEndpoint, env.SQSEndpoint
	fmt.Fprintf(log, "[%s] DynamoDB Local %s, SQS %s (ready in %s)\n", label, env.DynamoDBEndpoint, env.SQSEndpoint, time.Since(started).Round(time.Millisecond))
	return emulators.AWSConfig(), func() {
		_ = env.Stop()
		fmt.Fprintf(log, "[%s] emulators stopped\n", label)
	}, nil
}
