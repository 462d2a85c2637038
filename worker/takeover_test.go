package worker_test

import (
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// A message that kills its worker every time ends, with a code: each
// delivery crashes right after its claim (the after-gate failpoint ends
// the delivery's goroutine, as a crash ends the process: no outcome, no
// release, the lease left to expire), the next delivery takes the expired
// lease over — counted apart, never as a business attempt — and after
// Config.MaxTakeovers takeovers the next expiry ends the work
// FAILED_TERMINAL MAX_TAKEOVERS_EXCEEDED, its DLQ copy carrying the code.
func TestMessageThatKillsItsWorkerEndsMaxTakeovers(t *testing.T) {
	const maxTakeovers = 2
	// Room for the receives that find the lease still held (in flight):
	// the worker's code must end the work, not the redrive policy.
	h := newHarness(t, testenv.Options{Queue: worker.QueueConfig{MaxReceiveCount: 30, VisibilityTimeout: 2 * time.Second}})
	h.seedCases("c1")
	var crashes atomic.Int32
	crash := func(name string) {
		if name == hooks.AfterGate {
			crashes.Add(1)
			runtime.Goexit()
		}
	}
	cfg := h.testConfig()
	cfg.MaxTakeovers = maxTakeovers
	// A crashed delivery never gives its slot back (its process would be
	// gone): room for every crash, and a limit that does not adapt below it.
	cfg.Concurrency = 2 * (maxTakeovers + 2)
	h.start(cfg, worker.Deps{Handlers: h.caseHandlers()}, hooks.Hooks{Failpoint: crash, FixedConcurrency: true})
	h.send(mustEnv(t)(caseflow.NewDeadlineRequest("k-killer", "c1", "intake", effective)))

	ev := h.waitEvents(1, 60*time.Second, final)[0]
	require.Equal(t, worker.OutcomeTerminal, ev.Outcome, "%+v", h.allEvents())
	require.Equal(t, failure.CodeMaxTakeovers, ev.Code)
	require.Equal(t, worker.PolicyDLQ, ev.Policy)
	require.EqualValues(t, maxTakeovers+1, crashes.Load(), "the first claim and each takeover crashed; the expiry after the last takeover ended the work")
	// The crashed deliveries reported nothing; the others found a crashed
	// delivery's lease not yet expired and waited (in flight).
	for _, e := range h.allEvents()[:len(h.allEvents())-1] {
		require.Equal(t, worker.OutcomeInFlight, e.Outcome, "%+v", h.allEvents())
	}

	rec := h.record("k-killer", caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, failure.CodeMaxTakeovers, rec.FailureCode)
	require.Equal(t, maxTakeovers, rec.Takeovers)
	require.Zero(t, rec.Attempts, "crashes are not business attempts")
	require.Zero(t, h.applications("c1", caseflow.TypeDeadline, "k-killer"), "the handler never ran to a commit")

	copied := h.dlq(1)[0]
	require.Equal(t, failure.CodeMaxTakeovers, aws.ToString(copied.MessageAttributes[dlq.AttrFailureCode].StringValue))
	require.Equal(t, "k-killer", aws.ToString(copied.MessageAttributes[dlq.AttrIdempotencyKey].StringValue))
	h.requireQueueEmpty()
}

// A takeover whose UpdateItem applied while every SDK attempt lost its
// response costs nothing: the worker gives back the lease it may hold
// (fenced on its token), and the next delivery takes the work over at
// once, as business attempt 1. The takeover is of a lease a crash
// abandoned, so the unanswered write counted that one takeover; had the
// lease not been given back, the next delivery would have waited for it
// to expire and counted a second. (The gate's PutItem likewise:
// TestRegressUnansweredGateWriteCostsNothing.)
func TestRegressUnansweredTakeoverCostsNothing(t *testing.T) {
	h := newHarness(t, testenv.Options{})
	h.seedCases("c1")
	const key = "k-unanswered-takeover"
	crash, hit := crashAt(hooks.AfterGate, nil) // the first claim's worker dies
	h.start(h.testConfig(), worker.Deps{Handlers: h.caseHandlers()}, hooks.Hooks{Failpoint: crash})
	env := mustEnv(t)(caseflow.NewDeadlineRequest(key, "c1", "intake", effective))
	env.AttemptPolicy = &envelope.AttemptPolicy{MaxBusinessAttempts: 1}
	h.send(env)
	<-hit
	abandoned := h.record(key, caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusProcessing, abandoned.Status)

	// The redelivery's takeover: its first attempt applies and loses its
	// response, and each retry the SDK makes of that same call (the same
	// input; as many as the call's time allows) fails before it reaches
	// the table. The give-back that follows is another call: untouched.
	recordKey := (inbox.Store{}).Key(key, caseflow.TypeDeadline)
	var unanswered atomic.Pointer[dynamodb.UpdateItemInput]
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindLostResponse, Times: 1,
		Match: func(in any) bool {
			u, ok := in.(*dynamodb.UpdateItemInput)
			return ok && reflect.DeepEqual(u.Key, recordKey) && unanswered.CompareAndSwap(nil, u)
		}})
	h.inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.KindServerError, Rate: 1,
		Match: func(in any) bool { u, ok := in.(*dynamodb.UpdateItemInput); return ok && u == unanswered.Load() }})

	ev := h.waitEvents(1, 30*time.Second, final)[0]
	require.Equal(t, 1, h.inj.Fired()[faults.KindLostResponse], "the takeover applied unanswered")
	require.Positive(t, h.inj.Fired()[faults.KindServerError], "the SDK retried the takeover; no attempt got an answer")
	require.Equal(t, worker.OutcomeApplied, ev.Outcome, "%+v", h.allEvents())
	require.Equal(t, 1, ev.Attempt, "no business attempt charged")
	rec := h.record(key, caseflow.TypeDeadline)
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Zero(t, rec.Attempts)
	require.Equal(t, 1, rec.Takeovers, "the crash's abandoned lease only: the unanswered takeover's lease was given back, not abandoned")
	require.NotEqual(t, abandoned.LeaseToken, rec.LeaseToken)
	require.EqualValues(t, 1, h.applications("c1", caseflow.TypeDeadline, key))
	h.requireQueueEmpty()
}
