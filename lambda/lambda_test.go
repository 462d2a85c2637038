package lambda_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/logevent"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// The example's function, its queue taken from the records'
// eventSourceARN: the work applies exactly once; terminal work ends in the
// DLQ with its failure and is a success to the mapping; the same work sent
// again is a success with no second effect.
func TestRIEExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	f := startFunction(t, examplePkg, w.functionEnv(false))
	w.seedOrder("o-1")
	applied := request(t, "k-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1250, Currency: "EUR"})
	ids := w.send(applied,
		request(t, "k-2", invoices.InvoiceRequested{OrderID: "o-missing", AmountCents: 990, Currency: "EUR"}),
		request(t, "k-3", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 0, Currency: "EUR"}), // fails Validate
		`{not an envelope`)

	ev := w.receive(4, time.Minute)
	resp := f.invoke(ev)
	require.Empty(t, resp.BatchItemFailures, "applied work, and terminal work copied to the DLQ, are successes")
	w.settle(ev, resp)

	invoice, order := w.item("ORDER#o-1", "INVOICE"), w.item("ORDER#o-1", "ORDER")
	require.Equal(t, "INV-k-1", invoice[invoices.AttrInvoiceNumber])
	require.EqualValues(t, 1250, invoice[invoices.AttrAmountCents])
	require.Equal(t, invoices.StatusInvoiced, order[invoices.AttrStatus])
	require.Equal(t, "INV-k-1", order[invoices.AttrInvoiceNumber])
	rec := w.inboxRecord("k-1")
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, inbox.OutcomeApplied, rec.Outcome)
	require.Zero(t, rec.Attempts, "no failure, no attempt counted")
	require.Empty(t, w.item("ORDER#o-missing", "INVOICE"), "no invoice without its order")
	for key, code := range map[string]string{"k-2": invoices.CodeOrderNotFound, "k-3": ddbworker.CodeInvalidPayload} {
		r := w.inboxRecord(key)
		require.Equal(t, inbox.StatusFailedTerminal, r.Status, key)
		require.Equal(t, code, r.FailureCode, key)
	}
	copies := w.dlq(3)
	for code, want := range map[string]struct{ key, sqsID string }{
		invoices.CodeOrderNotFound: {"k-2", ids[1]}, ddbworker.CodeInvalidPayload: {"k-3", ids[2]},
	} {
		m, ok := copies[code]
		require.True(t, ok, "a DLQ copy with failure code %s: %v", code, copies)
		require.Equal(t, want.key, attr(m, "ddbworker.idempotencyKey"))
		require.Equal(t, want.sqsID, attr(m, "ddbworker.sourceMessageId"))
		require.NotEmpty(t, attr(m, "ddbworker.failureMessage"))
		delete(copies, code)
	}
	for code, m := range copies {
		require.NotEmpty(t, code, "the body that is not an envelope is copied with its code")
		require.Equal(t, ids[3], attr(m, "ddbworker.sourceMessageId"))
	}

	// The same work, sent again as a new message (a producer's retry).
	dup := *applied
	dup.MessageID = testenv.Unique("m")
	dupID := w.send(&dup)[0]
	ev = w.receive(1, time.Minute)
	resp = f.invoke(ev)
	require.Empty(t, resp.BatchItemFailures, "a duplicate is a success")
	w.settle(ev, resp)
	require.Equal(t, invoice, w.item("ORDER#o-1", "INVOICE"), "no second invoice")
	require.Equal(t, order, w.item("ORDER#o-1", "ORDER"))
	again := w.inboxRecord("k-1")
	require.Equal(t, inbox.StatusCompleted, again.Status)
	require.Equal(t, rec.CompletedAt, again.CompletedAt)
	require.Zero(t, again.Attempts)
	require.Len(t, f.logs(map[string]string{"sqsMessageId": dupID, "result": worker.OutcomeDuplicate}), 1, "the duplicate's log line")

	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.URL).Total(), "every message settled")
	var lines []map[string]any
	for _, l := range f.logs(nil) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, logevent.Prefix) {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 5, "one log line per record")
	for _, l := range lines {
		require.NotEmpty(t, l["awsRequestId"], "the invocation's request id: %v", l)
	}
}

// A retryable failure is hidden for its backoff with ChangeMessageVisibility
// on the record's own receipt handle — not at once, and not for the
// visibility it was received with — and reported; it comes back and
// applies as attempt 2.
func TestRIERetryBacksOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	f := startFunction(t, flakyPkg, w.functionEnv(true))
	w.seedOrder("o-2")
	id := w.send(request(t, "k-flaky", invoices.InvoiceRequested{OrderID: "o-2", AmountCents: 500, Currency: "EUR"}))[0]

	ev := w.receive(1, time.Minute)
	start := time.Now()
	resp := f.invoke(ev)
	answered := time.Now()
	require.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: id}}, resp.BatchItemFailures)
	hidden, ok := w.inflight()[id]
	require.True(t, ok, "still in flight: hidden, not deleted or released")
	require.False(t, hidden.Before(start.Add(time.Second-50*time.Millisecond)), "hidden for the backoff (at least 1s), not visible at once: until %s", hidden)
	require.True(t, hidden.Before(answered.Add(10*time.Second)), "hidden for the backoff, not the minute it was received with: until %s", hidden)
	rec := w.inboxRecord("k-flaky")
	require.Equal(t, inbox.StatusFailedRetryable, rec.Status)
	require.Equal(t, "FLAKY", rec.FailureCode)
	require.Equal(t, 1, rec.Attempts)

	ev = w.receive(1, time.Minute) // back after the backoff
	require.Equal(t, id, ev.Records[0].MessageId)
	require.Equal(t, "2", ev.Records[0].Attributes["ApproximateReceiveCount"])
	resp = f.invoke(ev)
	require.Empty(t, resp.BatchItemFailures)
	w.settle(ev, resp)
	require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#o-2", "ORDER")[invoices.AttrStatus])
	rec = w.inboxRecord("k-flaky")
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts, "the one recorded failure; the commit counts none")
	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.URL).Total())
}

// The health gate lives as long as the execution environment: after an
// invocation finds DynamoDB throttling, the next ones hide and report
// their whole batch without touching the table (at most a probe), until
// probes succeed; then the batch applies, with no business attempt spent.
func TestRIEHealthGate(t *testing.T) {
	t.Parallel()
	// The test hands the parked records back far sooner than their parking
	// would: room for those receives before the redrive policy.
	w := newWorld(t, worker.QueueConfig{MaxReceiveCount: 1000})
	ddbURL, _ := testenv.Endpoints(t)
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: ddbURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	env := w.functionEnv(false)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = proxy.URL()
	f := startFunction(t, examplePkg, env)
	orders := []string{"o-a", "o-b", "o-c", "o-d", "o-e", "o-f"}
	for _, o := range orders {
		w.seedOrder(o)
		w.send(request(t, "k-"+o, invoices.InvoiceRequested{OrderID: o, AmountCents: 100, Currency: "EUR"}))
	}

	proxy.SetMode(ddbproxy.Throttle)
	ev := w.receive(len(orders), time.Minute)
	resp := f.invoke(ev)
	require.Equal(t, recordIDs(ev), failedIDs(resp), "throttled: every record comes back")

	// They come back (as after their visibility); DynamoDB still throttles.
	w.release(ev)
	ev = w.receive(len(orders), time.Minute)
	proxy.Reset()
	asked := time.Now()
	resp = f.invoke(ev)
	require.Equal(t, recordIDs(ev), failedIDs(resp))
	require.LessOrEqual(t, proxy.Stats().Total, 1, "at most one probe: the invocation did not touch the table")
	inflight := w.inflight()
	for _, r := range ev.Records {
		require.True(t, inflight[r.MessageId].After(asked.Add(30*time.Second)), "hidden (parked) while the database is unhealthy, not handed straight back")
	}

	// DynamoDB recovers. The next batches — each with the records received
	// afresh, as the mapping hands them over once their parking ends —
	// still touch nothing but the probes, until two probes in a row succeed
	// (the probes wait 2s, then longer).
	proxy.SetMode(ddbproxy.Pass)
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		w.release(ev)
		ev = w.receive(len(orders), time.Minute)
		proxy.Reset()
		resp = f.invoke(ev)
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		require.Equal(t, recordIDs(ev), failedIDs(resp), "all or nothing while the gate holds")
		require.LessOrEqual(t, proxy.Stats().Total, 1, "at most one probe per invocation while unhealthy")
		require.True(t, time.Now().Before(deadline), "the batch did not apply within 30s of DynamoDB's recovery")
		<-tick.C
	}
	w.settle(ev, resp)
	for _, o := range orders {
		require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#"+o, "ORDER")[invoices.AttrStatus], o)
		rec := w.inboxRecord("k-" + o)
		require.Equal(t, inbox.StatusCompleted, rec.Status)
		require.Zero(t, rec.Attempts, "throttling cost no business attempt")
	}
	require.NotEmpty(t, f.logs(map[string]string{"result": worker.OutcomeParked}), "parked records are logged")
	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.URL).Total())
}

// A configuration problem fails the function's init with one error that
// names the variable; no record is touched.
func TestRIEInitError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	env := w.functionEnv(true)
	env["DDBWORKER_TABLE"] = ""
	env["DDBWORKER_CONCURRENCY"] = "many"
	f := startFunction(t, examplePkg, env)
	w.send(request(t, "k-init", invoices.InvoiceRequested{OrderID: "o-3", AmountCents: 1, Currency: "EUR"}))
	ev := w.receive(1, time.Minute)
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	status, answer := f.post(body)
	require.NotEqual(t, http.StatusOK, status, "%s", answer)
	require.Contains(t, string(answer), "DDBWORKER_TABLE is required")
	require.Contains(t, string(answer), `DDBWORKER_CONCURRENCY=\"many\": not an integer`)
	require.Contains(t, string(answer), "ddbworker.InitError")
	require.Len(t, f.logs(map[string]string{"msg": "init failed"}), 1)
}
