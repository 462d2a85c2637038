// Command counting is the invoice function of the Lambda adapter's RIE
// tests with an application counter: the example's handler, unchanged,
// plus one more write in the same transaction — ADD applications 1 on the
// order's APPLICATIONS item — so that the counter is exactly how often an
// order's invoicing was applied (a superseded or failed run writes
// nothing, a second application would make it 2).
package main

import (
	"context"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/lambda"
)

// ApplicationsSK and AttrApplications name the counter item and attribute
// (the item's PK is the order's).
const (
	ApplicationsSK   = "APPLICATIONS"
	AttrApplications = "applications"
)

func main() {
	lambda.Main(func(reg *lambda.Registry, env lambda.Env) error {
		h := &invoices.Handler{Table: env.Store.Table}
		return reg.Register(invoices.TypeInvoiceRequested, ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p invoices.InvoiceRequested) (ddbworker.Result, error) {
			r, err := h.Invoice(ctx, m, p)
			if err != nil {
				return r, err
			}
			key := invoices.OrderKey(p.OrderID)
			key[invoices.AttrSK] = ApplicationsSK
			r.Writes = append(r.Writes, ddbworker.Update(h.Table, key).Add(AttrApplications, 1))
			return r, nil
		}))
	})
}
