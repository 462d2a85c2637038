package ddbworkertest_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/invoices"
)

// invoiceKit is the invoices service's registry in the kit.
func invoiceKit() *ddbworkertest.Worker {
	reg := ddbworker.NewRegistry()
	if err := (&invoices.Handler{Table: "app"}).Register(reg); err != nil {
		log.Fatal(err)
	}
	return ddbworkertest.NewRegistry(reg)
}

func invoiceRequest(orderID string) ddbworkertest.Message {
	return ddbworkertest.NewMessage(invoices.TypeInvoiceRequested,
		invoices.InvoiceRequested{OrderID: orderID, AmountCents: 1200, Currency: "EUR"}, ddbworkertest.Key("inv-"+orderID))
}

// An order is invoiced: the invoice is created and the order marked, in
// one commit. In a test, RequireWork, RequireApplied and RequireWrite say
// the same with t.
func Example() {
	kit := invoiceKit().Before(ddbworkertest.Existing{
		Table: "app", Key: invoices.OrderKey("o-1"), Item: ddbworker.Item{invoices.AttrStatus: "OPEN"},
	})
	res, err := kit.Work(context.Background(), invoiceRequest("o-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res)
	inv := res.Writes[0]
	fmt.Println(inv.Kind, inv.Key, inv.Item[invoices.AttrAmountCents])
	// Output:
	// applied APPLIED resultRef "INV-inv-o-1"
	//   0 Put app {PK: "ORDER#o-1", SK: "INVOICE", amountCents: 1200, currency: "EUR", invoiceNumber: "INV-inv-o-1"} IF attribute_not_exists(PK)  [holds]
	//   1 Update app {PK: "ORDER#o-1", SK: "ORDER"} SET orderStatus = "INVOICED", invoiceNumber = "INV-inv-o-1" IF attribute_exists(PK)  [holds]
	// Put map[PK:ORDER#o-1 SK:INVOICE] 1200
}

// What the tables hold before the commit decides it: the invoice exists
// already (the work was done: superseded), or the order does not (terminal,
// with the guard's code).
func ExampleWorker_Before() {
	order := ddbworkertest.Existing{Table: "app", Key: invoices.OrderKey("o-1")}
	invoice := ddbworkertest.Existing{Table: "app", Key: invoices.InvoiceKey("o-1"), Item: ddbworker.Item{invoices.AttrInvoiceNumber: "INV-1"}}
	for _, before := range [][]ddbworkertest.Existing{{order, invoice}, nil} {
		res, err := invoiceKit().Before(before...).Work(context.Background(), invoiceRequest("o-1"))
		if err != nil {
			log.Fatal(err)
		}
		switch res.Kind {
		case ddbworkertest.Superseded:
			fmt.Println("superseded", res.Outcome, "by the guard of write", res.FailedWrite)
		case ddbworkertest.Terminal:
			fmt.Println("terminal", res.Failure.Code, "by the guard of write", res.FailedWrite)
		}
	}
	// Output:
	// superseded ALREADY_INVOICED by the guard of write 0
	// terminal ORDER_NOT_FOUND by the guard of write 1
}

// A versioned stage change moves forward only: the same or an older
// version is superseded by the NewerVersion guard.
func ExampleAggregateVersion() {
	reg := ddbworker.NewRegistry()
	if err := (&caseflow.Handlers{Table: "cases"}).Register(reg); err != nil {
		log.Fatal(err)
	}
	kit := ddbworkertest.NewRegistry(reg).Before(ddbworkertest.Existing{
		Table: "cases", Key: ddbworker.Key{"PK": "CASE#c-1", "SK": "CASE"}, Item: ddbworker.Item{caseflow.AttrStageVersion: 4},
	})
	for _, v := range []int64{5, 4} {
		res, err := kit.Work(context.Background(), ddbworkertest.NewMessage(caseflow.TypeStageChanged,
			caseflow.StageChanged{CaseID: "c-1", Stage: "review"}, ddbworkertest.AggregateVersion(v)))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res)
	}
	// Output:
	// applied APPLIED
	//   0 Update cases {PK: "CASE#c-1", SK: "CASE"} SET stage = "review", stageVersion = 5 IF attribute_exists(PK) AND (attribute_not_exists(stageVersion) OR stageVersion < 5)  [holds]
	// superseded SUPERSEDED (the guard of write 0)
	//   0 Update cases {PK: "CASE#c-1", SK: "CASE"} SET stage = "review", stageVersion = 4 IF attribute_exists(PK) AND (attribute_not_exists(stageVersion) OR stageVersion < 4)  [fails]
}

// What never reaches a handler: a body that is not an envelope, an
// envelope of a type no handler is registered for, a payload that does not
// validate.
func ExampleFromBody() {
	kit := invoiceKit()
	for _, msg := range []ddbworkertest.Message{
		ddbworkertest.FromBody([]byte(`{"schemaVersion": 1, "messageType": `)),
		ddbworkertest.NewMessage("OrderShipped", map[string]string{"orderId": "o-1"}),
		ddbworkertest.NewMessage(invoices.TypeInvoiceRequested, invoices.InvoiceRequested{OrderID: "o-1", Currency: "EUR"}),
	} {
		res, err := kit.Work(context.Background(), msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Failure.Code, res.Message != nil)
	}
	// Output:
	// INVALID_ENVELOPE false
	// UNKNOWN_MESSAGE_TYPE false
	// INVALID_PAYLOAD true
}

// A handler's retryable failure is retried until the attempts policy
// ends it: here the envelope's attemptPolicy allows three attempts, and
// the third one fails for good.
func ExampleAttempt() {
	kit := ddbworkertest.New(ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Result{}, ddbworker.Retryable("PRICING_DOWN", "the pricing service does not answer")
	}))
	for attempt := 2; attempt <= 3; attempt++ {
		res, err := kit.Work(context.Background(), ddbworkertest.NewMessage("QuoteRequested", map[string]int{"items": 3},
			ddbworkertest.AttemptPolicy(envelope.AttemptPolicy{MaxBusinessAttempts: 3}), ddbworkertest.Attempt(attempt)))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Failure)
	}
	// Output:
	// retryable PRICING_DOWN: the pricing service does not answer
	// terminal MAX_ATTEMPTS_EXCEEDED: 3 of 3 business attempts used; last failure PRICING_DOWN: the pricing service does not answer
}

// A handler that panics fails retryable HANDLER_PANIC, as in the worker.
func ExampleNew() {
	kit := ddbworkertest.New(ddbworker.HandlerFunc(func(_ context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		caseID := strings.Split(m.Key(), ":")[1] // keys were "case:<id>"
		return ddbworker.Apply(ddbworker.Update("cases", ddbworker.Key{"PK": caseID}).Add("n", 1)), nil
	}))
	res, err := kit.Work(context.Background(), ddbworkertest.NewMessage("DeadlineSet", map[string]string{}, ddbworkertest.Key("c-1")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res)
	// Output:
	// retryable HANDLER_PANIC: handler panicked: runtime error: index out of range [1] with length 1
}
