package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/worker"
)

// A handler returns its writes (committed with the inbox flip) or a typed
// failure; the registry routes message types to handlers.
func ExampleRegistry() {
	reg := worker.NewRegistry()
	_ = reg.Register("InvoiceApproved", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) (worker.Result, error) {
		if len(m.Envelope.Payload) == 0 {
			return worker.Result{}, failure.NewTerminal("EMPTY_INVOICE", "nothing to approve")
		}
		return worker.Result{ /* Writes: mutation.Update(...), … */ }, nil
	}))
	err := reg.Register("InvoiceApproved", worker.HandlerFunc(nil))
	fmt.Println(reg.Types(), err != nil)
	// Output: [InvoiceApproved] true
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
	// worker: Config.Table is required
	// worker: Config.QueueURL is required
	// worker: Config.TerminalPolicy "shred" must be dlq, quarantine or redrive
	// worker: Config.Concurrency -1 must be within 1..10000
}

func TestNewValidatesTogether(t *testing.T) {
	reg := worker.NewRegistry()
	require.NoError(t, (&caseflow.Handlers{Table: "t"}).Register(reg))
	_, err := worker.New(worker.Deps{Handlers: reg}, worker.Config{Table: "t", QueueURL: "q", TerminalPolicy: worker.PolicyDLQ,
		VisibilityTimeout: 1500 * time.Millisecond, WaitTime: 21 * time.Second})
	require.ErrorContains(t, err, "DLQURL is required")
	require.ErrorContains(t, err, "VisibilityTimeout")
	require.ErrorContains(t, err, "WaitTime")
}
