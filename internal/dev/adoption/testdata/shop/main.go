// Command shop-worker applies an online shop's events to the shop's own
// DynamoDB table, exactly once: the orders the checkout publishes to SNS,
// the payments the payment service puts on EventBridge, the shipments the
// warehouse sends as JSON of its own. None of those producers changed for
// it.
package main

import (
	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
)

func main() {
	daemon.Main(daemon.App{
		Name: "shop-worker",
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			return (&Shop{Table: env.Store.Table}).Register(reg)
		},
	})
}
