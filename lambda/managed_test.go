package lambda_test

// Lambda Managed Instances run many invocations at once in one execution
// environment (AWS_LAMBDA_MAX_CONCURRENCY; the runtime loop of
// aws-lambda-go calls the handler from that many goroutines). These tests
// call the adapter's handler the same way — one handler, many goroutines —
// with events built from real SQS receives, DynamoDB behind the fault
// proxy, and the race detector on (make test runs -race).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/gate"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/worker"
)

// handlerFunc is the adapter's handler.
type handlerFunc = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// managedEnv is the function's environment as Lambda Managed Instances
// set it for concurrent invocations.
func managedEnv(w *world, concurrency int) map[string]string {
	env := w.functionEnv(true)
	env["AWS_LAMBDA_FUNCTION_NAME"] = "invoices"
	env["AWS_LAMBDA_LOG_STREAM_NAME"] = "2026/12/06/[$LATEST]0123456789abcdef"
	env["AWS_LAMBDA_MAX_CONCURRENCY"] = fmt.Sprint(concurrency)
	return env
}

// invocationCtx is the context the runtime gives an invocation: its
// request id and its deadline (the function's timeout).
func invocationCtx(t *testing.T, requestID string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), functionTimeout)
	t.Cleanup(cancel)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
}

// newManagedHandler builds the handler with New, its DynamoDB client
// through proxy (nil: straight to the emulator), its log and EMF lines in
// a file the returned function reads.
func newManagedHandler(t *testing.T, proxy *ddbproxy.Proxy, register func(*lambda.Registry, lambda.Env) error, env map[string]string) (handlerFunc, func() []map[string]any) {
	t.Helper()
	if proxy != nil {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.URL()) // New loads the SDK's configuration from the process
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	stdout := os.Stdout
	os.Stdout = out // New writes its logs and metrics to the os.Stdout it finds
	handle, err := lambda.New(context.Background(), register, lookup(env))
	os.Stdout = stdout
	require.NoError(t, err)
	logs := func() []map[string]any {
		f, err := os.Open(out.Name())
		require.NoError(t, err)
		defer f.Close()
		var lines []map[string]any
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines = append(lines, m)
			}
		}
		return lines
	}
	return handle, logs
}

// registerCounting registers testdata/counting's handler: the example's
// invoice plus, in the same transaction, ADD applications 1 on the
// order's APPLICATIONS item, so that a second application shows as 2.
func registerCounting(reg *lambda.Registry, env lambda.Env) error {
	h := &invoices.Handler{Table: env.Store.Table}
	return reg.Register(invoices.TypeInvoiceRequested, ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p invoices.InvoiceRequested) (ddbworker.Result, error) {
		r, err := h.Invoice(ctx, m, p)
		if err != nil {
			return r, err
		}
		key := invoices.OrderKey(p.OrderID)
		key[invoices.AttrSK] = countingSK
		r.Writes = append(r.Writes, ddbworker.Update(h.Table, key).Add(countingAttr, 1))
		return r, nil
	}))
}

// Two invocations running at once in one execution environment each hold
// their leases under their own name: the environment's log stream and the
// invocation's request id. Before, both wrote the function and log stream
// alone — the same leaseOwner for two holders.
func TestManagedInstancesLeaseOwnerPerInvocation(t *testing.T) {
	w := newWorld(t)
	env := managedEnv(w, 2)
	var entered atomic.Int32
	both := make(chan struct{})
	handle, _ := newManagedHandler(t, nil, func(reg *lambda.Registry, env lambda.Env) error {
		h := &invoices.Handler{Table: env.Store.Table}
		return reg.Register(invoices.TypeInvoiceRequested, ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p invoices.InvoiceRequested) (ddbworker.Result, error) {
			if entered.Add(1) == 2 {
				close(both)
			}
			select { // both invocations hold their work's lease at once
			case <-both:
			case <-ctx.Done():
				return ddbworker.Result{}, ctx.Err()
			}
			return h.Invoice(ctx, m, p)
		}))
	}, env)

	requests := map[string]string{"o-a": "req-a", "o-b": "req-b"}
	evs := map[string]events.SQSEvent{}
	for o := range requests {
		w.seedOrder(o)
		w.send(request(t, "k-"+o, invoices.InvoiceRequested{OrderID: o, AmountCents: 100, Currency: "EUR"}))
	}
	for range requests {
		ev := w.receive(1, time.Minute)
		var body struct {
			Payload invoices.InvoiceRequested `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Records[0].Body), &body))
		evs[body.Payload.OrderID] = ev
	}
	var wg sync.WaitGroup
	for o, id := range requests {
		wg.Go(func() {
			resp, err := handle(invocationCtx(t, id), evs[o])
			require.NoError(t, err)
			require.Empty(t, resp.BatchItemFailures, o)
			w.settle(evs[o], resp)
		})
	}
	wg.Wait()
	for o, id := range requests {
		rec := w.inboxRecord("k-" + o)
		require.Equal(t, inbox.StatusCompleted, rec.Status, o)
		require.Equal(t, "invoices/"+env["AWS_LAMBDA_LOG_STREAM_NAME"]+"/"+id, rec.LeaseOwner,
			"%s: the lease names the environment's log stream and the invocation that held it", o)
	}
}

// While the database hangs, an environment's invocations probe it one at
// a time: a probe that outlasts the probes' wait (each attempt hangs until
// the call timeout) is not joined by another at every wait, and when the
// database answers again the gate recovers once. Before, every invocation
// that found a probe due sent its own while the first still hung, and the
// probes answered together each recovered the gate (a double close of its
// resumed channel: a panic).
func TestManagedInstancesOneProbeAtATime(t *testing.T) {
	w := newWorld(t, worker.QueueConfig{MaxReceiveCount: 1000})
	ddbURL, _ := testenv.Endpoints(t)
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: ddbURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	env := managedEnv(w, 8)
	env["DDBWORKER_PROBE_MAX_INTERVAL"] = "2s" // probes wait 1.6s to 2.4s
	env["DDBWORKER_CALL_TIMEOUT"] = "20s"      // a hanging probe outlasts several waits
	env["DDBWORKER_PARK_VISIBILITY"] = "1s"
	env["DDBWORKER_PARK_MAX_VISIBILITY"] = "2s"
	handle, logs := newManagedHandler(t, proxy, registerInvoices, env)
	orders := []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"}
	for _, o := range orders {
		w.seedOrder(o)
		w.send(request(t, "k-"+o, invoices.InvoiceRequested{OrderID: o, AmountCents: 100, Currency: "EUR"}))
	}

	// The gate trips on throttling; then DynamoDB hangs.
	proxy.SetMode(ddbproxy.Throttle)
	ev := w.receive(len(orders), time.Minute)
	resp, err := handle(invocationCtx(t, "req-trip"), ev)
	require.NoError(t, err)
	require.Equal(t, recordIDs(ev), failedIDs(resp))
	proxy.SetMode(ddbproxy.Hang)
	proxy.Reset()

	// The mapping keeps invoking, several invocations at once, each with
	// the records received afresh, for more than three of the probes'
	// waits.
	var invocations sync.WaitGroup
	t.Cleanup(invocations.Wait)
	invoke := func(n int, ev events.SQSEvent) {
		invocations.Go(func() {
			resp, err := handle(invocationCtx(t, fmt.Sprintf("req-%d", n)), ev)
			require.NoError(t, err)
			w.settle(ev, resp)
		})
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	maxHeld := 0
	for n, until := 0, time.Now().Add(8*time.Second); time.Now().Before(until); n++ {
		<-tick.C
		maxHeld = max(maxHeld, proxy.Holding())
		w.release(ev)
		ev = w.receive(len(orders), time.Minute)
		invoke(n, ev)
	}
	held := proxy.Stats()
	t.Logf("while DynamoDB hung: %d requests, at most %d held at once", held.Total, maxHeld)
	require.LessOrEqual(t, maxHeld, 1, "one probe at a time, whatever the number of invocations")
	require.LessOrEqual(t, held.Total, 1, "the hanging probe was the only request")

	// DynamoDB answers again: the held probe succeeds, the next invocation
	// confirms it and the records apply.
	proxy.SetMode(ddbproxy.Pass)
	deadline := time.Now().Add(40 * time.Second)
	for {
		<-tick.C
		w.release(ev)
		ev = w.receive(len(orders), time.Minute)
		resp, err := handle(invocationCtx(t, "req-after"), ev)
		require.NoError(t, err)
		w.settle(ev, resp)
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the batch did not apply within 40s of DynamoDB's answer")
	}
	invocations.Wait()
	for _, o := range orders {
		require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#"+o, "ORDER")[invoices.AttrStatus], o)
	}
	require.Len(t, linesWith(logs(), "database healthy"), 1, "the gate recovered once")
}

// The proof of issue 24 for Lambda Managed Instances: 64 invocations of
// one handler run at once through a DynamoDB throttle (the 60 s,
// scaled to 20 s for test time; the parking and probe schedules scaled as
// in TestRIEOutageLongerThanTheRedriveBudget), then the event source
// mapping's polling goes on with 64 pollers. The environment's
// invocations share one health gate — it trips once and recovers once —
// one adaptive limit and one write budget: while the database is sick at
// most 5 requests a second reach it (counted at the fault proxy), no
// message is dead-lettered and every order is applied exactly once (its
// application counter, written in the commit's transaction, read back).
func TestManagedInstancesThrottle(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s of throttling")
	}
	const (
		invocations = 64
		perBatch    = 1
		throttle    = 20 * time.Second
		maxRate     = 5 // requests per second while sick
	)
	w := newWorld(t, worker.QueueConfig{MaxReceiveCount: maxSeenReceives, VisibilityTimeout: functionTimeout + 5*time.Second})
	ddbURL, _ := testenv.Endpoints(t)
	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: ddbURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	env := managedEnv(w, invocations)
	env["DDBWORKER_PARK_VISIBILITY"] = "1s"
	env["DDBWORKER_PARK_MAX_VISIBILITY"] = "5s"
	env["DDBWORKER_PROBE_MAX_INTERVAL"] = "2s"
	env["DDBWORKER_MAX_WCU"] = "200"
	// Below the default for 64 concurrent invocations (16 each): DynamoDB
	// Local, on a test machine, times out long before that.
	env["DDBWORKER_CONCURRENCY"] = "32"
	handle, logs := newManagedHandler(t, proxy, registerCounting, env)

	orders := make([]string, invocations*perBatch)
	for i := range orders {
		orders[i] = fmt.Sprintf("o-%03d", i)
		w.seedOrder(orders[i])
		w.send(request(t, "k-"+orders[i], invoices.InvoiceRequested{OrderID: orders[i], AmountCents: 100, Currency: "EUR"}))
	}
	first := make([]events.SQSEvent, invocations)
	for i := range first {
		first[i] = w.receive(perBatch, functionTimeout+5*time.Second)
	}

	var inFlight, peak atomic.Int32
	var invoked atomic.Int64
	invoke := func(id string, ev events.SQSEvent) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		resp, err := handle(invocationCtx(t, id), ev)
		inFlight.Add(-1)
		invoked.Add(1)
		require.NoError(t, err)
		w.settle(ev, resp)
	}

	// The fault layer's count, sampled every second while it throttles.
	proxy.SetMode(ddbproxy.Throttle)
	began := time.Now()
	start := make(chan struct{})
	ctx, stop := context.WithCancel(context.Background())
	var pollers sync.WaitGroup
	for i := range invocations {
		pollers.Go(func() {
			<-start
			invoke(fmt.Sprintf("req-%02d-first", i), first[i])
			for n := 0; ctx.Err() == nil; n++ { // the mapping's pollers
				if ev := w.poll(10); len(ev.Records) > 0 {
					invoke(fmt.Sprintf("req-%02d-%d", i, n), ev)
				}
			}
		})
	}
	close(start)
	type sample struct {
		at    time.Duration
		count int
	}
	var samples []sample
	tick := time.NewTicker(time.Second)
	for time.Since(began) < throttle {
		<-tick.C
		samples = append(samples, sample{time.Since(began), proxy.Stats().ByMode[ddbproxy.Throttle]})
	}
	tick.Stop()
	proxy.SetMode(ddbproxy.Pass)
	sick := proxy.Stats().ByMode[ddbproxy.Throttle]
	window := time.Since(began)
	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.DLQURL).Total(), "nothing dead-lettered during the throttle")

	drained := time.Now().Add(60 * time.Second)
	for testenv.InspectQueue(t, w.env.Queues.URL).Total() != 0 && time.Now().Before(drained) {
		<-time.After(100 * time.Millisecond)
	}
	if st := testenv.InspectQueue(t, w.env.Queues.URL); st.Total() != 0 {
		msgs := map[string]int{}
		for _, l := range logs() {
			m, _ := l["msg"].(string)
			if len(m) > 60 {
				m = m[:60]
			}
			msgs[fmt.Sprint(l["level"], " ", m, " ", l["result"])]++
		}
		t.Logf("queue: %+v; proxy: %+v; invoked %d; logs: %v", st, proxy.Stats(), invoked.Load(), msgs)
		t.FailNow()
	}
	stop()
	pollers.Wait()

	// The gate's trip: the environment's one "database unhealthy" line.
	lines := logs()
	unhealthy := linesWith(lines, "database unhealthy")
	require.Len(t, unhealthy, 1, "one health gate for the environment: it tripped once")
	require.Len(t, linesWith(lines, "database healthy"), 1, "and recovered once")
	tripped, err := time.Parse(time.RFC3339Nano, unhealthy[0]["time"].(string))
	require.NoError(t, err)
	trippedAt := tripped.Sub(began)
	// Sick: from the first sample after the trip to the throttle's end.
	// Before it, the calls that found the throttle (the records in flight
	// when it began, one request each) are what trips the gate.
	perSecond := make([]int, 0, len(samples))
	var base *sample
	prev := sample{}
	worst := 0
	for i, s := range samples {
		perSecond = append(perSecond, s.count-prev.count)
		if base != nil {
			worst = max(worst, s.count-prev.count)
		} else if s.at > trippedAt {
			base = &samples[i]
		}
		prev = s
	}
	require.NotNil(t, base, "the gate tripped within the throttle")
	afterTrip, sickFor := sick-base.count, window-base.at
	t.Logf("%d invocations (%d at once at the peak); the gate tripped %s into the %s throttle, after %d requests; then %d requests in %s (%.2f/s); per second: %v",
		invoked.Load(), peak.Load(), trippedAt.Round(time.Millisecond), window.Round(time.Millisecond), base.count, afterTrip, sickFor.Round(time.Millisecond),
		float64(afterTrip)/sickFor.Seconds(), perSecond)
	require.GreaterOrEqual(t, int(peak.Load()), invocations/2, "the invocations ran concurrently")
	require.LessOrEqual(t, base.count, 3*32, "before the trip: at most a call's 3 attempts per record in flight (DDBWORKER_CONCURRENCY)")
	require.LessOrEqual(t, float64(afterTrip)/sickFor.Seconds(), float64(maxRate), "requests per second while sick")
	require.LessOrEqual(t, worst, maxRate, "requests in any second while sick")

	require.Zero(t, testenv.InspectQueue(t, w.env.Queues.DLQURL).Total(), "no message dead-lettered")
	for _, o := range orders {
		require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#"+o, "ORDER")[invoices.AttrStatus], o)
		require.Equal(t, float64(1), w.item("ORDER#"+o, countingSK)[countingAttr], "%s: applied exactly once", o)
		rec := w.inboxRecord("k-" + o)
		require.Equal(t, inbox.StatusCompleted, rec.Status, o)
		require.Zero(t, rec.Attempts, "%s: the throttle cost no business attempt", o)
		require.True(t, strings.HasPrefix(rec.LeaseOwner, "invoices/"+env["AWS_LAMBDA_LOG_STREAM_NAME"]+"/req-"), "%s: held by one invocation: %s", o, rec.LeaseOwner)
	}
}

// linesWith are the log lines whose msg begins with prefix.
func linesWith(lines []map[string]any, prefix string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// A lease handed over with a re-sent copy (a record parked on its last
// receive while the database was down) reaches two invocations running at
// once when SQS delivers the copy twice: only the first to claim it holds
// it — under its own name and a new token — and the other finds it in
// flight. Before, both presented the token, both were told they own the
// lease, and both ran the handler.
func TestManagedInstancesHeldLeaseOneHolder(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	env := managedEnv(w, 2)
	var entered atomic.Int32
	second, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	handle, _ := newManagedHandler(t, nil, func(reg *lambda.Registry, env lambda.Env) error {
		h := &invoices.Handler{Table: env.Store.Table}
		return reg.Register(invoices.TypeInvoiceRequested, ddbworker.JSON(func(ctx context.Context, m *ddbworker.Message, p invoices.InvoiceRequested) (ddbworker.Result, error) {
			switch entered.Add(1) {
			case 1: // holds the lease until the test lets it go
				select {
				case <-release:
				case <-ctx.Done():
					return ddbworker.Result{}, ctx.Err()
				}
			case 2:
				close(second)
			}
			return h.Invoice(ctx, m, p)
		}))
	}, env)

	// The work's record, PROCESSING under the lease of an invocation that
	// ended (the one that parked it), and two deliveries of the copy that
	// carries the lease.
	w.seedOrder("o-held")
	e := request(t, "k-held", invoices.InvoiceRequested{OrderID: "o-held", AmountCents: 100, Currency: "EUR"})
	hash, err := envelope.RequestHash(e)
	require.NoError(t, err)
	store, err := inbox.Store{Table: w.env.Table}.WithDefaults()
	require.NoError(t, err)
	g, err := gate.New(w.env.DynamoDB, gate.Config{Store: store, Owner: "invoices/" + env["AWS_LAMBDA_LOG_STREAM_NAME"] + "/req-parked"})
	require.NoError(t, err)
	dec, err := g.Acquire(ctx, &gate.Request{Work: inbox.Work{Key: e.IdempotencyKey, MessageType: e.MessageType, RequestHash: hash,
		SchemaVersion: e.SchemaVersion, AggregateType: e.AggregateType, AggregateID: e.AggregateID, Producer: e.Producer}})
	require.NoError(t, err)
	require.Equal(t, gate.Acquired, dec.Action)
	lease, err := json.Marshal(map[string]string{"k": dec.Lease.Key, "t": dec.Lease.MessageType, "l": dec.Lease.Token})
	require.NoError(t, err)
	body, err := envelope.Encode(e)
	require.NoError(t, err)
	for range 2 {
		_, err := w.env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.env.Queues.URL), MessageBody: aws.String(string(body)),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{dlq.AttrHeldLease: {DataType: aws.String("String"), StringValue: aws.String(string(lease))}}})
		require.NoError(t, err)
	}
	evs := []events.SQSEvent{w.receive(1, time.Minute), w.receive(1, time.Minute)}

	results := make(chan events.SQSEventResponse, 2)
	for i, ev := range evs {
		go func() {
			resp, err := handle(invocationCtx(t, fmt.Sprintf("req-%d", i)), ev)
			require.NoError(t, err)
			results <- resp
		}()
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return entered.Load() >= 1 }, "one invocation runs the handler")
	select {
	case resp := <-results:
		require.Len(t, resp.BatchItemFailures, 1, "the other finds the lease held: reported, in flight elsewhere")
	case <-second:
		require.FailNow(t, "both invocations ran the handler under one held lease")
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the second invocation did not return while the first held the lease")
	}
	releaseOnce.Do(func() { close(release) })
	resp := <-results
	require.Empty(t, resp.BatchItemFailures, "the holder applies the work")
	rec := w.inboxRecord("k-held")
	require.Equal(t, inbox.StatusCompleted, rec.Status)
	require.NotEqual(t, dec.Lease.Token, rec.LeaseToken, "taken under a new token")
	require.True(t, strings.HasPrefix(rec.LeaseOwner, "invoices/"+env["AWS_LAMBDA_LOG_STREAM_NAME"]+"/req-"), rec.LeaseOwner)
	require.NotEqual(t, "invoices/"+env["AWS_LAMBDA_LOG_STREAM_NAME"]+"/req-parked", rec.LeaseOwner, "under the claiming invocation's name")
	require.Equal(t, int32(1), entered.Load(), "the handler ran once")
}
