// Command ddbworker-dev is the development build of ddbworker: everything
// cmd/ddbworker has (the same service, internal/dev/caseapp), plus the
// development tools of internal/dev/devcmd — demo, bench, chaos, send,
// emulators, faultproxy — and the hidden fault-injection flags of run and
// relay that the chaos harness and the kill -9 tests drive. It is never
// deployed: the container image and `go install …/cmd/ddbworker` build
// cmd/ddbworker.
package main

import (
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/caseapp"
	"github.com/ddbworker/ddbworker/internal/dev/devcmd"
)

// version and revision are stamped at build time, as cmd/ddbworker's.
var version, revision string

func main() { daemon.Main(app()) }

// app is the example service with the development tools.
func app() daemon.App {
	a := caseapp.App(version, revision)
	a.Extension = devcmd.Extension()
	return a
}
