package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/metrics"
)

// App is a worker service: its handlers, and what it adds to the command
// line. The daemon gives it everything else.
type App struct {
	// Name is the command's name in help and logs. Default: the
	// executable's base name.
	Name string
	// Short describes the service in help. Default: "Exactly-once effects
	// from SQS into DynamoDB".
	Short string
	// Register registers the service's handlers. Required. It runs when
	// `run` starts, after the flags were parsed (so the values Flags bound
	// are set), with the resolved Env.
	Register func(reg *ddbworker.Registry, env Env) error
	// Flags adds the service's own flags to `run`; like every flag, each is
	// also a DDBWORKER_* environment variable. Optional.
	Flags func(fs *pflag.FlagSet)
	// Version is printed by --version and exported as the version label of
	// ddbworker_build_info; stamp it at build time (e.g. a main's
	// `var version string` set with -ldflags "-X main.version=v1.4.0").
	// Default: the main module's version from the build info ("(devel)"
	// for a local build).
	Version string
	// Revision is the VCS revision exported by ddbworker_build_info (an
	// image build has no .git to read it from: stamp it like Version).
	// Default: vcs.revision from the build info.
	Revision string
	// Table is --table's default. Default: none — the table must be given
	// (--table or DDBWORKER_TABLE), so a deployment that forgets it fails
	// at start instead of using some table of the default name.
	Table string
	// Extension is for this module's own binaries: the development binary
	// (internal/dev/cmd/ddbworker-dev) adds its commands and the fault-injection flags
	// of run and relay through it. Code outside this module cannot build
	// one (its type is internal, its fields unexported), and the zero
	// Extension adds nothing.
	Extension daemonext.Extension
}

// Env is what Register sees of the daemon's configuration.
type Env struct {
	// Store is the inbox store: Store.Table is the table the handlers
	// usually write their items to as well.
	Store inbox.Store
	// AWS is the SDK configuration the daemon's clients use.
	AWS aws.Config
	// DynamoDB is the daemon's client (handlers may read with it).
	DynamoDB *dynamodb.Client
	// Logger is the daemon's JSON logger.
	Logger *slog.Logger
	// Metrics declares instruments on the registry the daemon serves on
	// /metrics: give it to the library's components the service builds
	// (effects.Config.Metrics).
	Metrics metrics.Provider
	// Registerer is that registry, for the service's own Prometheus
	// collectors.
	Registerer prometheus.Registerer
	// TracerProvider is the daemon's trace export (the OTEL_* variables),
	// for the service's own spans; nil when tracing is off.
	TracerProvider trace.TracerProvider
}

// Main runs the command line of app — `run` (the worker), `tables create`,
// `queues create`, `inbox`, `dlq`, `sweep` — and exits: 0 after a graceful
// stop, 1 with the reason on stderr otherwise. SIGINT and SIGTERM stop
// `run` gracefully.
func Main(app App) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Command(app).ExecuteContext(ctx)
	stop()
	if err != nil {
		var exit *daemonext.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", app.name(), err)
		os.Exit(1)
	}
}

// Command returns app's command line without running it (to embed it in
// a larger one, or to test it).
func Command(app App) *cobra.Command { return newRootCmd(app) }

func (a App) name() string {
	if a.Name != "" {
		return a.Name
	}
	return filepath.Base(os.Args[0])
}

func (a App) version() string {
	if a.Version != "" {
		return a.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// revision is the VCS revision the binary was built from ("" if unknown).
func (a App) revision() string {
	if a.Revision != "" {
		return a.Revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}
