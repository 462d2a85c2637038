package lambda_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/lambda"
	"github.com/ddbworker/ddbworker/worker"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func registerInvoices(reg *lambda.Registry, env lambda.Env) error {
	return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
}

// Configuration problems are one error, on one line, that names each
// variable at fault; they surface at init, before any record.
func TestNewConfigurationErrors(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	base := map[string]string{"DDBWORKER_TABLE": "orders", "DDBWORKER_DLQ_URL": "https://sqs.us-east-1.amazonaws.com/1/orders-dlq"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"nothing set", map[string]string{"DDBWORKER_TABLE": "", "DDBWORKER_DLQ_URL": ""},
			[]string{"DDBWORKER_TABLE is required", "DDBWORKER_DLQ_URL is required with DDBWORKER_TERMINAL_POLICY=dlq"}},
		{"not numbers", map[string]string{"DDBWORKER_CONCURRENCY": "lots", "DDBWORKER_MAX_WCU": "-1", "DDBWORKER_INDEX_PROCESSING": "maybe"},
			[]string{`DDBWORKER_CONCURRENCY="lots": not an integer`, `DDBWORKER_MAX_WCU="-1": must be at least 0`, `DDBWORKER_INDEX_PROCESSING="maybe": not a boolean`}},
		{"out of range", map[string]string{"DDBWORKER_CONCURRENCY": "0", "DDBWORKER_MAX_ATTEMPTS": "101", "DDBWORKER_ATTENTION_SHARDS": "0"},
			[]string{`DDBWORKER_CONCURRENCY="0": must be within 1..10000`, `DDBWORKER_MAX_ATTEMPTS="101": must be within 1..100`, `DDBWORKER_ATTENTION_SHARDS="0": must be within 1..100`}},
		{"durations", map[string]string{"DDBWORKER_CALL_TIMEOUT": "40s", "DDBWORKER_COMPLETED_TTL": "24h", "DDBWORKER_HEALTH_WINDOW": "soon"},
			[]string{`DDBWORKER_CALL_TIMEOUT="40s": must be at least 100ms and less than 30s`, `DDBWORKER_COMPLETED_TTL="24h": must be at least 672h0m0s`, `DDBWORKER_HEALTH_WINDOW="soon": not a duration`}},
		{"policy and URLs", map[string]string{"DDBWORKER_TERMINAL_POLICY": "drop", "DDBWORKER_QUEUE_URL": "orders", "DDBWORKER_LOG_LEVEL": "loud"},
			[]string{`DDBWORKER_TERMINAL_POLICY="drop": must be dlq, quarantine or redrive`, `DDBWORKER_QUEUE_URL="orders": not a queue URL`, `DDBWORKER_LOG_LEVEL="loud"`}},
		{"payload limit", map[string]string{"DDBWORKER_PAYLOAD_MAX_BYTES": "0"},
			[]string{`DDBWORKER_PAYLOAD_MAX_BYTES="0": must be within 1..`}},
		{"layout", map[string]string{"DDBWORKER_PK_ATTRIBUTE": "SK"},
			[]string{`the inbox store (DDBWORKER_TABLE, DDBWORKER_*_ATTRIBUTE`, `names attribute "SK" twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := lambda.New(context.Background(), registerInvoices, lookup(env))
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n", "one line")
			require.True(t, strings.HasPrefix(err.Error(), "lambda: invalid environment: "), err.Error())
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}

	_, err := lambda.New(context.Background(), func(*lambda.Registry, lambda.Env) error { return errors.New("no table for invoices") }, lookup(base))
	require.ErrorContains(t, err, "lambda: registering the handlers: no table for invoices")
	_, err = lambda.New(context.Background(), func(*lambda.Registry, lambda.Env) error { return nil }, lookup(base))
	require.ErrorContains(t, err, "must register at least one message type")
	env := testenv.New(t, testenv.Options{NoQueue: true})
	h, err := lambda.New(context.Background(), registerInvoices, lookup(map[string]string{"DDBWORKER_TABLE": env.Table, "DDBWORKER_TERMINAL_POLICY": "quarantine", "DDBWORKER_CLOCK_SKEW": "0"}))
	require.NoError(t, err, "quarantine needs no DLQ; a clock skew of 0 is none")
	require.NotNil(t, h)
}

// At cold start the adapter takes the inbox settings the table records
// (its workers and the operator commands share them), refuses a variable
// that says otherwise, records its own in a table that records none, and
// fails the init on a table that is missing or does not fit — before any
// record is touched.
func TestNewChecksTheTable(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	const failedTTL = 50 * 24 * time.Hour // not the default
	require.NotEqual(t, inbox.DefaultFailedTTL, failedTTL)
	recorded := inbox.Store{Table: w.env.Table, AttentionShards: 8, TTL: inbox.TTL{Completed: 40 * 24 * time.Hour, Failed: failedTTL}}
	recorded, err := recorded.WithDefaults()
	require.NoError(t, err)
	require.NoError(t, inbox.RecordSettings(ctx, w.env.DynamoDB, recorded, "ops"))

	handle, err := lambda.New(ctx, registerInvoices, lookup(w.functionEnv(true)))
	require.NoError(t, err)
	// The worker writes with the recorded shards and TTLs: a failed record
	// lands in one of 8 attention partitions (a key whose shard of 8
	// differs from its shard of the default 16: "k-shard" is 7 of either,
	// and could not tell them apart) and lives for the recorded failedTTL.
	const key = "k-shard-1"
	require.NotEqual(t, inbox.Shard(key, 8), inbox.Shard(key, inbox.DefaultAttentionShards), "a key whose shard tells the recorded count from the default")
	w.send(request(t, key, invoices.InvoiceRequested{OrderID: "o-none", AmountCents: 1, Currency: "EUR"}))
	ev := w.receive(1, time.Minute)
	before := time.Now()
	_, err = handle(ctx, ev)
	require.NoError(t, err)
	after := time.Now()
	rec := w.inboxRecord(key)
	require.Equal(t, inbox.StatusFailedTerminal, rec.Status)
	require.Equal(t, inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(key, 8)), rec.GSI2PK, "the recorded attention shards")
	require.GreaterOrEqual(t, rec.TTL, before.Add(failedTTL).Unix(), "the recorded failedTtlSeconds")
	require.LessOrEqual(t, rec.TTL, after.Add(failedTTL).Unix()+1, "the recorded failedTtlSeconds")

	env := w.functionEnv(true)
	env["DDBWORKER_ATTENTION_SHARDS"] = "4"
	env["DDBWORKER_COMPLETED_TTL"] = "960h"
	_, err = lambda.New(ctx, registerInvoices, lookup(env))
	require.ErrorContains(t, err, "DDBWORKER_ATTENTION_SHARDS is 4 but table "+w.env.Table+" records 8")
	require.NotContains(t, err.Error(), "DDBWORKER_COMPLETED_TTL", "given as recorded: no conflict")
}

func TestNewChecksTheTableErrors(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	env := w.functionEnv(true)
	env["DDBWORKER_TABLE"] = testenv.Unique("missing")
	_, err := lambda.New(ctx, registerInvoices, lookup(env))
	require.Error(t, err)
	require.Contains(t, err.Error(), env["DDBWORKER_TABLE"])

	// A table that records nothing gets the function's settings.
	bare := testenv.New(t, testenv.Options{NoQueue: true})
	env = w.functionEnv(true)
	env["DDBWORKER_TABLE"], env["DDBWORKER_ATTENTION_SHARDS"] = bare.Table, "12"
	_, err = lambda.New(ctx, registerInvoices, lookup(env))
	require.NoError(t, err)
	rec, ok, err := inbox.ReadRecorded(ctx, bare.DynamoDB, inbox.Store{Table: bare.Table})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 12, rec.Store.AttentionShards)

	// A table without the layout's indexes does not fit.
	other := testenv.Unique("t")
	_, err = bare.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(other), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: ddbtypes.KeyTypeRange}}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = bare.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	})
	env["DDBWORKER_TABLE"] = other
	_, err = lambda.New(ctx, registerInvoices, lookup(env))
	require.ErrorContains(t, err, "DDBWORKER_TABLE")
	require.ErrorContains(t, err, "GSI1")
}

// A FIFO queue whose redrive policy would dead-letter healthy messages in
// a short outage is named at cold start; a standard queue's never is, however
// small its maxReceiveCount: its records are re-sent on their last receive.
func TestNewWarnsOnAShortOutageCover(t *testing.T) {
	const warning = "the FIFO queue's redrive policy dead-letters healthy messages in a DynamoDB outage shorter than 6h0m0s"
	for _, tc := range []struct {
		name  string
		queue worker.QueueConfig
		warn  bool
	}{
		{"fifo", worker.QueueConfig{Name: testenv.Unique("q") + ".fifo", FIFO: true, MaxReceiveCount: 3}, true},
		{"standard", worker.QueueConfig{MaxReceiveCount: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.queue)
			env := w.functionEnv(true)
			env["DDBWORKER_PARK_MAX_VISIBILITY"] = "1m"
			logs := captureStdout(t, func() {
				_, err := lambda.New(context.Background(), registerInvoices, lookup(env))
				require.NoError(t, err)
			})
			if !tc.warn {
				require.NotContains(t, logs, "dead-letters healthy messages")
				return
			}
			require.Contains(t, logs, warning)
			require.Contains(t, logs, `"maxReceiveCount":3`)
			require.Contains(t, logs, `"outageCover":"2m0s"`, "1m, then 1m (DDBWORKER_PARK_MAX_VISIBILITY): the third receive must find the database healthy")
		})
	}
}

// One worker per queue: with DDBWORKER_QUEUE_URL set, its queue's records
// go to the worker built at init, another queue's to a worker built from
// their eventSourceARN; without it, a record whose queue is unknown is
// reported, untouched.
func TestHandlerRoutesRecordsByQueue(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	other, err := worker.CreateQueues(ctx, w.env.SQS, worker.QueueConfig{Name: testenv.Unique("q")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{other.URL, other.DLQURL} {
			_, _ = w.env.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	otherARN := strings.Replace(w.arn, queueName(w.env.Queues.URL), queueName(other.URL), 1)

	handle, err := lambda.New(ctx, registerInvoices, lookup(w.functionEnv(true)))
	require.NoError(t, err)
	w.seedOrder("o-a")
	w.seedOrder("o-b")
	w.send(request(t, "k-a", invoices.InvoiceRequested{OrderID: "o-a", AmountCents: 1, Currency: "EUR"}))
	w.sendTo(other.URL, request(t, "k-b", invoices.InvoiceRequested{OrderID: "o-b", AmountCents: 1, Currency: "EUR"}))
	ev := w.receive(1, time.Minute)
	ev.Records = append(ev.Records, w.receiveFrom(other.URL, otherARN, 1, time.Minute).Records...)
	resp, err := handle(ctx, ev)
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	for _, o := range []string{"o-a", "o-b"} {
		require.Equal(t, invoices.StatusInvoiced, w.item("ORDER#"+o, "ORDER")[invoices.AttrStatus], o)
	}

	env := w.functionEnv(false)
	handle, err = lambda.New(ctx, registerInvoices, lookup(env))
	require.NoError(t, err)
	resp, err = handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-unknown", ReceiptHandle: "h", Body: "{}", EventSourceARN: "arn:aws:sns:us-east-1:1:t"}}})
	require.NoError(t, err)
	require.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: "m-unknown"}}, resp.BatchItemFailures)
	resp, err = handle(ctx, events.SQSEvent{})
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures, "an empty list, never null")
	require.Empty(t, resp.BatchItemFailures)
}

func queueName(queueURL string) string { return queueURL[strings.LastIndexByte(queueURL, '/')+1:] }

// captureStdout runs f and returns what it wrote to standard output (the
// adapter logs there, as Lambda expects).
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, wr, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = wr
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = stdout }()
	f()
	require.NoError(t, wr.Close())
	return <-done
}
