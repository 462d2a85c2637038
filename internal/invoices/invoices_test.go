package invoices_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/internal/invoices"
)

// The handler's unit tests: no emulators, plain `go test`. What the tables
// hold before the commit decides what the worker does with the message.
func TestInvoice(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, (&invoices.Handler{Table: "app"}).Register(reg))

	openOrder := ddbworkertest.Existing{Table: "app", Key: invoices.OrderKey("o-1"), Item: ddbworker.Item{invoices.AttrStatus: "OPEN"}}
	oldInvoice := ddbworkertest.Existing{Table: "app", Key: invoices.InvoiceKey("o-1"), Item: ddbworker.Item{invoices.AttrInvoiceNumber: "INV-earlier"}}
	request := func(p invoices.InvoiceRequested) ddbworkertest.Message {
		return ddbworkertest.NewMessage(invoices.TypeInvoiceRequested, p, ddbworkertest.Key("inv-"+p.OrderID))
	}
	valid := invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1200, Currency: "EUR"}

	tests := []struct {
		name   string
		before []ddbworkertest.Existing
		msg    ddbworkertest.Message
		check  func(t *testing.T, res *ddbworkertest.Result)
	}{{
		name:   "an open order is invoiced",
		before: []ddbworkertest.Existing{openOrder},
		msg:    request(valid),
		check: func(t *testing.T, res *ddbworkertest.Result) {
			res.RequireApplied(t)
			require.Equal(t, "INV-inv-o-1", res.ResultRef)
			inv := res.RequireWrite(t, "app", invoices.InvoiceKey("o-1"))
			require.Equal(t, "Put", inv.Kind)
			require.EqualValues(t, 1200, inv.Item[invoices.AttrAmountCents])
			order := res.RequireWrite(t, "app", invoices.OrderKey("o-1"))
			require.Contains(t, order.Update, `orderStatus = "INVOICED"`)
		},
	}, {
		name:   "an invoiced order is not invoiced again",
		before: []ddbworkertest.Existing{openOrder, oldInvoice},
		msg:    request(valid),
		check: func(t *testing.T, res *ddbworkertest.Result) {
			require.Equal(t, 0, res.RequireSuperseded(t, invoices.OutcomeAlreadyInvoiced))
		},
	}, {
		name: "a missing order ends terminal",
		msg:  request(valid),
		check: func(t *testing.T, res *ddbworkertest.Result) {
			res.RequireTerminal(t, invoices.CodeOrderNotFound)
			require.Equal(t, 1, res.FailedWrite)
		},
	}, {
		name: "a payload without an amount never reaches the handler",
		msg:  request(invoices.InvoiceRequested{OrderID: "o-1", Currency: "EUR"}),
		check: func(t *testing.T, res *ddbworkertest.Result) {
			f := res.RequireTerminal(t, "INVALID_PAYLOAD")
			require.Contains(t, f.Message, "amountCents")
			require.Empty(t, res.Writes)
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kit := ddbworkertest.NewRegistry(reg).Before(tc.before...)
			tc.check(t, kit.RequireWork(t, tc.msg))
		})
	}
}

// The README's unit test, as it shows it (TestReadmeSnippets keeps the two
// the same): an open order is invoiced.
func TestOpenOrderIsInvoiced(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, (&invoices.Handler{Table: "app"}).Register(reg))
	kit := ddbworkertest.NewRegistry(reg).Before(ddbworkertest.Existing{
		Table: "app", Key: invoices.OrderKey("o-1"), Item: ddbworker.Item{invoices.AttrStatus: "OPEN"},
	})

	res := kit.RequireWork(t, ddbworkertest.NewMessage(invoices.TypeInvoiceRequested,
		invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1200, Currency: "EUR"},
		ddbworkertest.Key("inv-o-1")))

	res.RequireApplied(t)
	inv := res.RequireWrite(t, "app", invoices.InvoiceKey("o-1"))
	require.EqualValues(t, 1200, inv.Item[invoices.AttrAmountCents])
}
