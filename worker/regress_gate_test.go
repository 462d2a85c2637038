package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Old behaviour: an error of the gate's PutItem was infrastructure trouble
// whatever it was: the message came back after a backoff, again and again.
// A ValidationException (a key over DynamoDB's limits, an item too large)
// never heals by waiting, so the message looped until the redrive policy
// moved it, unaccounted for in the inbox. The test makes every gate PutItem
// (the IDEMP# item) fail with a ValidationException and requires one
// delivery ending terminal INVALID_TRANSACTION — no retry event — with a
// rejection record and a DLQ copy.
func TestRegressGateValidationIsTerminal(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	var refused atomic.Int32
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "PutItem", Rate: 1,
		Err: &smithy.GenericAPIError{Code: "ValidationException", Message: "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes (injected)"},
		Match: func(in any) bool {
			p, ok := in.(*dynamodb.PutItemInput)
			if !ok {
				return false
			}
			pk, ok := p.Item[tables.DefaultLayout().PartitionKey].(*ddbtypes.AttributeValueMemberS)
			if !ok || !strings.HasPrefix(pk.Value, "IDEMP#") {
				return false
			}
			refused.Add(1)
			return true
		}})
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-invalid", "c1", "intake", effective)))

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Positive(t, refused.Load(), "precondition: the gate's PutItem was refused")
	h.requireRejected(ev, failure.CodeInvalidTransaction, "c1", "k-invalid")
	require.Len(t, h.allEvents(), 1, "one delivery, no retry: %+v", h.allEvents())
	h.requireQueueEmpty()
}

// Envelope limits whose derived keys exceed DynamoDB's key limits are
// refused by New: every such message would fail its gate with a
// ValidationException. (It once caught MaxKeyBytes 900, whose aggregate
// index sort key — first-seen time, type and key — reached 1,182 bytes;
// that sort key is the first-seen time alone now, so idempotency keys are
// bounded by the 2,048-byte partition key.) The defaults are accepted.
func TestRegressNewRefusesOversizedKeyLimits(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(context.Context, *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Result{}, nil
	})))
	deps := worker.Deps{DynamoDB: dynamodb.New(dynamodb.Options{Region: "us-east-1"}), SQS: sqs.New(sqs.Options{Region: "us-east-1"}), Handlers: reg}
	cfg := worker.Config{Store: inbox.Store{Table: "t"}, QueueURL: "http://127.0.0.1:1/000000000000/q", DLQURL: "http://127.0.0.1:1/000000000000/q-dlq"}

	_, err := worker.New(deps, cfg)
	require.NoError(t, err, "the default limits fit DynamoDB's keys")

	for _, lim := range []envelope.Config{{MaxKeyBytes: 2100}, {MaxFieldBytes: 1100}} {
		cfg.Envelope = lim
		_, err = worker.New(deps, cfg)
		require.Error(t, err, "%+v", lim)
		require.ErrorContains(t, err, "MaxKeyBytes")
		require.ErrorContains(t, err, "DynamoDB allows")
	}
}
