// Command caseworker is the example case domain (internal/caseflow,
// through internal/dev/caseapp) as a team ships a service: daemon.Main
// with its handlers and nothing else — no development tools, no fault
// injection. The development binary's tests run it where they need a
// production build that handles example traffic (cmd/ddbworker, the
// operator command line, registers no handlers).
package main

import (
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/caseapp"
)

var version, revision string

func main() { daemon.Main(caseapp.App(version, revision)) }
