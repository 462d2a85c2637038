// Command ddbworker is ddbworker's own service: the daemon and operator
// command line (package daemon) running the example case domain
// (example/caseflow). A team's service is the same few lines with its own
// handlers; see example/invoices.
//
// Built with -tags ddbworker_dev (bin/ddbworker-dev) it also carries the
// development tools: demo, bench, chaos, send, emulators, faultproxy, and
// run's fault-injection flags.
package main

import (
	"github.com/spf13/pflag"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/example/caseflow"
)

// version and revision are stamped at build time (the Dockerfile does):
// go build -ldflags "-X main.version=v1.4.0 -X main.revision=$(git rev-parse HEAD)".
// Empty: the build info's.
var version, revision string

func main() { daemon.Main(app()) }

// app is the example service.
func app() daemon.App {
	var fused, track bool
	return daemon.App{
		Name:     "ddbworker",
		Table:    "ddbworker",
		Version:  version,
		Revision: revision,
		Flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&fused, "fused", false, "example domain: the fused commit (one round trip per fresh message)")
			fs.BoolVar(&track, "track-applications", false, "example domain: keep an application counter per work item")
		},
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			var opts []ddbworker.RouteOption
			if fused {
				opts = append(opts, ddbworker.Fused())
			}
			return (&caseflow.Handlers{Table: env.Store.Table, TrackApplications: track}).Register(reg, opts...)
		},
	}
}
