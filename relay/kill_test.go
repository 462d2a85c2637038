package relay_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/worker"
)

// kill -9 at every step of the relay: `ddbworker-dev relay` processes
// SIGKILL themselves at each failpoint (after the send, after the mark,
// before the checkpoint) and are restarted while producers keep writing;
// then a real worker consumes the FIFO queue. Every outbox record reached
// the queue (its work was applied), each work item was applied exactly
// once, and in order per aggregate.
//
// On the FIFO queue SQS's deduplication (the event id, for 5 minutes)
// drops most re-sends; on the standard queue they arrive and the worker's
// gate absorbs them.
func TestKillRelayAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dev binary and runs relay processes")
	}
	bin := filepath.Join(t.TempDir(), "ddbworker-dev")
	out, err := exec.Command("go", "build", "-o", bin, "../internal/dev/cmd/ddbworker-dev").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, fifo := range []bool{true, false} {
		t.Run(map[bool]string{true: "fifo", false: "standard"}[fifo], func(t *testing.T) { killRelay(t, bin, fifo) })
	}
}

func killRelay(t *testing.T, bin string, fifo bool) {
	w := newWorld(t, fifo)
	ddbEndpoint, sqsEndpoint := testenv.Endpoints(t)
	logs := &testenv.Buffer{}
	start := func(failpoint string, seed int) *exec.Cmd {
		args := []string{"relay", "--table", w.env.Table, "--queue-url", w.env.Queues.URL, "--lease-duration", "1s",
			"--poll-interval", "50ms", "--discovery-interval", "200ms", "--drain-timeout", "2s", "--metrics-addr", "",
			"--fault-seed", strconv.Itoa(seed)}
		if failpoint != "" {
			args = append(args, "--failpoint-kill", failpoint+"=0.5")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB="+ddbEndpoint, "AWS_ENDPOINT_URL_SQS="+sqsEndpoint,
			"AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+ddbEndpoint)
		cmd.Stdout, cmd.Stderr = logs, logs
		require.NoError(t, cmd.Start())
		return cmd
	}
	aggregates := []string{"a", "b", "c", "d"}
	var all []string
	next := 1
	seed := 1
	for _, fp := range hooks.RelayFailpoints() {
		kills := 0
		// Each phase: 4 aggregates × 6 events, half before the relay
		// starts, half while it runs and dies — and 3 more each while the
		// failpoint has not fired yet (it fires at random).
		write := func() {
			for _, agg := range aggregates {
				all = append(all, w.write(agg, next, next+2)...)
			}
			next += 3
		}
		write()
		wrote := false
		deadline := time.Now().Add(60 * time.Second)
		for !w.allPublished(all) || !wrote || kills == 0 {
			require.True(t, time.Now().Before(deadline), "phase %s: records not published in time; logs:\n%s", fp, logs.String())
			if wrote && kills == 0 && w.allPublished(all) {
				write()
			}
			failpoint := fp
			if kills >= 4 {
				failpoint = "" // enough kills: let it finish
			}
			seed++
			cmd := start(failpoint, seed)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if !wrote {
				write()
				wrote = true
			}
			var err error
			done := false
			for !done {
				select {
				case err = <-exited:
					done = true
				case <-time.After(100 * time.Millisecond):
					if w.allPublished(all) {
						// SIGTERM drains and exits 0 — unless a failpoint
						// fires in the drain's page (a kill like the others).
						_ = cmd.Process.Signal(syscall.SIGTERM)
						err = <-exited
						done = true
					}
				}
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				ws, _ := ee.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "relay exited: %v; logs:\n%s", err, logs.String())
				kills++
			}
		}
		require.GreaterOrEqual(t, kills, 1, "failpoint %s never fired", fp)
		require.Equal(t, kills, strings.Count(logs.String(), `"failpoint":"`+fp+`"`), "kills at %s", fp)
		t.Logf("failpoint %s: %d kills", fp, kills)
	}

	// A real worker consumes the queue: each work item applied once, in
	// order per aggregate.
	var mu sync.Mutex
	applied := map[string][]int{}
	dups := 0
	reg := ddbworker.NewRegistry()
	require.NoError(t, reg.Register("Counted", ddbworker.HandlerFunc(func(ctx context.Context, msg *ddbworker.Message) (ddbworker.Result, error) {
		return ddbworker.Apply(ddbworker.Update(w.env.Table, ddbworker.Key{"PK": "APPLIED#" + msg.Key(), "SK": "APPLIED"}).Add("count", 1)), nil
	})))
	wk, err := worker.New(worker.Deps{DynamoDB: w.env.DynamoDB, SQS: w.env.SQS, Handlers: reg, OnEvent: func(ev worker.Event) {
		if ev.Outcome == worker.OutcomeDuplicate {
			mu.Lock()
			dups++
			mu.Unlock()
		}
		if ev.Outcome != worker.OutcomeApplied {
			return
		}
		id := strings.TrimPrefix(ev.IdempotencyKey, "k-")
		n, _ := strconv.Atoi(id[len(id)-3:])
		mu.Lock()
		applied[id[:len(id)-5]] = append(applied[id[:len(id)-5]], n)
		mu.Unlock()
	}}, worker.Config{Store: inbox.Store{Table: w.env.Table}, QueueURL: w.env.Queues.URL, DLQURL: w.env.Queues.DLQURL,
		Concurrency: 4, WaitTime: time.Second, VisibilityTimeout: 5 * time.Second, DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 5 * time.Second})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(ctx) }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range applied {
			n += len(v)
		}
		return n
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return count() >= len(all) }, "every record's work applied")
	// Let duplicates still in the queue arrive: the queue empties.
	testenv.Eventually(t, 30*time.Second, func() bool { return testenv.InspectQueue(t, w.env.Queues.URL).Total() == 0 }, "queue drained")
	stop()
	require.NoError(t, <-done)

	n := count()
	mu.Lock()
	t.Logf("%d outbox records; the worker applied %d and absorbed %d duplicate deliveries (re-sends after kills)", len(all), n, dups)
	defer mu.Unlock()
	for _, agg := range aggregates {
		want := make([]int, next-1)
		for i := range want {
			want[i] = i + 1
		}
		got := applied[agg]
		if !fifo {
			slices.Sort(got) // a standard queue keeps no order
		}
		require.Equal(t, want, got, "aggregate %s applied once each, in order", agg)
	}
	for _, id := range all {
		it, err := w.env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.env.Table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "APPLIED#k-" + id}, "SK": &types.AttributeValueMemberS{Value: "APPLIED"}}})
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, it.Item["count"], "work %s applied exactly once", id)
	}
}
