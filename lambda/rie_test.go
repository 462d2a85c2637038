package lambda_test

// The adapter tested for real: a function built from a main package, run by
// the AWS Lambda Runtime Interface Emulator (bin/aws-lambda-rie, `make
// deps`), invoked over HTTP with SQS events built from messages received
// from the SQS emulator — so receipt handles and visibility changes are
// real. The test plays the event source mapping: it receives, invokes, and
// deletes what the response does not report.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// raceEnabled is set by race_test.go: the functions are built with -race
// too, and a data race in their output fails the test.
var raceEnabled bool

func TestMain(m *testing.M) { testenv.Main(m) }

// Packages the tests build into a bootstrap.
const (
	examplePkg  = "./example/invoices/lambda"
	flakyPkg    = "./lambda/testdata/flaky"
	countingPkg = "./lambda/testdata/counting"
)

// repoRoot is the module's root (the test runs in lambda/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// rieBinary is bin/aws-lambda-rie, which `make deps` installs.
func rieBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the Lambda Runtime Interface Emulator runs on Linux and macOS only")
	}
	path := filepath.Join(repoRoot(t), "bin", "aws-lambda-rie")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run make deps", path)
	}
	return path
}

// bootstrap builds pkg into t.TempDir()/bootstrap for this machine, as the
// template's build does for Lambda's (with -race when the test has it).
func bootstrap(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	args := []string{"build", "-tags", "lambda.norpc", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = repoRoot(t)
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s:\n%s", pkg, output)
	return out
}

// function is a Lambda function served by the Runtime Interface Emulator.
type function struct {
	t      *testing.T
	invURL string
	out    *testenv.Buffer // the emulator's output and the function's logs
}

// functionTimeout is the functions' timeout: each invocation's deadline.
const functionTimeout = 30 * time.Second

// startFunction serves the bootstrap of pkg with the emulator on
// 127.0.0.1. The function's environment is env on top of the emulators'
// endpoints and static credentials; nothing else of the test's.
func startFunction(t *testing.T, pkg string, env map[string]string) *function {
	t.Helper()
	ddbURL, sqsURL := testenv.Endpoints(t)
	rie := rieBinary(t)
	boot := bootstrap(t, pkg)
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_ENDPOINT_URL_DYNAMODB": ddbURL, "AWS_ENDPOINT_URL_SQS": sqsURL,
		"AWS_LAMBDA_FUNCTION_TIMEOUT": strconv.Itoa(int(functionTimeout / time.Second)), "AWS_LAMBDA_FUNCTION_NAME": "invoices",
	}
	for _, k := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v := os.Getenv(k); v != "" {
			vars[k] = v // the emulators' (testenv.Main's or the caller's)
		}
	}
	for k, v := range env {
		if v == "" {
			delete(vars, k)
		} else {
			vars[k] = v
		}
	}
	environ := []string{}
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	if raceEnabled {
		environ = append(environ, "GORACE=halt_on_error=0")
	}
	apiAddr, rieAddr := freeAddr(t), freeAddr(t)
	f := &function{t: t, invURL: "http://" + rieAddr + "/2015-03-31/functions/function/invocations", out: &testenv.Buffer{}}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", rieAddr, "--runtime-api-address", apiAddr, "--log-level", "warn", boot)
	cmd.Dir = filepath.Dir(boot)
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = f.out, f.out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// SIGTERM: the emulator stops the function (its runtime's
		// connection to the Runtime API ends with it).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if out := f.out.String(); strings.Contains(out, "DATA RACE") || t.Failed() || testing.Verbose() {
			if strings.Contains(out, "DATA RACE") {
				t.Error("the function reported a data race")
			}
			t.Logf("Runtime Interface Emulator and function output:\n%s", out)
		}
	})
	testenv.Eventually(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", rieAddr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, "the Runtime Interface Emulator did not listen on %s:\n%s", rieAddr, f.out)
	return f
}

// freeAddr is a free port on 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// post invokes the function with body and returns the status and answer.
func (f *function) post(body []byte) (int, []byte) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), functionTimeout+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.invURL, bytes.NewReader(body))
	require.NoError(f.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return resp.StatusCode, answer
}

// invoke invokes the function with ev and returns its response.
func (f *function) invoke(ev events.SQSEvent) events.SQSEventResponse {
	f.t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(f.t, err)
	status, answer := f.post(body)
	require.Equal(f.t, http.StatusOK, status, "invocation failed: %s", answer)
	var resp events.SQSEventResponse
	require.NoError(f.t, json.Unmarshal(answer, &resp), "%s", answer)
	require.NotNil(f.t, resp.BatchItemFailures, "batchItemFailures must be a list: %s", answer)
	return resp
}

// logs are the function's JSON log lines whose fields include match.
func (f *function) logs(match map[string]string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(f.out.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && fmt.Sprint(m[k]) == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// world is one test's table, queues and clients.
type world struct {
	t   *testing.T
	env *testenv.Env
	arn string // the work queue's ARN, the records' eventSourceARN
}

func newWorld(t *testing.T, queue ...worker.QueueConfig) *world {
	t.Helper()
	var opts testenv.Options
	if len(queue) > 0 {
		opts.Queue = queue[0]
	}
	env := testenv.New(t, opts)
	out, err := env.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.Queues.URL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	require.NotEmpty(t, arn)
	return &world{t: t, env: env, arn: arn}
}

// functionEnv is the ddbworker configuration of the world's function.
func (w *world) functionEnv(queueURL bool) map[string]string {
	env := map[string]string{"DDBWORKER_TABLE": w.env.Table, "DDBWORKER_DLQ_URL": w.env.Queues.DLQURL}
	if queueURL {
		env["DDBWORKER_QUEUE_URL"] = w.env.Queues.URL
	}
	return env
}

func (w *world) seedOrder(id string) {
	w.t.Helper()
	item, err := attributevalue.MarshalMap(map[string]any{"PK": "ORDER#" + id, "SK": "ORDER", invoices.AttrStatus: "OPEN"})
	require.NoError(w.t, err)
	_, err = w.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(w.env.Table), Item: item})
	require.NoError(w.t, err)
}

// request is an OrderInvoiceRequested envelope, as a producer sends it.
func request(t *testing.T, key string, p invoices.InvoiceRequested) *envelope.Envelope {
	t.Helper()
	payload, err := json.Marshal(p)
	require.NoError(t, err)
	return &envelope.Envelope{MessageID: testenv.Unique("m"), SchemaVersion: envelope.SchemaV1, MessageType: invoices.TypeInvoiceRequested,
		Producer: "orders", OccurredAt: time.Now().UTC().Truncate(time.Millisecond), IdempotencyKey: key,
		AggregateType: "Order", AggregateID: p.OrderID, Payload: payload}
}

// send sends bodies (envelopes or raw strings) and returns their message
// ids, in order.
func (w *world) send(bodies ...any) []string {
	w.t.Helper()
	return w.sendTo(w.env.Queues.URL, bodies...)
}

func (w *world) sendTo(queueURL string, bodies ...any) []string {
	w.t.Helper()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		var body string
		switch b := b.(type) {
		case *envelope.Envelope:
			raw, err := envelope.Encode(b)
			require.NoError(w.t, err)
			body = string(raw)
		case string:
			body = b
		}
		out, err := w.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
		require.NoError(w.t, err)
		ids[i] = aws.ToString(out.MessageId)
	}
	return ids
}

// receive receives n messages as the event source mapping does (every
// attribute, the given visibility) and builds the Lambda event from them.
func (w *world) receive(n int, visibility time.Duration) events.SQSEvent {
	w.t.Helper()
	return w.receiveFrom(w.env.Queues.URL, w.arn, n, visibility)
}

// receiveFrom receives n messages from the queue at queueURL, whose ARN is
// arn.
func (w *world) receiveFrom(queueURL, arn string, n int, visibility time.Duration) events.SQSEvent {
	w.t.Helper()
	var ev events.SQSEvent
	deadline := time.Now().Add(15 * time.Second)
	for len(ev.Records) < n && time.Now().Before(deadline) {
		out, err := w.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: int32(min(10, n-len(ev.Records))), WaitTimeSeconds: 1,
			VisibilityTimeout:           int32(visibility / time.Second),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"}})
		require.NoError(w.t, err)
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, record(m, arn))
		}
	}
	require.Len(w.t, ev.Records, n, "messages received")
	return ev
}

// record is a received message as Lambda hands it to the function.
func record(m sqstypes.Message, arn string) events.SQSMessage {
	rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1"}
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return rec
}

// settle does what the event source mapping does with a response: it
// deletes every record the response does not report.
func (w *world) settle(ev events.SQSEvent, resp events.SQSEventResponse) {
	w.t.Helper()
	failed := failedIDs(resp)
	for _, r := range ev.Records {
		if _, ok := failed[r.MessageId]; ok {
			continue
		}
		_, err := w.env.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(w.env.Queues.URL), ReceiptHandle: aws.String(r.ReceiptHandle)})
		require.NoError(w.t, err)
	}
}

// release makes an event's records visible again, as when their visibility
// ends (a record whose visibility already ended is visible).
func (w *world) release(ev events.SQSEvent) {
	w.t.Helper()
	for _, r := range ev.Records {
		_, err := w.env.SQS.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(w.env.Queues.URL),
			ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: 0})
		var api smithy.APIError
		if errors.As(err, &api) && strings.Contains(api.ErrorCode(), "MessageNotInflight") {
			continue
		}
		require.NoError(w.t, err)
	}
}

func failedIDs(resp events.SQSEventResponse) map[string]struct{} {
	out := map[string]struct{}{}
	for _, f := range resp.BatchItemFailures {
		out[f.ItemIdentifier] = struct{}{}
	}
	return out
}

func recordIDs(ev events.SQSEvent) map[string]struct{} {
	out := map[string]struct{}{}
	for _, r := range ev.Records {
		out[r.MessageId] = struct{}{}
	}
	return out
}

// item reads one item of the table ({} when absent).
func (w *world) item(pk, sk string) map[string]any {
	w.t.Helper()
	out, err := w.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"PK": &ddbtypes.AttributeValueMemberS{Value: pk}, "SK": &ddbtypes.AttributeValueMemberS{Value: sk}}})
	require.NoError(w.t, err)
	m := map[string]any{}
	require.NoError(w.t, attributevalue.UnmarshalMap(out.Item, &m))
	return m
}

// inboxRecord reads the inbox record of key.
func (w *world) inboxRecord(key string) *inbox.Record {
	w.t.Helper()
	store, err := inbox.Store{Table: w.env.Table}.WithDefaults()
	require.NoError(w.t, err)
	out, err := w.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
		Key: store.Key(key, invoices.TypeInvoiceRequested)})
	require.NoError(w.t, err)
	require.NotEmpty(w.t, out.Item, "no inbox record for %s", key)
	rec, err := store.Decode(out.Item)
	require.NoError(w.t, err)
	return rec
}

// dlq receives n messages from the DLQ, by their failure code.
func (w *world) dlq(n int) map[string]sqstypes.Message {
	w.t.Helper()
	out := map[string]sqstypes.Message{}
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		got, err := w.env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.env.Queues.DLQURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		require.NoError(w.t, err)
		for _, m := range got.Messages {
			out[attr(m, "ddbworker.failureCode")] = m
		}
	}
	require.Len(w.t, out, n, "DLQ copies by failure code")
	return out
}

func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// inflight is what the SQS emulator holds in flight: message id →
// visibility deadline.
func (w *world) inflight() map[string]time.Time {
	w.t.Helper()
	name := w.env.Queues.URL[strings.LastIndexByte(w.env.Queues.URL, '/')+1:]
	resp, err := http.Get(strings.TrimRight(os.Getenv("AWS_ENDPOINT_URL_SQS"), "/") + "/_fauxqs/queues/" + url.PathEscape(name))
	require.NoError(w.t, err)
	defer resp.Body.Close()
	var body struct {
		Messages struct {
			Inflight []struct {
				Message struct {
					MessageID string `json:"messageId"`
				} `json:"message"`
				VisibilityDeadline int64 `json:"visibilityDeadline"`
			} `json:"inflight"`
		} `json:"messages"`
	}
	require.NoError(w.t, json.NewDecoder(resp.Body).Decode(&body))
	out := map[string]time.Time{}
	for _, e := range body.Messages.Inflight {
		out[e.Message.MessageID] = time.UnixMilli(e.VisibilityDeadline)
	}
	return out
}
