package worker_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// Old behaviour: one receive may return several messages of a FIFO group
// (AWS does; fauxqs does not, hence the emulation below). The worker ran
// them one after another, but only the running message's visibility was
// renewed: when the first ran longer than the visibility timeout, the
// waiting ones reappeared, were received a second time (ReceiveCount 2) by
// the next receive and ran beside, or before, the rest of their group.
// The test catches it because every delivery the worker received is
// recorded: each of the three messages must be received exactly once, with
// ApproximateReceiveCount 1, handled once, in order, never two at a time.
func TestRegressFIFOWaitingMessagesStayHidden(t *testing.T) {
	h := newHarness(t, testenv.Options{}) // a standard queue, made to look FIFO
	h.seedCases("c1", "c2", "c3")
	emu := &fifoEmulation{Fake: h.env.Queues.URL + ".fifo", Real: h.env.Queues.URL, Group: "g1"}
	sqsClient := sqs.NewFromConfig(h.env.AWS, h.inj.SQS, emu.install)

	const visibility = 2 * time.Second
	slow := visibility * 3 / 2
	inner := &caseflow.Handlers{Table: h.env.Table, TrackApplications: true}
	var (
		mu       sync.Mutex
		order    []string
		counts   []int
		active   atomic.Int32
		overlaps atomic.Int32
	)
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register(caseflow.TypeDeadline, ddbworker.HandlerFunc(func(ctx context.Context, m *ddbworker.Message) (ddbworker.Result, error) {
		if active.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer active.Add(-1)
		mu.Lock()
		first := len(order) == 0
		order = append(order, m.Envelope.IdempotencyKey)
		counts = append(counts, m.ReceiveCount)
		mu.Unlock()
		if first {
			// The first of the group runs 1.5 visibility timeouts.
			select {
			case <-time.After(slow):
			case <-ctx.Done():
				return ddbworker.Result{}, ctx.Err()
			}
		}
		return ddbworker.JSON(inner.Deadline).Handle(ctx, m)
	})))

	// Sent before the worker starts, so its first receive returns the
	// whole group at once (as one AWS receive may).
	var envs []*envelope.Envelope
	for _, c := range []string{"c1", "c2", "c3"} {
		envs = append(envs, mustEnv(t)(caseflow.NewDeadlineRequest("k-fifo-"+c, c, "intake", effective)))
	}
	h.send(envs...)

	cfg := h.testConfig()
	cfg.QueueURL = emu.Fake
	cfg.VisibilityTimeout = visibility
	cfg.Concurrency, cfg.BatchSize, cfg.Pollers = 3, 3, 2
	h.start(cfg, worker.Deps{Handlers: reg, SQS: sqsClient})

	evs := h.waitEvents(3, 30*time.Second, final)
	h.requireQueueEmpty()

	receives := emu.Receives()
	require.NotEmpty(t, receives)
	require.Len(t, receives[0], 3, "emulation precondition: the first receive returns the whole group")
	var batchOrder []string
	for _, m := range receives[0] {
		var e struct {
			IdempotencyKey string `json:"idempotencyKey"`
		}
		require.NoError(t, json.Unmarshal([]byte(aws.ToString(m.Body)), &e))
		batchOrder = append(batchOrder, e.IdempotencyKey)
	}
	var all []types.Message
	for _, r := range receives {
		all = append(all, r...)
	}
	for _, m := range all {
		require.Equal(t, "1", m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)],
			"message %s was received again: a waiting message of the group reappeared while the first ran", aws.ToString(m.MessageId))
	}
	require.Len(t, all, 3, "each message received exactly once")

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, batchOrder, order, "the group ran in order, each message once")
	require.Equal(t, []int{1, 1, 1}, counts, "no handler saw a redelivery")
	require.Zero(t, overlaps.Load(), "two handlers of one group ran at the same time")

	require.Len(t, h.allEvents(), 3, "no other delivery: %+v", h.allEvents())
	for _, ev := range evs {
		require.Equal(t, worker.OutcomeApplied, ev.Outcome)
		require.Equal(t, 1, ev.Attempt)
	}
	for _, c := range []string{"c1", "c2", "c3"} {
		require.EqualValues(t, 1, h.applications(c, caseflow.TypeDeadline, "k-fifo-"+c))
	}
}
