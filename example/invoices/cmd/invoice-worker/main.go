// Command invoice-worker is the invoices service: ddbworker's daemon (run,
// tables create, queues create, inbox, dlq, sweep) with its one handler.
package main

import (
	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/invoices"
)

// version and revision are stamped at build time: -ldflags "-X main.version=v1.4.0 -X main.revision=…".
var version, revision string

func main() {
	daemon.Main(daemon.App{
		Name:     "invoice-worker",
		Short:    "Invoices orders exactly once, from SQS into DynamoDB",
		Version:  version,
		Revision: revision,
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
		},
	})
}
