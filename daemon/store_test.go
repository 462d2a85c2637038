package daemon

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// Every setting the table records has the flag that sets it: a setting
// inbox adds is merged with the flags only once the daemon has one.
func TestEveryRecordedSettingHasAFlag(t *testing.T) {
	root := newRootCmd(App{})
	for _, setting := range inbox.Settings() {
		f, ok := flagOf(setting)
		require.True(t, ok, "no flag sets the recorded %s", setting)
		require.NotNil(t, root.PersistentFlags().Lookup(f.flag), "--%s", f.flag)
	}
}

// A record the daemon cannot use stops every command but `tables create`,
// which records the flags' settings in its place and says so.
func TestStoreUnusableRecord(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	env := testenv.New(t, testenv.Options{NoQueue: true})
	ddbEndpoint, _ := testenv.Endpoints(t)
	run := func(args ...string) (string, error) {
		root := newRootCmd(App{Name: "ddbworker"})
		root.SetArgs(append([]string{"--dynamodb-endpoint", ddbEndpoint, "--table", env.Table}, args...))
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	_, err := env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"}, "SK": &types.AttributeValueMemberS{Value: "INBOX"},
		string(inbox.SettingAttentionShards): &types.AttributeValueMemberN{Value: "500"},
	}})
	require.NoError(t, err)

	out, err := run("inbox", "list", "--status", "FAILED_TERMINAL")
	require.Error(t, err, out)
	require.ErrorContains(t, err, "records an unusable attentionShards 500")
	require.ErrorContains(t, err, "record valid settings with `ddbworker tables create`")

	out, err = run("tables", "create", "--attention-shards", "4")
	require.NoError(t, err, out)
	require.Contains(t, out, "changed: inbox: table "+env.Table+" records an unusable attentionShards 500")
	require.Contains(t, out, "--attention-shards 4 recorded in its place")
	rec, ok, err := inbox.ReadRecorded(context.Background(), env.DynamoDB, inbox.Store{Table: env.Table})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 4, rec.Store.AttentionShards)

	out, err = run("inbox", "list", "--status", "FAILED_TERMINAL")
	require.NoError(t, err, out)
}
