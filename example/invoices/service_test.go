// The invoices service as a team ships it: cmd/invoice-worker built the way
// the Dockerfile builds it, then run as a process against the emulators —
// tables create, run (configured by DDBWORKER_* variables, serving /readyz
// and /metrics, stopped by SIGTERM), inbox list — and the Dockerfile checked
// as text (there is no Docker engine in the test).
//
// It imports nothing a team's module cannot: the emulators come from the
// public helper, package ddbworkertest/emulators, which installs them on
// first use and skips the test (unless DDBWORKER_REQUIRE_EMULATORS is set)
// when Java 17+ or Node.js 22 is missing. Copy it as it is.
package invoices_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/ddbworkertest"
	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/worker"
)

// The image's main package, and where the service's files are.
const (
	mainPackage = "./example/invoices/cmd/invoice-worker"
	dockerfile  = "example/invoices/Dockerfile"
	testVersion = "v0.0.0-servicetest"
)

// TestServiceBinary: the team's binary applies each order's invoice once
// under a duplicate delivery, dead-letters the missing order and the invalid
// payload with their codes, shows both in `inbox list`, and stops with exit
// 0 on SIGTERM.
// The attributes ddbworker puts on each copy it writes to the DLQ
// (docs/design.md lists them all).
const (
	attrIdempotencyKey = "ddbworker.idempotencyKey"
	attrFailureCode    = "ddbworker.failureCode"
)

func TestServiceBinary(t *testing.T) {
	emu := emulators.ForTest(t) // DynamoDB Local and SQS on 127.0.0.1, stopped when the test ends
	root := repoRoot(t)
	bin := buildService(t, root, testVersion)
	queues := ddbworkertest.NewQueues(t, emu.SQS(), workerQueue()) // the work queue and its DLQ, deleted when the test ends
	ddb, q := emu.DynamoDB(), emu.SQS()
	table := emulators.UniqueName("invoices") // created by the binary itself
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	// The service sees the emulators through the environment alone:
	// endpoints, credentials, region.
	base := append(append(cleanEnviron(), emu.Environ()...), "DDBWORKER_TABLE="+table)

	out := runCommand(t, bin, base, "--version")
	require.Equal(t, "invoice-worker version "+testVersion+"\n", out, "the version the Dockerfile's -ldflags stamp")
	out = runCommand(t, bin, base, "tables", "create")
	require.Contains(t, out, "table "+table+" is ACTIVE")

	ctx := context.Background()
	for _, id := range []string{"o-1", "o-2"} {
		item, err := attributevalue.MarshalMap(map[string]any{invoices.AttrPK: invoices.OrderKey(id)[invoices.AttrPK],
			invoices.AttrSK: invoices.OrderKey(id)[invoices.AttrSK], invoices.AttrStatus: "PLACED"})
		require.NoError(t, err)
		_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err)
	}
	first := invoiceRequest(t, "o-1", invoices.InvoiceRequested{OrderID: "o-1", AmountCents: 1250, Currency: "EUR"})
	resend := *first // the producer re-sends the same work: a new message id, the same key and payload
	resend.MessageID = "m-resend-o-1"
	for _, e := range []*envelope.Envelope{
		first,
		invoiceRequest(t, "o-2", invoices.InvoiceRequested{OrderID: "o-2", AmountCents: 990, Currency: "USD"}),
		&resend,
		invoiceRequest(t, "o-404", invoices.InvoiceRequested{OrderID: "o-404", AmountCents: 500, Currency: "EUR"}),
		invoiceRequest(t, "o-bad", invoices.InvoiceRequested{OrderID: "o-2", AmountCents: 0, Currency: "EUR"}),
	} {
		body, err := envelope.Encode(e)
		require.NoError(t, err)
		_, err = q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queues.URL), MessageBody: aws.String(string(body))})
		require.NoError(t, err)
	}

	addr := freeAddr(t)
	cmd := exec.Command(bin, "run")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	cmd.Env = append(base, "DDBWORKER_QUEUE_URL="+queues.URL, "DDBWORKER_DLQ_URL="+queues.DLQURL,
		"DDBWORKER_METRICS_ADDR="+addr, "DDBWORKER_WAIT_TIME=1s", "DDBWORKER_VISIBILITY_TIMEOUT="+workerQueue().VisibilityTimeout.String(),
		"DDBWORKER_LOG_LEVEL=info")
	require.NoError(t, cmd.Start())
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // os.ErrProcessDone once it exited
		<-exited
	})
	// waitFor polls cond until it holds, failing if the deadline passes or
	// the service exits first.
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			select {
			case <-exited:
				t.Fatalf("%s: the service exited first (%v); logs:\n%s", what, runErr, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; logs:\n%s", what, timeout, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("/readyz answers 200", 30*time.Second, func() bool { return httpStatus("http://"+addr+"/readyz") == http.StatusOK })
	queueTotal := func(url string) int {
		st, err := emu.InspectQueue(ctx, url) // exact, unlike ApproximateNumberOfMessages
		require.NoError(t, err)
		return st.Total()
	}
	waitFor("the queue is empty", 60*time.Second, func() bool { return queueTotal(queues.URL) == 0 })
	want := map[string]float64{"applied": 2, "duplicate": 1, "terminal": 2}
	var outcomes map[string]float64
	waitFor("ddbworker_messages_total counts every delivery", 10*time.Second, func() bool {
		outcomes = messageOutcomes(t, addr)
		return outcomes["applied"] == want["applied"] && outcomes["duplicate"] == want["duplicate"] && outcomes["terminal"] == want["terminal"]
	})
	require.LessOrEqual(t, outcomes["in_flight"], 1.0, "ddbworker_messages_total: the duplicate may have met its original in flight, once")
	delete(outcomes, "in_flight")
	require.Equal(t, want, outcomes, "ddbworker_messages_total by outcome")
	require.Regexp(t, `(?m)^ddbworker_build_info\{[^}]*service="invoice-worker"[^}]*version="`+regexp.QuoteMeta(testVersion)+`"[^}]*\} 1$`,
		metricsText(t, addr), "ddbworker_build_info carries the stamped version")

	// Each order invoiced once: one invoice item, and the order points at it.
	for _, id := range []string{"o-1", "o-2"} {
		items := orderItems(t, ddb, table, id)
		require.Len(t, items, 2, "order %s: the order and exactly one invoice", id)
		order, invoice := items["ORDER"], items["INVOICE"]
		require.NotNil(t, invoice, "order %s has no invoice", id)
		require.Equal(t, invoices.StatusInvoiced, order[invoices.AttrStatus], "order %s", id)
		require.Equal(t, "INV-invoice:"+id, invoice[invoices.AttrInvoiceNumber], "order %s", id)
		require.Equal(t, invoice[invoices.AttrInvoiceNumber], order[invoices.AttrInvoiceNumber], "order %s points at its invoice", id)
	}
	require.Empty(t, orderItems(t, ddb, table, "o-404"), "the missing order's transaction wrote nothing")

	// The two terminal messages are in the DLQ with their codes.
	waitFor("two messages in the DLQ", 10*time.Second, func() bool { return queueTotal(queues.DLQURL) == 2 })
	dead := map[string]string{}
	waitFor("the DLQ's messages received", 10*time.Second, func() bool {
		rcv, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queues.DLQURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60, MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		for _, m := range rcv.Messages {
			dead[aws.ToString(m.MessageAttributes[attrIdempotencyKey].StringValue)] = aws.ToString(m.MessageAttributes[attrFailureCode].StringValue)
		}
		return len(dead) >= 2
	})
	require.Equal(t, map[string]string{"invoice:o-404": invoices.CodeOrderNotFound, "invoice:o-bad": failure.CodeInvalidPayload}, dead,
		"DLQ: idempotency key → %s", attrFailureCode)

	// The operator's view: both are FAILED_TERMINAL records.
	var listing struct {
		Records []struct{ Key, Status, FailureCode string } `json:"records"`
	}
	got := map[string]string{}
	waitFor("`inbox list --status FAILED_TERMINAL` shows both", 10*time.Second, func() bool {
		out := runCommand(t, bin, base, "inbox", "list", "--status", "FAILED_TERMINAL", "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(out), &listing), out)
		clear(got)
		for _, r := range listing.Records {
			require.Equal(t, "FAILED_TERMINAL", r.Status)
			got[r.Key] = r.FailureCode
		}
		return len(got) == 2
	})
	require.Equal(t, dead, got, "inbox list: key → failure code")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		require.NoError(t, runErr, "SIGTERM ends the service with exit 0; logs:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the service did not stop after SIGTERM; logs:\n%s", logs.String())
	}
	require.Contains(t, logs.String(), `"msg":"worker stopped"`)
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			require.Contains(t, line, `"result":"terminal"`, "the only errors are the two terminal messages")
		}
	}
}

// TestServiceDockerfile checks example/invoices/Dockerfile as text: it
// builds the service's main statically and trimmed, stamps the version,
// and runs it on distroless as nonroot with metrics reachable from outside
// the container and the OCI labels.
func TestServiceDockerfile(t *testing.T) {
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, dockerfile))
	require.GreaterOrEqual(t, len(df.stages), 2, "build and run in separate stages")
	final := df.stages[len(df.stages)-1]
	build := df.stage(final.copyFrom("/invoice-worker"))
	require.NotNil(t, build, "the final stage copies /invoice-worker from no stage")
	goBuild := build.run("go build")
	require.NotEmpty(t, goBuild, "stage %s runs no go build", build.name)

	t.Run("builder is golang:<go.mod's minor>-bookworm", func(t *testing.T) {
		goMinor := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, filepath.Join(root, "go.mod")))
		require.NotNil(t, goMinor)
		require.Regexp(t, `^golang:`+regexp.QuoteMeta(goMinor[1])+`(\.\d+)?-bookworm$`, build.from)
	})
	t.Run("modules in their own layer, before the sources", func(t *testing.T) {
		mods := build.index("COPY", "go.mod go.sum")
		dl := build.index("RUN", "go mod download")
		src := build.index("COPY", ". .")
		require.True(t, mods >= 0 && dl > mods && src > dl, "COPY go.mod go.sum, RUN go mod download, then COPY . . (at %d, %d, %d)", mods, dl, src)
	})
	t.Run("static, trimmed build of the service's main", func(t *testing.T) {
		cmdline := df.expand(build, goBuild, nil)
		require.Subset(t, words(cmdline), []string{"CGO_ENABLED=0", "go", "build", "-trimpath", "-o", "/out/invoice-worker", mainPackage}, cmdline)
		require.NotContains(t, cmdline, "-tags", "a team's image carries no build tags")
		ld := ldflags(t, df.expand(build, goBuild, map[string]string{"VERSION": testVersion}))
		require.Subset(t, strings.Fields(ld), []string{"-s", "-w", "-X", "main.version=" + testVersion})
	})
	t.Run("distroless static, nonroot", func(t *testing.T) {
		require.Regexp(t, `^gcr\.io/distroless/static(-debian\d+)?:nonroot$`, final.from)
		require.Contains(t, []string{"nonroot", "nonroot:nonroot", "65532", "65532:65532"}, final.last("USER"))
		require.Empty(t, final.last("RUN"), "distroless has no shell to RUN with")
	})
	t.Run("entrypoint, command, metrics", func(t *testing.T) {
		require.Equal(t, []string{"/invoice-worker"}, final.execForm(t, "ENTRYPOINT"))
		require.Equal(t, []string{"run"}, final.execForm(t, "CMD"))
		require.Equal(t, "0.0.0.0:9090", final.env()["DDBWORKER_METRICS_ADDR"], "ENV DDBWORKER_METRICS_ADDR: the daemon's 127.0.0.1 default is unreachable from outside the container")
		require.Contains(t, final.exposed(), "9090")
	})
	t.Run("OCI labels", func(t *testing.T) {
		labels := final.labels(t)
		require.Equal(t, "invoice-worker", labels["org.opencontainers.image.title"])
		require.NotEmpty(t, labels["org.opencontainers.image.description"])
		for label, arg := range map[string]string{"source": "SOURCE", "version": "VERSION", "revision": "REVISION", "licenses": "LICENSES"} {
			k := "org.opencontainers.image." + label
			require.Equalf(t, "${"+arg+"}", labels[k], "LABEL %s comes from the build argument %s", k, arg)
			require.Truef(t, final.declares(arg), "the final stage must declare ARG %s for LABEL %s", arg, k)
		}
	})
}

// workerQueue: a short lease, so a duplicate hidden behind its original's
// lease comes back quickly.
func workerQueue() worker.QueueConfig { return worker.QueueConfig{VisibilityTimeout: 3 * time.Second} }

func invoiceRequest(t *testing.T, key string, p invoices.InvoiceRequested) *envelope.Envelope {
	t.Helper()
	payload, err := json.Marshal(p)
	require.NoError(t, err)
	return &envelope.Envelope{
		MessageID: "m-" + key, SchemaVersion: 1, MessageType: invoices.TypeInvoiceRequested, Producer: "orders",
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond), IdempotencyKey: "invoice:" + key,
		AggregateType: "ORDER", AggregateID: p.OrderID, Payload: payload,
	}
}

// orderItems are the items under an order's partition, by sort key.
func orderItems(t *testing.T, ddb *dynamodb.Client, table, orderID string) map[string]map[string]any {
	t.Helper()
	out, err := ddb.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": invoices.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: invoices.OrderKey(orderID)[invoices.AttrPK].(string)}}})
	require.NoError(t, err)
	items := map[string]map[string]any{}
	for _, raw := range out.Items {
		var item map[string]any
		require.NoError(t, attributevalue.UnmarshalMap(raw, &item))
		items[item[invoices.AttrSK].(string)] = item
	}
	return items
}

// messageOutcomes sums ddbworker_messages_total by outcome (nil while
// /metrics does not answer).
func messageOutcomes(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	outcome := regexp.MustCompile(`outcome="([^"]*)"`)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "ddbworker_messages_total{") {
			continue
		}
		m := outcome.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err, line)
		out[m[1]] += v
	}
	require.NoError(t, sc.Err())
	return out
}

func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// buildService builds the service's main with the Dockerfile's own go
// build flags (VERSION set to version) into a temporary directory.
func buildService(t *testing.T, root, version string) string {
	t.Helper()
	df := parseDockerfile(t, filepath.Join(root, dockerfile))
	final := df.stages[len(df.stages)-1]
	build := df.stage(final.copyFrom("/invoice-worker"))
	require.NotNil(t, build, "%s: the final stage copies /invoice-worker from no stage", dockerfile)
	ld := ldflags(t, df.expand(build, build.run("go build"), map[string]string{"VERSION": version}))
	bin := filepath.Join(t.TempDir(), "invoice-worker")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ld, "-o", bin, mainPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// runCommand runs a short command of the service and returns its stdout.
func runCommand(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "invoice-worker %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// cleanEnviron is the test's environment without DDBWORKER_* and AWS_*
// variables from outside (a developer's profile, a CI's credentials).
func cleanEnviron() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DDBWORKER_") || strings.HasPrefix(kv, "AWS_")
	})
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "repository root not found from example/invoices")
	return root
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
