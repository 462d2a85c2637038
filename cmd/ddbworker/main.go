// Command ddbworker is ddbworker's own service: the daemon and operator
// command line (package daemon) running the example case domain
// (example/caseflow, through cmd/internal/caseapp). A team's service is the
// same few lines with its own handlers; see example/invoices.
//
// It has none of the development tools: those are cmd/ddbworker-dev's.
package main

import (
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/caseapp"
)

// version and revision are stamped at build time (the Dockerfile does):
// go build -ldflags "-X main.version=v1.4.0 -X main.revision=$(git rev-parse HEAD)".
// Empty: the build info's.
var version, revision string

func main() { daemon.Main(app()) }

// app is the example service.
func app() daemon.App { return caseapp.App(version, revision) }
