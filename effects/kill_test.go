package effects_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/payments"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// The kill -9 tests: a real worker process (internal/dev/chargeworker,
// a daemon.Main service whose handler charges through the effect log) is
// SIGKILLed by its own failpoint at each line that matters, then restarted;
// the provider double counts every call per key.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// chargeworker builds the crash-test service once (with the development
// extension: it has --failpoint-kill).
func chargeworker(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chargeworker")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "chargeworker")
		cmd := exec.Command("go", "build", "-o", binPath, "../internal/dev/chargeworker")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// service is one test's table, queues, provider and the worker's
// environment.
type service struct {
	t    *testing.T
	bin  string
	env  *testenv.Env
	prov *payments.Provider
	vars []string
}

func newService(t *testing.T) *service {
	if testing.Short() {
		t.Skip("kill -9 tests build and run a worker process: not in -short")
	}
	env := testenv.New(t, testenv.Options{Queue: worker.QueueConfig{VisibilityTimeout: 3 * time.Second}})
	bin := chargeworker(t)
	prov := payments.New()
	t.Cleanup(prov.Close)
	var vars []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DDBWORKER_") {
			vars = append(vars, kv)
		}
	}
	vars = append(vars, "DDBWORKER_TABLE="+env.Table, "DDBWORKER_QUEUE_URL="+env.Queues.URL, "DDBWORKER_DLQ_URL="+env.Queues.DLQURL,
		"DDBWORKER_PROVIDER_URL="+prov.URL(), "DDBWORKER_VISIBILITY_TIMEOUT=3s", "DDBWORKER_WAIT_TIME=1s",
		"DDBWORKER_METRICS_ADDR=", "DDBWORKER_DEPTH_INTERVAL=0s", "DDBWORKER_LOG_LEVEL=info")
	return &service{t: t, bin: bin, env: env, prov: prov, vars: vars}
}

// send sends the work item (msgType, order) to the queue.
func (s *service) send(msgType, order string) string {
	s.t.Helper()
	payload, err := json.Marshal(map[string]any{"orderId": order, "cents": 1250})
	require.NoError(s.t, err)
	key := order + ":payment"
	body, err := envelope.Encode(&envelope.Envelope{MessageID: "m-" + order, SchemaVersion: 1, MessageType: msgType, Producer: "orders",
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond), IdempotencyKey: key, AggregateType: "Order", AggregateID: order, Payload: payload})
	require.NoError(s.t, err)
	_, err = s.env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.env.Queues.URL), MessageBody: aws.String(string(body))})
	require.NoError(s.t, err)
	return key
}

// proc is a running worker process.
type proc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func (s *service) start(args ...string) *proc {
	s.t.Helper()
	p := &proc{out: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(s.bin, append([]string{"run"}, args...)...)
	p.cmd.Env = s.vars
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(s.t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	s.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// killed waits for p to SIGKILL itself at failpoint.
func (p *proc) killed(t *testing.T, failpoint string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not reach failpoint %s:\n%s", failpoint, p.out)
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the worker was not SIGKILLed:\n%s", p.out)
	require.Contains(t, p.out.String(), `"failpoint":"`+failpoint+`"`)
}

// stop ends p with SIGTERM (a graceful stop).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", p.out)
	}
}

// command runs one operator command of the service and returns its output.
func (s *service) command(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.vars
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "%s: %s", strings.Join(args, " "), out)
	return string(out)
}

// work reads the inbox record of (key, msgType): its status and failure
// code ("" when it does not exist).
func (s *service) work(key, msgType string) (status, code string) {
	s.t.Helper()
	store := inbox.Store{Table: s.env.Table}
	out, err := s.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.env.Table),
		Key: store.Key(key, msgType), ConsistentRead: aws.Bool(true)})
	require.NoError(s.t, err)
	if len(out.Item) == 0 {
		return "", ""
	}
	rec, err := store.Decode(out.Item)
	require.NoError(s.t, err)
	return string(rec.Status), rec.FailureCode
}

// order reads the order item: how often the work applied, and the charge.
func (s *service) order(order string) (applied int, chargeID string) {
	s.t.Helper()
	out, err := s.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.env.Table),
		Key:            map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "ORDER#" + order}, "SK": &types.AttributeValueMemberS{Value: "ORDER"}},
		ConsistentRead: aws.Bool(true)})
	require.NoError(s.t, err)
	var item struct {
		Applied  int    `dynamodbav:"applied"`
		ChargeID string `dynamodbav:"chargeId"`
	}
	require.NoError(s.t, attributevalue.UnmarshalMap(out.Item, &item))
	return item.Applied, item.ChargeID
}

func (s *service) waitStatus(p *proc, key, msgType, want string) {
	s.t.Helper()
	testenv.Eventually(s.t, 45*time.Second, func() bool {
		st, _ := s.work(key, msgType)
		return st == want
	}, "work %s never became %s; worker output:\n%s", key, want, p.out)
}

func TestKillNineAtEffectFailpoints(t *testing.T) {
	tests := []struct {
		failpoint string
		msgType   string
		wantCalls int // provider calls in all, after the restart
		// claims the record counts: a claim cut short before its call counts
		wantClaims int
	}{
		// Idempotent provider: the STARTED record found on restart is called
		// again with the same key (the provider deduplicates) — or not at all
		// once the reference is recorded.
		{hooks.EffectBeforeCall, "OrderCharge", 1, 2},
		{hooks.EffectAfterCall, "OrderCharge", 2, 2},
		{hooks.EffectBeforeCommit, "OrderCharge", 1, 1},
		{hooks.AfterCommit, "OrderCharge", 1, 1},
		// No idempotency keys: a completed effect is never called again.
		{hooks.EffectBeforeCommit, "OrderSend", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.msgType+"/"+tc.failpoint, func(t *testing.T) {
			t.Parallel()
			s := newService(t)
			key := s.send(tc.msgType, "o-1")
			first := s.start("--failpoint-kill", tc.failpoint+"=1")
			first.killed(t, tc.failpoint)

			second := s.start()
			s.waitStatus(second, key, tc.msgType, string(inbox.StatusCompleted))
			second.stop(t)

			effectKey := effects.Key(tc.msgType, key, "charge")
			calls, performed := s.prov.Count(effectKey)
			require.Equal(t, tc.wantCalls, calls, "provider calls")
			require.Equal(t, 1, performed, "charged once")
			for _, k := range s.prov.Keys() {
				require.Equal(t, effectKey, k, "every call carried the same key")
			}
			applied, chargeID := s.order("o-1")
			require.Equal(t, 1, applied, "the work applied once")
			require.Equal(t, s.prov.Charges(effectKey)[0], chargeID)

			var got struct {
				Effects []struct {
					Status      string `json:"status"`
					ProviderRef string `json:"providerRef"`
					CommittedAt string `json:"committedAt"`
					Calls       int    `json:"calls"`
				} `json:"effects"`
			}
			require.NoError(t, json.Unmarshal([]byte(s.command("effects", "get", effectKey, "-o", "json")), &got))
			require.Len(t, got.Effects, 1)
			require.Equal(t, "COMPLETED", got.Effects[0].Status)
			require.Equal(t, chargeID, got.Effects[0].ProviderRef)
			require.NotEmpty(t, got.Effects[0].CommittedAt, "committed with the work")
			require.Equal(t, tc.wantClaims, got.Effects[0].Calls)
		})
	}
}

// A provider without idempotency keys, the worker killed after the call:
// the effect is UNKNOWN, the work fails with EFFECT_OUTCOME_UNKNOWN and is
// dead-lettered, the operator finds the charge at the provider and resolves
// the effect through the command, reopens the work and redrives it: it
// applies once, and the provider is never called a second time.
func TestKillNineUnknownResolvedThroughTheCommand(t *testing.T) {
	t.Parallel()
	s := newService(t)
	key := s.send("OrderSend", "o-2")
	first := s.start("--failpoint-kill", hooks.EffectAfterCall+"=1")
	first.killed(t, hooks.EffectAfterCall)

	second := s.start()
	s.waitStatus(second, key, "OrderSend", string(inbox.StatusFailedTerminal))
	_, code := s.work(key, "OrderSend")
	require.Equal(t, effects.CodeOutcomeUnknown, code)
	effectKey := effects.Key("OrderSend", key, "charge")
	calls, performed := s.prov.Count(effectKey)
	require.Equal(t, 1, calls, "not called again")
	require.Equal(t, 1, performed)

	out := s.command("effects", "list", "--status", "UNKNOWN")
	t.Logf("$ effects list --status UNKNOWN\n%s", out)
	t.Logf("$ effects get %s\n%s", effectKey, s.command("effects", "get", effectKey))
	require.Contains(t, out, effectKey)
	require.Contains(t, out, "UNKNOWN")
	// The operator looks the key up at the provider and finds the charge.
	charge := s.prov.Charges(effectKey)[0]
	out = s.command("effects", "resolve", effectKey, "--completed", "--ref", charge, "--reason", "charge found in the provider's dashboard", "--by", "ops@test")
	t.Logf("$ effects resolve …\n%s", out)
	require.Contains(t, out, "resolved COMPLETED")
	require.Contains(t, out, "inbox reopen "+key+" --type OrderSend")
	require.Contains(t, s.command("effects", "list", "--status", "UNKNOWN"), "no effects")

	s.command("inbox", "reopen", key, "--type", "OrderSend", "--reason", "effect resolved")
	testenv.Eventually(t, 30*time.Second, func() bool { return testenv.InspectQueue(t, s.env.Queues.DLQURL).Total() == 1 },
		"the terminal work's message is in the DLQ")
	s.command("dlq", "redrive", "--filter", "code="+effects.CodeOutcomeUnknown, "--max", "1")
	s.waitStatus(second, key, "OrderSend", string(inbox.StatusCompleted))
	second.stop(t)

	calls, performed = s.prov.Count(effectKey)
	require.Equal(t, 1, calls, "never called a second time")
	require.Equal(t, 1, performed)
	applied, chargeID := s.order("o-2")
	require.Equal(t, 1, applied)
	require.Equal(t, charge, chargeID)

	var got struct {
		Effects []struct {
			Status, Resolution, ResolvedBy, ResolveReason, CommittedAt string
		} `json:"effects"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.command("effects", "get", effectKey, "-o", "json")), &got))
	e := got.Effects[0]
	require.Equal(t, "COMPLETED", e.Status)
	require.Equal(t, "COMPLETED", e.Resolution)
	require.Equal(t, "ops@test", e.ResolvedBy)
	require.Equal(t, "charge found in the provider's dashboard", e.ResolveReason)
	require.NotEmpty(t, e.CommittedAt)
	// A resolved effect cannot be resolved again.
	cmd := exec.Command(s.bin, "effects", "resolve", effectKey, "--not-done", "--reason", "x")
	cmd.Env = s.vars
	bad, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%s", bad)
	require.Contains(t, string(bad), "not resolvable")
}
