package lambda

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// The adapter's table check reads the consistency mode from the
// DescribeTable it makes (faults.MRSC answers as an MRSC global table), and
// the worker it builds then refuses a route whose commit is a transaction,
// as the init does before any record; the single-write route with
// SkipInboxCheck is built.
func TestTableCheckReadsMRSC(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ddb := dynamodb.NewFromConfig(env.AWS, faults.MRSC)
	build := func(opts ...ddbworker.RouteOption) (*handler, error) {
		reg := ddbworker.NewRegistry()
		require.NoError(t, reg.Register("OrderPlaced", ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
			return ddbworker.Result{}, nil
		}), opts...))
		h := &handler{cfg: worker.Config{Store: inbox.Store{Table: env.Table}, TerminalPolicy: worker.PolicyQuarantine},
			deps: worker.Deps{DynamoDB: ddb, SQS: sqs.NewFromConfig(env.AWS), Handlers: reg}, log: slog.New(slog.DiscardHandler),
			workers: map[string]*worker.Worker{}, owner: "fn", given: func(inbox.Setting) bool { return false }, keyGiven: map[string]bool{}, ddb: ddb}
		require.NoError(t, h.checkStore(context.Background()), "an MRSC table fits without TTL")
		require.Equal(t, ddbtypes.MultiRegionConsistencyStrong, h.cfg.MultiRegionConsistency)
		start := time.Now()
		_, err := h.newWorker(env.Queues.URL)
		require.Less(t, time.Since(start), 100*time.Millisecond)
		return h, err
	}
	_, err := build()
	var refused *worker.TransactionsRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, []string{"OrderPlaced"}, refused.Routes)
	require.ErrorContains(t, err, "ddbworker.SingleWrite() and ddbworker.SkipInboxCheck()")

	_, err = build(ddbworker.SingleWrite(), ddbworker.SkipInboxCheck())
	require.NoError(t, err)
}
