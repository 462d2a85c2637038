// Command ddbworker is ddbworker's operator command line and daemons
// (package daemon): tables, queues, inbox, dlq, sweep, relay, effects.
// It registers no handlers — a service's worker is its own main calling
// daemon.Main with its handlers (see example/invoices/cmd/invoice-worker) —
// so its `run` refuses to start instead of consuming a queue it cannot
// handle.
//
// It has none of the development tools or the example domain: those are
// internal/dev/cmd/ddbworker-dev's.
package main

import (
	"errors"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
)

// version and revision are stamped at build time (the Dockerfile does):
// go build -ldflags "-X main.version=v1.4.0 -X main.revision=$(git rev-parse HEAD)".
// Empty: the build info's.
var version, revision string

func main() { daemon.Main(app()) }

// errNoHandlers is run's error in this binary.
var errNoHandlers = errors.New("this binary registers no handlers (it is the operator command line): a service runs its own main with daemon.Main and its handlers, see example/invoices/cmd/invoice-worker")

// app is the operator command line.
func app() daemon.App {
	return daemon.App{
		Name:     "ddbworker",
		Table:    "ddbworker",
		Version:  version,
		Revision: revision,
		Register: func(*ddbworker.Registry, daemon.Env) error { return errNoHandlers },
	}
}
