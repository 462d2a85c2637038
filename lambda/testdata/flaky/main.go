// Command flaky is the invoice function of the Lambda adapter's RIE test
// with a handler that fails retryably at the first attempt of every work
// item (as a downstream outage would), and applies the invoice after.
package main

import (
	"context"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/lambda"
)

func main() {
	lambda.Main(func(reg *lambda.Registry, env lambda.Env) error {
		h := &invoices.Handler{Table: env.Store.Table}
		return reg.Register(invoices.TypeInvoiceRequested, ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p invoices.InvoiceRequested) (ddbworker.Result, error) {
			if m.Attempt == 1 {
				return ddbworker.Result{}, ddbworker.Retryable("FLAKY", "the first attempt fails")
			}
			return h.Invoice(ctx, m, p)
		}))
	})
}
