package daemon

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

// The request hash version new records are written in is a recorded
// setting, moved in two phases: a table recorded by an earlier release
// (its record holds no version) is written v2, which every release reads,
// through a rolling deploy; `tables adopt --request-hash-version v3` then
// plans and records v3 as a record-settings change; a flag that disagrees
// with the record is refused by the workers and operator commands as the
// other recorded settings are; `tables create` records v3 for a new table.
func TestRequestHashVersionRecorded(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	env := testenv.New(t, testenv.Options{}) // tables.Ensure: indexes and TTL, no record
	ctx := context.Background()
	ddb := env.DynamoDB
	run := func(table string, args ...string) (string, error) {
		t.Helper()
		root := newRootCmd(App{})
		root.SetArgs(append([]string{"--dynamodb-endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "--table", table}, args...))
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	recorded := func(table string) inbox.Recorded {
		t.Helper()
		rec, ok, err := inbox.ReadRecorded(ctx, ddb, inbox.Store{Table: table})
		require.NoError(t, err)
		require.True(t, ok)
		return rec
	}
	resolve := func(table string, strict bool) (inbox.Store, error) {
		g := &globals{app: App{}, table: table, ddbEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), shards: inbox.DefaultAttentionShards,
			layout: tables.DefaultLayout()}
		m, err := g.mergeStore(ctx, ddb, strict)
		return m.store, err
	}

	// What an earlier release recorded: every setting but the version.
	require.NoError(t, inbox.RecordSettings(ctx, ddb, inbox.Store{Table: env.Table}, "ddbworker@old"))
	rm, err := expression.NewBuilder().WithUpdate(expression.Remove(expression.Name(string(inbox.SettingRequestHash)))).Build()
	require.NoError(t, err)
	_, err = ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(env.Table), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"}, "SK": &types.AttributeValueMemberS{Value: "INBOX"}},
		UpdateExpression: rm.Update(), ExpressionAttributeNames: rm.Names()})
	require.NoError(t, err)
	require.False(t, recorded(env.Table).Has(inbox.SettingRequestHash))

	// The workers (run's strict resolution) write v2 on it.
	s, err := resolve(env.Table, true)
	require.NoError(t, err)
	require.Equal(t, 2, s.RequestHashVersion, "a record of an earlier release: v2, which every release reads")

	// Phase two: adopt plans the version as a record-settings change,
	// and records it.
	out, err := run(env.Table, "tables", "adopt", "--request-hash-version", "v3", "--dry-run")
	require.NoError(t, err, out)
	require.Contains(t, out, "record-settings  DDBWORKER#CONFIG/INBOX  PutItem --attention-shards 16 --index-processing=false --completed-ttl 840h0m0s --failed-ttl 840h0m0s --processing-ttl 168h0m0s --request-hash-version v3 (the table's record lacks some of them)")
	require.False(t, recorded(env.Table).Has(inbox.SettingRequestHash), "a dry run records nothing")
	out, err = run(env.Table, "tables", "adopt", "--request-hash-version", "v3", "--yes")
	require.NoError(t, err, out)
	rec := recorded(env.Table)
	require.True(t, rec.Has(inbox.SettingRequestHash))
	require.Equal(t, 3, rec.Store.RequestHashVersion)
	s, err = resolve(env.Table, true)
	require.NoError(t, err)
	require.Equal(t, 3, s.RequestHashVersion, "an unset flag takes the recorded version")

	// Adopting again changes nothing; a disagreeing flag is a change
	// there, and refused where the workers and operator commands read.
	out, err = run(env.Table, "tables", "adopt", "--dry-run")
	require.NoError(t, err, out)
	require.Contains(t, out, "--request-hash-version v3: recorded in the table")
	out, err = run(env.Table, "tables", "adopt", "--request-hash-version", "v2", "--dry-run")
	require.NoError(t, err, out)
	require.Contains(t, out, "--request-hash-version v2 (changed: --request-hash-version (DDBWORKER_REQUEST_HASH_VERSION) is v2 but table "+env.Table+" records v3")
	out, err = run(env.Table, "inbox", "list", "--status", "FAILED_TERMINAL", "--request-hash-version", "v2")
	require.ErrorContains(t, err, "--request-hash-version (DDBWORKER_REQUEST_HASH_VERSION) is v2 but table "+env.Table+" records v3", out)
	_, err = run(env.Table, "tables", "adopt", "--request-hash-version", "v4", "--dry-run")
	require.ErrorContains(t, err, `--request-hash-version (DDBWORKER_REQUEST_HASH_VERSION) "v4": must be v2 or v3`)

	// A table this release creates records v3; `run` on a table that
	// records nothing records v2 (an earlier release's worker may share it).
	fresh := testenv.Unique("hashv")
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(fresh)})
	})
	out, err = run(fresh, "tables", "create")
	require.NoError(t, err, out)
	require.Contains(t, out, "--request-hash-version v3")
	require.Equal(t, 3, recorded(fresh).Store.RequestHashVersion)

	g := &globals{app: App{}, table: env.Table}
	bare := testenv.New(t, testenv.Options{}) // no record
	require.NoError(t, g.recordStore(ctx, ddb, inbox.Store{Table: bare.Table}, false))
	require.Equal(t, 2, recorded(bare.Table).Store.RequestHashVersion)
}
