package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/worker"
)

// A handler returns its writes (committed with the inbox flip) or a typed
// failure; the registry routes message types to handlers.
func ExampleRegistry() {
	reg := ddbworker.NewRegistry()
	_ = reg.Register("InvoiceApproved", ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if len(m.Envelope.Payload) == 0 {
			return ddbworker.Result{}, failure.NewTerminal("EMPTY_INVOICE", "nothing to approve")
		}
		return ddbworker.Apply(ddbworker.Update("app", ddbworker.Key{"PK": "INVOICE#" + m.Key(), "SK": "INVOICE"}).
			Set("status", "APPROVED").Guard(ddbworker.MustExist())), nil
	}))
	err := reg.Register("InvoiceApproved", ddbworker.HandlerFunc(nil))
	fmt.Println(reg.Types(), err != nil)
	// Output: [InvoiceApproved] true
}

// JSON gives a handler its payload typed and validated; a payload that does
// not decode or validate ends terminal INVALID_PAYLOAD before the handler.
func ExampleJSON() {
	type approved struct {
		InvoiceID string `json:"invoiceId"`
		Cents     int64  `json:"cents"`
	}
	h := ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p approved) (ddbworker.Result, error) {
		fmt.Println("approve", p.InvoiceID, p.Cents)
		return ddbworker.Apply(ddbworker.Update("app", ddbworker.Key{"PK": "INVOICE#" + p.InvoiceID, "SK": "INVOICE"}).
			Add("approvedCents", p.Cents)), nil
	})
	msg := func(payload string) *ddbworker.Message {
		return &ddbworker.Message{Envelope: &envelope.Envelope{MessageType: "InvoiceApproved", Payload: []byte(payload)}}
	}
	_, _ = h.Handle(context.Background(), msg(`{"invoiceId":"inv-7","cents":1200}`))
	_, err := h.Handle(context.Background(), msg(`{"invoiceId":7}`))
	f, _ := failure.As(err)
	fmt.Println(f.Kind, f.Code)
	// Output:
	// approve inv-7 1200
	// terminal INVALID_PAYLOAD
}

// New reports every configuration problem at once.
func ExampleNew() {
	_, err := worker.New(worker.Deps{}, worker.Config{Concurrency: -1, TerminalPolicy: "shred"})
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Println(line)
	}
	// Output:
	// worker: Deps.DynamoDB is required
	// worker: Deps.SQS is required
	// worker: Deps.Handlers must register at least one message type
	// worker: Config.Store: inbox: Store.Table is required
	// worker: Config.QueueURL is required
	// worker: Config.TerminalPolicy "shred" must be dlq, quarantine or redrive
	// worker: Config.Concurrency -1 must be within 1..10000
}

func TestNewValidatesTogether(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, (&caseflow.Handlers{Table: "t"}).Register(reg))
	_, err := worker.New(worker.Deps{Handlers: reg}, worker.Config{Store: inbox.Store{Table: "t"}, QueueURL: "q", TerminalPolicy: worker.PolicyDLQ,
		VisibilityTimeout: 1500 * time.Millisecond, WaitTime: 21 * time.Second})
	require.ErrorContains(t, err, "DLQURL is required")
	require.ErrorContains(t, err, "VisibilityTimeout")
	require.ErrorContains(t, err, "WaitTime")
}
