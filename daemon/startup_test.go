package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// A problem no wait heals fails the start at once, naming what to change;
// the ones that may heal are retried until the startup timeout.
func TestStartupChecks(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	custom := tables.Layout{PartitionKey: "pk", SortKey: "sk", AggregateIndex: "byAggregate", AggregatePK: "aggPk", AggregateSK: "aggSk",
		AttentionIndex: "attention", AttentionPK: "attPk", AttentionSK: "attSk", TTL: "expiresAt"}
	customTable := testenv.Unique("t")
	require.NoError(t, tables.Ensure(ctx, env.DynamoDB, tables.Config{Name: customTable, Layout: custom}))
	t.Cleanup(func() {
		_, _ = env.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(customTable)})
	})
	noTTL := testenv.Unique("t")
	_, err := env.DynamoDB.CreateTable(ctx, tables.Definition(noTTL, tables.DefaultLayout()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = env.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(noTTL)})
	})
	missingQueue := strings.TrimSuffix(env.Queues.URL, "/") + "-missing"

	store := func(table string, l tables.Layout) inbox.Store {
		s, err := inbox.Store{Table: table, Layout: l}.WithDefaults()
		require.NoError(t, err)
		return s
	}
	for _, tc := range []struct {
		name             string
		store            inbox.Store
		queue, dlq       string
		policy           worker.TerminalPolicy
		want             []string // in the one-line error; none: it passes
		visibilityWarned bool
	}{
		{name: "everything fits", store: store(env.Table, tables.Layout{}), queue: env.Queues.URL, dlq: env.Queues.DLQURL, policy: worker.PolicyDLQ},
		{name: "a table of its own layout", store: store(customTable, custom), queue: env.Queues.URL, policy: worker.PolicyQuarantine},
		{name: "no such table", store: store("nope-"+testenv.Unique("t"), tables.Layout{}), queue: env.Queues.URL, policy: worker.PolicyQuarantine,
			want: []string{"does not exist", "tables create", "--table (DDBWORKER_TABLE)"}},
		{name: "a table with other key names", store: store(customTable, tables.Layout{}), queue: env.Queues.URL, policy: worker.PolicyQuarantine,
			want: []string{"its key is (pk, sk), not (PK, SK)", "no index GSI1", "TTL is on attribute \"expiresAt\"", "--pk-attribute", "DDBWORKER_PK_ATTRIBUTE"}},
		{name: "TTL not enabled", store: store(noTTL, tables.Layout{}), queue: env.Queues.URL, policy: worker.PolicyQuarantine,
			want: []string{"TTL is not enabled", "--ttl-attribute"}},
		{name: "no queue URL", store: store(env.Table, tables.Layout{}), policy: worker.PolicyQuarantine,
			want: []string{"--queue-url (DDBWORKER_QUEUE_URL) is required"}},
		{name: "no such queue", store: store(env.Table, tables.Layout{}), queue: missingQueue, policy: worker.PolicyQuarantine,
			want: []string{"--queue-url (DDBWORKER_QUEUE_URL)", "no such queue"}},
		{name: "dlq policy without a DLQ", store: store(env.Table, tables.Layout{}), queue: env.Queues.URL, policy: worker.PolicyDLQ,
			want: []string{"--dlq-url (DDBWORKER_DLQ_URL) is required with --terminal-policy dlq"}},
		{name: "dlq policy with a missing DLQ", store: store(env.Table, tables.Layout{}), queue: env.Queues.URL, dlq: missingQueue, policy: worker.PolicyDLQ,
			want: []string{"--dlq-url (DDBWORKER_DLQ_URL)", "no such queue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			start := time.Now()
			err := checkDependencies(ctx, env.DynamoDB, env.SQS, tc.store, tc.queue, tc.dlq, tc.policy, time.Minute, "svc",
				slog.New(slog.NewJSONHandler(&logs, nil)))
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			var se *startupError
			require.ErrorAs(t, err, &se, "a problem no wait heals: %v", err)
			require.Less(t, time.Since(start), 10*time.Second, "at once, not after --startup-timeout")
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// The inbox settings are recorded in the table by `tables create` and read
// by every command: an explicit flag that disagrees is an error naming it;
// an unset one takes the recorded value.
func TestStoreSettingsRecorded(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	ddbEndpoint, _ := testenv.Endpoints(t) // skips the test when the emulators are not available
	table := testenv.Unique("t")
	t.Cleanup(func() {
		cfg := testenv.AWSConfig(t)
		_, _ = dynamodb.NewFromConfig(cfg).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	run := func(args ...string) (string, error) {
		root := newRootCmd(App{})
		root.SetArgs(append([]string{"--dynamodb-endpoint", ddbEndpoint, "--table", table}, args...))
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("tables", "create", "--attention-shards", "8", "--completed-ttl", "1000h")
	require.NoError(t, err, out)
	require.Contains(t, out, "--attention-shards 8")

	out, err = run("tables", "create") // again, with defaults: nothing changes
	require.NoError(t, err, out)
	require.Contains(t, out, "--attention-shards 8 --index-processing=false --completed-ttl 1000h0m0s")
	require.NotContains(t, out, "changed:")

	g := &globals{app: App{}, table: table, ddbEndpoint: ddbEndpoint, shards: 16, layout: tables.DefaultLayout()}
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	s, err := g.resolveStore(context.Background(), ddb)
	require.NoError(t, err)
	require.Equal(t, 8, s.AttentionShards, "an unset flag takes the recorded value")
	require.Equal(t, 1000*time.Hour, s.TTL.Completed)

	t.Setenv("DDBWORKER_ATTENTION_SHARDS", "4")
	g.shards = 4
	_, err = g.resolveStore(context.Background(), ddb)
	require.ErrorContains(t, err, "--attention-shards (DDBWORKER_ATTENTION_SHARDS) is 4 but table "+table+" records 8")

	out, err = run("inbox", "list", "--status", "FAILED_TERMINAL", "--attention-shards", "2")
	require.Error(t, err, out)
	require.ErrorContains(t, err, "records 8")

	out, err = run("tables", "create", "--attention-shards", "4")
	require.NoError(t, err, out)
	require.Contains(t, out, "changed: --attention-shards (DDBWORKER_ATTENTION_SHARDS) is 4 but table "+table+" records 8")
	require.NoError(t, os.Unsetenv("DDBWORKER_ATTENTION_SHARDS"))
	g.shards = 16
	s, err = g.resolveStore(context.Background(), ddb)
	require.NoError(t, err)
	require.Equal(t, 4, s.AttentionShards)
}

func TestFlagErrors(t *testing.T) {
	err := flagErrors(errors.New("worker: Config.Concurrency -1 must be within 1..10000\nworker: Config.CallTimeout 5s must be shorter than VisibilityTimeout 3s\nworker: Config.Store: inbox: Store.Table is required"))
	require.Equal(t, "--concurrency (DDBWORKER_CONCURRENCY) -1 must be within 1..10000\n"+
		"--call-timeout (DDBWORKER_CALL_TIMEOUT) 5s must be shorter than VisibilityTimeout 3s\n"+
		"Config.Store: inbox: Store.Table is required", err.Error())
	require.NoError(t, flagErrors(nil))
}
