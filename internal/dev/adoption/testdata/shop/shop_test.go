// The shop's integration test, written only with ddbworker's public
// packages: the emulators from ddbworkertest/emulators (installed on first
// use; the test skips without Java 17+ or Node.js 22 unless
// DDBWORKER_REQUIRE_EMULATORS is set), the rest through the AWS SDK and
// the service's own binary.
//
// The shop's table is two years older than the worker: its own key names,
// indexes and TTL attribute, and its items. The test adopts it with
// `shop-worker tables adopt`, runs the worker on it, and delivers what the
// producers already send: the checkout's orders through SNS (raw message
// delivery off), the payment service's EventBridge events, the
// warehouse's own JSON — each twice, plus a changed order under a key
// already applied and a shipment without its id.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
)

// The table's own TTL attribute, and the worker's lease (short, so a
// duplicate that met its original in flight comes back quickly).
const (
	attrExpiresAt = "expiresAt"
	visibility    = 3 * time.Second
)

// orders are the two orders the test places, pays and ships.
var orders = []struct{ order, customer, payment, shipment string }{
	{"o-1001", "c-0007", "p-5001", "s-9001"},
	{"o-1002", "c-0042", "p-5002", "s-9002"},
}

func TestShopWorker(t *testing.T) {
	env := emulators.ForTest(t)
	ctx := t.Context()
	ddb := env.DynamoDB()
	q := env.SQS()
	topics := sns.NewFromConfig(env.AWSConfig()) // fauxqs serves SNS on its SQS endpoint
	bin := buildService(t)
	base := append(cleanEnviron(), env.Environ()...)

	table := emulators.UniqueName("shop")
	createShopTable(t, ddb, table)
	seed := fillShopTable(t, ddb, table)
	require.Equal(t, seed, appItems(t, ddb, table))

	// Adopt it: the plan first, then for real, then again (nothing left).
	layout := []string{"--table", table, "--pk-attribute", AttrPK, "--sk-attribute", AttrSK, "--ttl-attribute", attrExpiresAt}
	var plan struct {
		DryRun  bool                            `json:"dryRun"`
		Changes []struct{ Kind, Target string } `json:"changes"`
		Kept    []struct{ Target string }       `json:"kept"`
		Blocks  []json.RawMessage               `json:"blockers"`
	}
	out := runCommand(t, bin, base, append([]string{"tables", "adopt", "--dry-run", "-o", "json"}, layout...)...)
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	require.True(t, plan.DryRun)
	require.Empty(t, plan.Blocks, out)
	require.Equal(t, []struct{ Kind, Target string }{{"create-index", "GSI1"}, {"create-index", "GSI2"}, {"record-settings", "DDBWORKER#CONFIG/INBOX"}},
		plan.Changes, out)
	var kept []string
	for _, k := range plan.Kept {
		kept = append(kept, k.Target)
	}
	require.Subset(t, kept, []string{"key", "index byCustomer", "index byEmail", "TTL", "items"}, out)
	require.ElementsMatch(t, []string{"byCustomer", "byEmail"}, activeIndexes(t, ddb, table), "a dry run changes nothing")

	out = runCommand(t, bin, base, append([]string{"tables", "adopt", "--yes"}, layout...)...) // no terminal to ask on
	require.Contains(t, out, "table "+table+" adopted: indexes GSI1 and GSI2, TTL on \""+attrExpiresAt+"\"")
	require.ElementsMatch(t, []string{"byCustomer", "byEmail", "GSI1", "GSI2"}, activeIndexes(t, ddb, table))
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.Equal(t, attrExpiresAt, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	require.Equal(t, seed, appItems(t, ddb, table), "adopting writes none of the shop's items")
	out = runCommand(t, bin, base, append([]string{"tables", "adopt"}, layout...)...)
	require.Contains(t, out, "nothing to change")

	// The layout, once, in the environment every command shares.
	base = append(base, "DDBWORKER_TABLE="+table, "DDBWORKER_PK_ATTRIBUTE="+AttrPK, "DDBWORKER_SK_ATTRIBUTE="+AttrSK,
		"DDBWORKER_TTL_ATTRIBUTE="+attrExpiresAt)
	out = runCommand(t, bin, base, "queues", "create", "--queue", emulators.UniqueName("shop-work"),
		"--visibility-timeout", visibility.String(), "--max-receive-count", "5")
	urls := map[string]string{}
	for _, line := range strings.Fields(out) {
		k, v, _ := strings.Cut(line, "=")
		urls[k] = v
	}
	queueURL, dlqURL := urls["DDBWORKER_QUEUE_URL"], urls["DDBWORKER_DLQ_URL"]
	require.NotEmpty(t, queueURL, out)
	require.NotEmpty(t, dlqURL, out)

	// The checkout's topic, the queue subscribed to it as SNS delivers by
	// default: the notification JSON, the order in its Message.
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	topic, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(emulators.UniqueName("checkout-orders"))})
	require.NoError(t, err)
	_, err = topics.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"),
		Endpoint:   aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]),
		Attributes: map[string]string{"RawMessageDelivery": "false"}})
	require.NoError(t, err)

	addr := freeAddr(t)
	svc := startService(t, bin, append(base, "DDBWORKER_QUEUE_URL="+queueURL, "DDBWORKER_DLQ_URL="+dlqURL,
		"DDBWORKER_METRICS_ADDR="+addr, "DDBWORKER_WAIT_TIME=1s", "DDBWORKER_VISIBILITY_TIMEOUT="+visibility.String()))
	svc.waitFor(t, "/readyz answers 200", 30*time.Second, func() bool { return httpStatus("http://"+addr+"/readyz") == http.StatusOK })
	queueEmpty := func(url string) func() bool {
		return func() bool {
			st, err := env.InspectQueue(ctx, url) // exact, unlike ApproximateNumberOfMessages
			require.NoError(t, err)
			return st.Total() == 0
		}
	}

	// The orders first (each published twice: a re-publish is a new SNS
	// message), then what follows them.
	publish := func(o OrderPlaced) {
		body, err := json.Marshal(struct {
			EventType string `json:"eventType"`
			OrderPlaced
		}{TypeOrderPlaced, o})
		require.NoError(t, err)
		_, err = topics.Publish(ctx, &sns.PublishInput{TopicArn: topic.TopicArn, Message: aws.String(string(body)),
			MessageAttributes: map[string]snstypes.MessageAttributeValue{"eventType": {DataType: aws.String("String"), StringValue: aws.String(TypeOrderPlaced)}}})
		require.NoError(t, err)
	}
	send := func(body string) {
		_, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
		require.NoError(t, err)
	}
	placed := func(i int) OrderPlaced {
		return OrderPlaced{OrderID: orders[i].order, CustomerID: orders[i].customer, TotalCents: int64(4599 + 1000*i), Currency: "EUR",
			PlacedAt: "2026-05-04T09:1" + strconv.Itoa(i) + ":00Z"}
	}
	for range 2 {
		for i := range orders {
			publish(placed(i))
		}
	}
	svc.waitFor(t, "the orders are consumed", 60*time.Second, queueEmpty(queueURL))
	for range 2 {
		for i, o := range orders {
			send(paymentEvent(o.payment, o.order, placed(i).TotalCents))
			send(shipmentBody(o.shipment, o.order))
		}
	}
	changed := placed(0)
	changed.TotalCents++ // other work under order:o-1001:placed
	publish(changed)
	send(shipmentBody("", orders[1].order)) // no shipmentId: no key
	svc.waitFor(t, "the payments and shipments are consumed", 60*time.Second, queueEmpty(queueURL))

	want := map[string]float64{"applied": 6, "duplicate": 6, "terminal": 2}
	var outcomes map[string]float64
	svc.waitFor(t, "ddbworker_messages_total counts every delivery", 10*time.Second, func() bool {
		outcomes = messageOutcomes(t, addr)
		return outcomes["applied"] == want["applied"] && outcomes["duplicate"] == want["duplicate"] && outcomes["terminal"] == want["terminal"]
	})
	delete(outcomes, "in_flight") // a duplicate that met its original in flight came back
	require.Equal(t, want, outcomes, "ddbworker_messages_total by outcome")

	// Each effect applied once; every other item of the shop as it was.
	items := appItems(t, ddb, table)
	for i, o := range orders {
		order := items[keyOf(OrderKey(o.order))]
		require.NotNil(t, order, o.order)
		require.Equal(t, "PLACED", order["orderStatus"], o.order)
		require.EqualValues(t, placed(i).TotalCents, order["totalCents"], "%s: the changed order was not applied", o.order)
		require.EqualValues(t, 1, order["payments"], o.order)
		require.EqualValues(t, placed(i).TotalCents, order["capturedCents"], o.order)
		require.Equal(t, "CAPTURED", order["paymentStatus"], o.order)
		require.EqualValues(t, 1, order["shipments"], o.order)
		require.Equal(t, "DISPATCHED", order["fulfilment"], o.order)
		require.NotNil(t, items[keyOf(PaymentKey(o.order, o.payment))], o.payment)
		delete(items, keyOf(OrderKey(o.order)))
		delete(items, keyOf(PaymentKey(o.order, o.payment)))
		seed[keyOf(CustomerKey(o.customer))]["ordersPlaced"] = float64(1)
	}
	require.Equal(t, seed, items, "the shop's items: only the two customers' ordersPlaced changed, by one")

	// The DLQ holds exactly the two bad messages, with their codes.
	svc.waitFor(t, "two messages in the DLQ", 10*time.Second, func() bool {
		st, err := env.InspectQueue(ctx, dlqURL)
		require.NoError(t, err)
		return st.Total() == 2
	})
	dead := map[string]sqstypes.Message{}
	svc.waitFor(t, "the DLQ's messages received", 10*time.Second, func() bool {
		rcv, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60, MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		for _, m := range rcv.Messages {
			dead[attr(m, "ddbworker.failureCode")] = m
		}
		return len(dead) >= 2
	})
	require.Len(t, dead, 2)
	mismatch, keyless := dead["IDEMPOTENCY_HASH_MISMATCH"], dead["MISSING_FIELD"]
	require.Equal(t, "order:o-1001:placed", attr(mismatch, "ddbworker.idempotencyKey"))
	var notification struct{ Type, Message string }
	require.NoError(t, json.Unmarshal([]byte(aws.ToString(mismatch.Body)), &notification))
	require.Equal(t, "Notification", notification.Type, "the DLQ keeps the notification as delivered")
	require.Contains(t, notification.Message, `"totalCents":4600`)
	require.Contains(t, attr(keyless, "ddbworker.failureMessage"), "idempotencyKey")
	require.Empty(t, attr(keyless, "ddbworker.idempotencyKey"), "a key is never defaulted")

	// The operator's view, through the adopted indexes.
	type record struct{ Key, MessageType, Status, FailureCode string }
	var doc struct{ Records, Rejections []record }
	require.NoError(t, json.Unmarshal([]byte(runCommand(t, bin, base, "inbox", "get", "order:o-1001:placed", "-o", "json")), &doc))
	require.Equal(t, []record{{"order:o-1001:placed", TypeOrderPlaced, "COMPLETED", ""}}, doc.Records)
	require.Len(t, doc.Rejections, 1)
	require.Equal(t, "IDEMPOTENCY_HASH_MISMATCH", doc.Rejections[0].FailureCode)
	for key, typ := range map[string]string{"payment:p-5001": TypePaymentCaptured, "shipment:s-9002": TypeShipmentDispatched} {
		doc.Records = nil
		require.NoError(t, json.Unmarshal([]byte(runCommand(t, bin, base, "inbox", "get", key, "-o", "json")), &doc))
		require.Equal(t, []record{{key, typ, "COMPLETED", ""}}, doc.Records)
	}
	doc.Records = nil
	require.NoError(t, json.Unmarshal([]byte(runCommand(t, bin, base, "inbox", "list", "--aggregate", "order/o-1002", "-o", "json")), &doc))
	var history []string
	for _, r := range doc.Records {
		history = append(history, r.MessageType+" "+r.Status)
	}
	require.ElementsMatch(t, []string{"OrderPlaced COMPLETED", "PaymentCaptured COMPLETED", "ShipmentDispatched COMPLETED"}, history)
	doc.Records = nil
	require.NoError(t, json.Unmarshal([]byte(runCommand(t, bin, base, "inbox", "list", "--status", "FAILED_TERMINAL", "-o", "json")), &doc))
	var codes []string
	for _, r := range doc.Records {
		codes = append(codes, r.FailureCode)
	}
	require.ElementsMatch(t, []string{"IDEMPOTENCY_HASH_MISMATCH", "MISSING_FIELD"}, codes)

	svc.stop(t)
	require.ElementsMatch(t, []string{"byCustomer", "byEmail", "GSI1", "GSI2"}, activeIndexes(t, ddb, table))
}

// createShopTable creates the table as the shop made it two years ago: key
// (pk, sk), customers by email, orders by customer, TTL on expiresAt.
func createShopTable(t *testing.T, ddb *dynamodb.Client, table string) {
	t.Helper()
	ctx := t.Context()
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(names ...string) []types.KeySchemaElement {
		ks := []types.KeySchemaElement{{AttributeName: aws.String(names[0]), KeyType: types.KeyTypeHash}}
		if len(names) > 1 {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(names[1]), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest, KeySchema: key(AttrPK, AttrSK),
		AttributeDefinitions: []types.AttributeDefinition{str(AttrPK), str(AttrSK), str("email"), str("customerId"), str("placedAt")},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String("byEmail"), KeySchema: key("email"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
			{IndexName: aws.String("byCustomer"), KeySchema: key("customerId", "placedAt"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}},
		},
	})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute))
	_, err = ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true)}})
	require.NoError(t, err)
}

// fillShopTable writes 300 items — 60 customers, 180 past orders, 60 carts
// that expire — and returns them by key, as appItems reads them.
func fillShopTable(t *testing.T, ddb *dynamodb.Client, table string) map[string]map[string]any {
	t.Helper()
	var items []map[string]any
	expires := time.Now().Add(24 * time.Hour).Unix()
	for i := range 60 {
		c := fmt.Sprintf("c-%04d", i)
		items = append(items, map[string]any{AttrPK: "CUSTOMER#" + c, AttrSK: "PROFILE", "email": c + "@example.com",
			"name": fmt.Sprintf("Customer %d", i), "tier": []string{"basic", "plus"}[i%2], "newsletter": i%3 == 0,
			"address": map[string]any{"city": "Lyon", "zip": "69002"}, "createdAt": 1_650_000_000 + i})
		for j := range 3 {
			items = append(items, map[string]any{AttrPK: fmt.Sprintf("ORDER#h-%04d", 3*i+j), AttrSK: "DETAILS", "customerId": c,
				"placedAt": time.Unix(int64(1_660_000_000+(3*i+j)*3600), 0).UTC().Format(time.RFC3339), "orderStatus": "DELIVERED",
				"totalCents": 1000 + 7*(3*i+j), "currency": "EUR",
				"lines": []any{map[string]any{"sku": "SKU-" + strconv.Itoa(j), "qty": j + 1}}})
		}
		items = append(items, map[string]any{AttrPK: fmt.Sprintf("CART#k-%04d", i), AttrSK: "CART", "customerId": c,
			attrExpiresAt: expires, "lines": []any{map[string]any{"sku": "SKU-9", "qty": 1}}})
	}
	want := map[string]map[string]any{}
	for start := 0; start < len(items); start += 25 {
		var reqs []types.WriteRequest
		for _, it := range items[start:min(start+25, len(items))] {
			av, err := attributevalue.MarshalMap(it)
			require.NoError(t, err)
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
			var back map[string]any
			require.NoError(t, attributevalue.UnmarshalMap(av, &back))
			want[keyOf(back)] = back
		}
		pending := map[string][]types.WriteRequest{table: reqs}
		for try := 0; len(pending) > 0; try++ {
			require.Less(t, try, 10, "BatchWriteItem keeps leaving items unprocessed")
			out, err := ddb.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: pending})
			require.NoError(t, err)
			pending = out.UnprocessedItems
		}
	}
	require.Len(t, want, 300)
	return want
}

// appItems scans the table (strongly consistent) for the shop's items —
// not the worker's: its inbox records and its settings item — by key.
func appItems(t *testing.T, ddb *dynamodb.Client, table string) map[string]map[string]any {
	t.Helper()
	items := map[string]map[string]any{}
	p := dynamodb.NewScanPaginator(ddb, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		require.NoError(t, err)
		for _, av := range page.Items {
			var it map[string]any
			require.NoError(t, attributevalue.UnmarshalMap(av, &it))
			if pk, _ := it[AttrPK].(string); strings.HasPrefix(pk, "IDEMP#") || strings.HasPrefix(pk, "WORKER#") ||
				strings.HasPrefix(pk, "REJECT#") || strings.HasPrefix(pk, "DDBWORKER#") {
				continue
			}
			items[keyOf(it)] = it
		}
	}
	return items
}

func keyOf[M ~map[string]any](it M) string { return fmt.Sprint(it[AttrPK], " ", it[AttrSK]) }

// activeIndexes are the table's global secondary indexes, each required
// ACTIVE.
func activeIndexes(t *testing.T, ddb *dynamodb.Client, table string) []string {
	t.Helper()
	desc, err := ddb.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	var names []string
	for _, g := range desc.Table.GlobalSecondaryIndexes {
		require.Equal(t, types.IndexStatusActive, g.IndexStatus, aws.ToString(g.IndexName))
		names = append(names, aws.ToString(g.IndexName))
	}
	return names
}

// paymentEvent is the payment service's event as an EventBridge rule's SQS
// target receives it: each put has its own id and time.
func paymentEvent(paymentID, orderID string, cents int64) string {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": emulators.UniqueName("event"), "detail-type": "Payment Captured", "source": "com.example.payments",
		"account": "111122223333", "time": time.Now().UTC().Format(time.RFC3339), "region": "eu-west-1", "resources": []string{},
		"detail": PaymentCaptured{PaymentID: paymentID, OrderID: orderID, AmountCents: cents, Currency: "EUR"},
	})
	return string(b)
}

// shipmentBody is the warehouse's own JSON, stamped with the time of the
// send.
func shipmentBody(shipmentID, orderID string) string {
	m := map[string]any{"type": "shipment.dispatched", "orderId": orderID, "carrier": "DHL",
		"trackingNumber": "JD0146" + orderID, "dispatchedAt": "2026-05-05T16:00:00Z", "sentAt": time.Now().UTC().Format(time.RFC3339Nano)}
	if shipmentID != "" {
		m["shipmentId"] = shipmentID
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// buildService builds the service into a temporary directory.
func buildService(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shop-worker")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// runCommand runs a short command of the service and returns its stdout.
func runCommand(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "shop-worker %s: %s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

// service is `shop-worker run` as a process.
type service struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error // its exit, once exited
}

func startService(t *testing.T, bin string, env []string) *service {
	t.Helper()
	s := &service{cmd: exec.Command(bin, "run"), logs: &syncBuffer{}, exited: make(chan struct{})}
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, s.logs
	require.NoError(t, s.cmd.Start())
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill() // os.ErrProcessDone once it exited
		<-s.exited
	})
	return s
}

// waitFor polls cond until it holds, failing when timeout passes or the
// service exits first.
func (s *service) waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-s.exited:
			t.Fatalf("%s: the service exited first (%v); logs:\n%s", what, s.err, s.logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; logs:\n%s", what, timeout, s.logs)
		}
	}
}

// stop sends SIGTERM and requires exit 0, and that the only errors logged
// were the terminal messages and the hash mismatch's alert.
func (s *service) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.exited:
		require.NoError(t, s.err, "SIGTERM ends the service with exit 0; logs:\n%s", s.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("the service did not stop after SIGTERM; logs:\n%s", s.logs)
	}
	require.Contains(t, s.logs.String(), `"msg":"worker stopped"`)
	for line := range strings.Lines(s.logs.String()) {
		if strings.Contains(line, `"level":"ERROR"`) && !strings.Contains(line, `"msg":"ALERT idempotency hash mismatch`) {
			require.Contains(t, line, `"result":"terminal"`, "the only errors are the two terminal messages")
		}
	}
}

// messageOutcomes sums ddbworker_messages_total by outcome (empty while
// /metrics does not answer).
func messageOutcomes(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	outcome := regexp.MustCompile(`^ddbworker_messages_total\{.*outcome="([^"]*)".*\} (\S+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := outcome.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			require.NoError(t, err, sc.Text())
			out[m[1]] += v
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// cleanEnviron is the test's environment without DDBWORKER_* and AWS_*
// variables from outside (a developer's profile, a CI's credentials).
func cleanEnviron() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DDBWORKER_") || strings.HasPrefix(kv, "AWS_")
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer collects a child process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
