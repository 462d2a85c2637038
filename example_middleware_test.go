package ddbworker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/internal/invoices"
)

// tenantOf is where a team keeps its tenant: here, the order id's prefix.
func tenantOf(msg *ddbworker.Message) string {
	_, id := msg.Aggregate()
	if len(id) >= 2 {
		return id[:2]
	}
	return "-"
}

// A team's middleware, registered once for every route: it puts the
// tenant on the handler's span (with tracing on, the worker's handler span
// is the span in ctx) and on a log line written with the handler's
// context (with tracing.LogHandler, that line carries the span's ids), and
// times the handler. The test kit runs the registry's middleware as the
// worker does.
func ExampleMiddleware() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "handlerMs" {
				return slog.Attr{} // not stable from run to run
			}
			return a
		}}))
	tenant := func(next ddbworker.Handler) ddbworker.Handler {
		return ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
			t := tenantOf(msg)
			trace.SpanFromContext(ctx).SetAttributes(attribute.String("app.tenant", t))
			start := time.Now()
			res, err := next.Handle(ctx, msg)
			logger.InfoContext(ctx, "handled", "tenant", t, "messageType", msg.Type(), "handlerMs", time.Since(start).Milliseconds(), "failed", err != nil)
			return res, err
		})
	}

	reg := ddbworker.NewRegistry()
	reg.Use(tenant)
	if err := (&invoices.Handler{Table: "app"}).Register(reg); err != nil {
		log.Fatal(err)
	}
	kit := ddbworkertest.NewRegistry(reg).Before(ddbworkertest.Existing{
		Table: "app", Key: invoices.OrderKey("eu-1"), Item: ddbworker.Item{invoices.AttrStatus: "OPEN"},
	})
	res, err := kit.Work(context.Background(), ddbworkertest.NewMessage(invoices.TypeInvoiceRequested,
		invoices.InvoiceRequested{OrderID: "eu-1", AmountCents: 1200, Currency: "EUR"}, ddbworkertest.Key("inv-eu-1"), ddbworkertest.Aggregate("Order", "eu-1")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome)
	// Output:
	// level=INFO msg=handled tenant=eu messageType=OrderInvoiceRequested failed=false
	// APPLIED
}
