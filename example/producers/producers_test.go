// Package producers_test runs the producer examples of docs/producers.md —
// TypeScript, Python and Go — against the emulators: each sends one
// message, which must be a valid envelope (to the worker's decoder and to
// the JSON Schema) with the request hash of the work it describes. (The Java example is shown, not run.)
package producers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// missing skips the test with one line saying what to install, or fails it
// when DDBWORKER_REQUIRE_EMULATORS asks for every test to run.
func missing(t *testing.T, what string) {
	t.Helper()
	if v := os.Getenv(testenv.RequireEnv); v != "" && v != "0" && v != "false" {
		t.Fatalf("%s (%s is set, so it cannot be skipped)", what, testenv.RequireEnv)
	}
	t.Skip("skipped: " + what)
}

// example is one producer example and how to run it.
type example struct {
	name     string
	producer string
	command  func(t *testing.T) *exec.Cmd
}

var examples = []example{
	{"typescript", "billing-api-ts", func(t *testing.T) *exec.Cmd {
		rt, err := emulators.Resolve(context.Background(), emulators.Config{})
		if err != nil {
			missing(t, "typescript example: no Node.js (make deps): "+err.Error())
		}
		if !typeStripping(rt.Node.Version) {
			missing(t, "typescript example: Node.js "+rt.Node.Version+" cannot run .ts files (22.18 or later can)")
		}
		if _, err := os.Stat("typescript/node_modules/@aws-sdk/client-sqs"); err != nil {
			missing(t, "typescript example: its npm packages are not installed (make deps)")
		}
		cmd := exec.Command(rt.Node.Path, "--no-warnings", "send.ts")
		cmd.Dir = "typescript"
		return cmd
	}},
	{"python", "billing-api-py", func(t *testing.T) *exec.Cmd {
		cmd := exec.Command(testenv.Python(t), "send.py")
		cmd.Dir = "python"
		return cmd
	}},
	{"go", "billing-api-go", func(t *testing.T) *exec.Cmd {
		gobin, err := exec.LookPath("go")
		if err != nil {
			missing(t, "go example: no go in PATH")
		}
		bin := filepath.Join(t.TempDir(), "producer")
		out, err := exec.Command(gobin, "build", "-o", bin, "./go").CombinedOutput()
		require.NoError(t, err, "%s", out)
		return exec.Command(bin)
	}},
}

// typeStripping reports whether Node.js version v (as "v22.23.3") runs
// TypeScript files without flags: 22.18 and later.
func typeStripping(v string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(v, "v%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 22 || major == 22 && minor >= 18
}

// work is what every example sends for an order: the request hash the
// worker computes for it.
func expectedHash(t *testing.T, orderID string, version, cents int64) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"orderId": orderID, "amountCents": cents, "currency": "EUR"})
	require.NoError(t, err)
	h, err := envelope.RequestHash(&envelope.Envelope{SchemaVersion: envelope.SchemaV1, MessageType: "invoice.requested",
		AggregateType: "order", AggregateID: orderID, AggregateVersion: &version, Payload: payload})
	require.NoError(t, err)
	return h
}

func run(t *testing.T, ex example, queueURL, orderID string, version, cents int64) {
	t.Helper()
	cmd := ex.command(t)
	cfg := testenv.AWSConfig(t)
	creds, err := cfg.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	_, sqsEndpoint := testenv.Endpoints(t)
	cmd.Env = append(os.Environ(),
		"QUEUE_URL="+queueURL, "AWS_ENDPOINT_URL_SQS="+sqsEndpoint, "AWS_REGION="+cfg.Region, "AWS_DEFAULT_REGION="+cfg.Region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"ORDER_ID="+orderID, "ORDER_VERSION="+strconv.FormatInt(version, 10), "AMOUNT_CENTS="+strconv.FormatInt(cents, 10),
		"CORRELATION_ID=corr-"+orderID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "%s example: %s", ex.name, stderr.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		t.Fatalf("%s example did not finish: %s", ex.name, stderr.String())
	}
}

func receive(t *testing.T, env *testenv.Env, queueURL string, n int) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		require.NoError(t, err)
		got = append(got, out.Messages...)
	}
	require.Len(t, got, n)
	return got
}

// schema compiles the envelope's JSON Schema with format assertions.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(envelope.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("envelope.schema.json", doc))
	s, err := c.Compile("envelope.schema.json")
	require.NoError(t, err)
	return s
}

func requireSchemaValid(t *testing.T, s *jsonschema.Schema, body string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst), "the schema rejects %s", body)
}

func TestExamples(t *testing.T) {
	dec, err := envelope.NewDecoder(envelope.Config{})
	require.NoError(t, err)
	sch := schema(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			std := testenv.New(t, testenv.Options{})
			fifo := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{FIFO: true}})

			// Sent twice (a re-send of the same work) to a standard queue.
			run(t, ex, std.Queues.URL, "42", 7, 1999)
			run(t, ex, std.Queues.URL, "42", 7, 1999)
			want := expectedHash(t, "42", 7, 1999)
			ids := map[string]bool{}
			for _, m := range receive(t, std, std.Queues.URL, 2) {
				e, err := dec.Decode([]byte(aws.ToString(m.Body)))
				require.NoError(t, err, "%s sent an envelope the worker rejects: %s", ex.name, aws.ToString(m.Body))
				requireSchemaValid(t, sch, aws.ToString(m.Body))
				require.Equal(t, want, e.RequestHash, "%s: %s", ex.name, aws.ToString(m.Body))
				require.Equal(t, "order-42:invoice", e.IdempotencyKey)
				require.Equal(t, ex.producer, e.Producer)
				require.Equal(t, "corr-42", e.CorrelationID)
				require.WithinDuration(t, time.Now(), e.OccurredAt, time.Minute)
				require.False(t, ids[e.MessageID], "a re-send needs a new messageId")
				ids[e.MessageID] = true
			}

			// FIFO: the aggregate is the message group.
			run(t, ex, fifo.Queues.URL, "43", 1, 500)
			m := receive(t, fifo, fifo.Queues.URL, 1)[0]
			e, err := dec.Decode([]byte(aws.ToString(m.Body)))
			require.NoError(t, err)
			require.Equal(t, expectedHash(t, "43", 1, 500), e.RequestHash)
			require.Equal(t, "43", m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)])
			require.NotEmpty(t, m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)])
		})
	}
}
