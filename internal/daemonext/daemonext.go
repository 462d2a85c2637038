package daemonext

import (
	"context"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Extension is what a binary of this module adds to the daemon's command
// line. The zero Extension adds nothing.
type Extension struct {
	commands func(Globals) []*cobra.Command
	faults   func(*pflag.FlagSet) Inject
}

// New returns the Extension that adds commands (given the daemon's shared
// flags) to the root command, and registers faults' flags on run and relay.
// Either may be nil.
func New(commands func(Globals) []*cobra.Command, faults func(*pflag.FlagSet) Inject) Extension {
	return Extension{commands: commands, faults: faults}
}

// Commands are the commands the extension adds to the root command.
func (e Extension) Commands(g Globals) []*cobra.Command {
	if e.commands == nil {
		return nil
	}
	return e.commands(g)
}

// Faults registers the extension's fault flags on fs (run's or relay's)
// and returns what applies them when the command starts. Without fault
// flags it returns an Inject that changes nothing.
func (e Extension) Faults(fs *pflag.FlagSet) Inject {
	if e.faults == nil {
		return none
	}
	if inject := e.faults(fs); inject != nil {
		return inject
	}
	return none
}

func none(ctx context.Context, _ *slog.Logger) (context.Context, ClientOptions, error) {
	return ctx, ClientOptions{}, nil
}

// Inject applies fault flags when run or relay starts: it returns the
// context the worker or relay runs with (failpoint hooks travel in it) and
// options for the SDK clients it builds (injected faults are middleware).
type Inject func(ctx context.Context, log *slog.Logger) (context.Context, ClientOptions, error)

// ClientOptions are options of the DynamoDB and SQS clients a command
// builds.
type ClientOptions struct {
	DynamoDB []func(*dynamodb.Options)
	SQS      []func(*sqs.Options)
}

// Globals is what an extension's commands see of the flags every command
// shares, once they are parsed.
type Globals interface {
	// AWSConfig is the SDK configuration, with --region.
	AWSConfig(ctx context.Context) (aws.Config, error)
	// Endpoints are --dynamodb-endpoint and --sqs-endpoint ("": the SDK's).
	Endpoints() (dynamoDB, sqs string)
	// Table is --table.
	Table() string
}

// ExitError ends the process with Code after the command printed its own
// explanation (daemon.Main exits with it, printing nothing more).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// GlobalsAnnotation is the cobra annotation by which a command names the
// groups of the daemon's shared flags it reads, comma-separated (Uses sets
// it): its help shows those and no other (a subcommand without one takes
// its parent's; a command with subcommands shows what any of them reads).
const GlobalsAnnotation = "ddbworker/globals"

// The groups of shared flags a command may read.
const (
	// GlobalsAWS: --region (the SDK's configuration).
	GlobalsAWS = "aws"
	// GlobalsDynamoDB: --dynamodb-endpoint.
	GlobalsDynamoDB = "dynamodb"
	// GlobalsSQS: --sqs-endpoint.
	GlobalsSQS = "sqs"
	// GlobalsLog: --log-level.
	GlobalsLog = "log"
	// GlobalsTable: --table.
	GlobalsTable = "table"
	// GlobalsLayout: the table's key, index and TTL attribute names.
	GlobalsLayout = "layout"
	// GlobalsShards: --attention-shards.
	GlobalsShards = "shards"
	// GlobalsTTL: how long records live (--completed-ttl, --failed-ttl,
	// --processing-ttl).
	GlobalsTTL = "ttl"
	// GlobalsIndexing: --index-processing.
	GlobalsIndexing = "indexing"
	// GlobalsRequestHash: --request-hash-version.
	GlobalsRequestHash = "hash"
)

// Uses names the groups of shared flags cmd reads (GlobalsAnnotation) and
// returns cmd.
func Uses(cmd *cobra.Command, groups ...string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[GlobalsAnnotation] = strings.Join(groups, ",")
	return cmd
}
