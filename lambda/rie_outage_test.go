package lambda_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// A DynamoDB outage many times longer than maxReceiveCount × the first
// parking (5 × 1s here; time compressed by configuration: the hidings
// follow the outage's age, 1s to 5s at most, as they grow from 1m to 12h
// with the defaults) under a function driven as an event source mapping
// drives it — polling the whole time, invoking with what it received,
// deleting what the response does not report — costs no healthy message
// the DLQ and no business attempt: each poll that finds a record hides it
// longer, and on the last receive the redrive policy allows (here within
// 15 s of the outage's 30) the record is re-sent as a new message and not
// reported, so its receive count starts afresh; every order is invoiced
// exactly once after the recovery — counted: the function is the
// example's with an application counter written in the same transaction
// as the invoice (testdata/counting), so a second application of an order
// would show as 2. Orders arrive before and during the outage. Before, each poll hid a
// record for the same ParkVisibility, and an outage longer than
// maxReceiveCount × ParkVisibility dead-lettered everything (measured: 28
// of 40 messages, 20 orders never invoiced); and a record hidden on its
// last receive, however long, went to the DLQ at its next.
func TestRIEOutageLongerThanTheRedriveBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of compressed outage")
	}
	const maxReceives = 5
	w := newWorld(t, worker.QueueConfig{MaxReceiveCount: maxReceives, VisibilityTimeout: functionTimeout + 5*time.Second})
	ddbURL, _ := testenv.Endpoints(t)
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: ddbURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	env := w.functionEnv(true)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = proxy.URL()
	env["DDBWORKER_PARK_VISIBILITY"] = "1s"
	env["DDBWORKER_PARK_MAX_VISIBILITY"] = "5s"
	env["DDBWORKER_PROBE_MAX_INTERVAL"] = "2s"
	f := startFunction(t, countingPkg, env)

	const before, during = 10, 10
	orders := make([]string, before+during)
	for i := range orders {
		orders[i] = fmt.Sprintf("o-%02d", i)
		w.seedOrder(orders[i])
	}
	send := func(from, to int) {
		for _, o := range orders[from:to] {
			w.send(request(t, "k-"+o, invoices.InvoiceRequested{OrderID: o, AmountCents: 100, Currency: "EUR"}))
		}
	}

	// The mapping: poll, invoke, delete what did not fail; in the
	// background, for the whole test.
	ctx, stop := context.WithCancel(context.Background())
	polled := make(chan int, 1) // receives of the poller, reported when it stops
	go func() {
		n := 0
		defer func() { polled <- n }()
		for ctx.Err() == nil {
			ev := w.poll(10)
			if len(ev.Records) == 0 {
				continue
			}
			n++
			w.settle(ev, f.invoke(ev))
		}
	}()

	send(0, before)
	proxy.SetMode(ddbproxy.Throttle)
	const outage = 30 * time.Second // six times maxReceiveCount × the first parking
	began := time.Now()
	send(before, len(orders)) // arriving during the outage
	<-time.After(time.Until(began.Add(outage)))
	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.DLQURL).Total(), "nothing dead-lettered during the outage")
	proxy.SetMode(ddbproxy.Pass)

	testenv.Eventually(t, 90*time.Second, func() bool { return testenv.InspectQueue(t, w.env.Queues.URL).Total() == 0 },
		"every order invoiced after the recovery")
	stop()
	t.Logf("the mapping polled %d batches with records; %d requests reached DynamoDB", <-polled, proxy.Stats().Total)
	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.DLQURL).Total(), "no healthy message dead-lettered")
	for _, o := range orders {
		require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#"+o, "ORDER")[invoices.AttrStatus], o)
		rec := w.inboxRecord("k-" + o)
		require.Equal(t, inbox.StatusCompleted, rec.Status, o)
		require.Zero(t, rec.Attempts, "%s: the outage cost no business attempt", o)
		require.Equal(t, "INV-k-"+o, w.item("ORDER#"+o, "INVOICE")[invoices.AttrInvoiceNumber], "%s invoiced under its key", o)
		require.Equal(t, float64(1), w.item("ORDER#"+o, countingSK)[countingAttr], "%s: applied exactly once", o)
	}
	require.NotEmpty(t, f.logs(map[string]string{"result": worker.OutcomeParked}), "records were parked")
	require.NotEmpty(t, f.logs(map[string]string{"result": worker.OutcomeParked, "resent": "true"}), "records on their last receive were re-sent")
}

// The application counter testdata/counting writes with each invoice: its
// item's sort key (under the order's PK) and attribute.
const countingSK, countingAttr = "APPLICATIONS", "applications"

// poll is one receive of the event source mapping: up to n messages,
// whatever is there within a second, with every attribute.
func (w *world) poll(n int) events.SQSEvent {
	w.t.Helper()
	out, err := w.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(w.env.Queues.URL), MaxNumberOfMessages: int32(n), WaitTimeSeconds: 1,
		VisibilityTimeout:           int32((functionTimeout + 5*time.Second) / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"}})
	require.NoError(w.t, err)
	var ev events.SQSEvent
	for _, m := range out.Messages {
		r := record(m, w.arn)
		if c, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); c > maxSeenReceives {
			w.t.Errorf("message %s received %d times: past the redrive policy's maxReceiveCount", r.MessageId, c)
		}
		ev.Records = append(ev.Records, r)
	}
	return ev
}

// maxSeenReceives is the redrive policy's maxReceiveCount of the outage
// test: a message received more often would be on its way to the DLQ.
const maxSeenReceives = 5
