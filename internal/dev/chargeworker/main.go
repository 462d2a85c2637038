// Command chargeworker is the effect log's crash-test service: a ddbworker
// service (daemon.Main) whose handlers charge an order through effects.Log
// at the provider double's URL (--provider-url), with the development
// binary's extension (internal/dev/devcmd: run's --failpoint-kill). The
// kill -9 tests build it, run it with --failpoint-kill at the effect log's
// failpoints, restart it, and use its `effects`, `inbox` and `dlq` commands
// as an operator would. It owns nothing of ddbworker.
//
//	OrderCharge   charges at POST /charges (a provider with idempotency keys)
//	OrderSend     charges at POST /sends   (a provider without)
//
// Each applied work item adds 1 to `applied` on ORDER#<orderId>/ORDER and
// sets chargeId there, in the same transaction as the effect's Write and
// the inbox flip.
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/internal/dev/devcmd"
	"github.com/ddbworker/ddbworker/internal/payments"
)

// Order is the payload of both message types.
type Order struct {
	OrderID string `json:"orderId"`
	Cents   int64  `json:"cents"`
}

func main() {
	var providerURL string
	daemon.Main(daemon.App{
		Name:  "chargeworker",
		Short: "the effect log's crash-test service",
		// The fault-injection flags (--failpoint-kill) come with the
		// development tools.
		Extension: devcmd.Extension(),
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&providerURL, "provider-url", "", "base URL of the payment provider")
		},
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			log, err := effects.New(env.DynamoDB, effects.Config{Inbox: env.Store, Logger: env.Logger,
				Metrics: env.Metrics, CallTimeout: 3 * time.Second})
			if err != nil {
				return err
			}
			client := &http.Client{Timeout: 5 * time.Second}
			for _, r := range []struct {
				msgType, provider, path string
				idempotent              bool
			}{{"OrderCharge", "payments", "/charges", true}, {"OrderSend", "legacy-pay", "/sends", false}} {
				h := ddbworker.JSON(func(ctx context.Context, msg *ddbworker.Message, o Order) (ddbworker.Result, error) {
					eff, err := log.Do(ctx, msg, effects.Call{Name: "charge", Provider: r.provider, Operation: "charge",
						Request: o, Idempotent: r.idempotent}, payments.Charge(client, providerURL, r.path, o.Cents))
					if err != nil {
						return ddbworker.Result{}, err
					}
					order := ddbworker.Update(env.Store.Table, ddbworker.Key{"PK": "ORDER#" + o.OrderID, "SK": "ORDER"}).
						Add("applied", 1).Set("chargeId", eff.ProviderRef)
					return ddbworker.Apply(eff.Write(), order), nil
				})
				if err := reg.Register(r.msgType, h); err != nil {
					return err
				}
			}
			return nil
		},
	})
}
