package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

// What RecordSettings writes, ReadRecorded reads back into a store: every
// setting, with who recorded it and when; RecordSettingsIfMissing leaves an
// existing record alone.
func TestRecordedSettingsRoundTrip(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	given := inbox.Store{Table: env.Table, AttentionShards: 8, IndexProcessing: true,
		TTL: inbox.TTL{Completed: 40 * 24 * time.Hour, Failed: 3 * time.Hour, Processing: 2 * time.Hour}}
	require.NoError(t, inbox.RecordSettings(ctx, env.DynamoDB, given, "test@host"))

	rec, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: env.Table})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, inbox.Settings(), rec.Settings)
	require.Equal(t, 8, rec.Store.AttentionShards)
	require.True(t, rec.Store.IndexProcessing)
	require.Equal(t, given.TTL, rec.Store.TTL)
	require.Equal(t, env.Table, rec.Store.Table)
	require.Equal(t, "test@host", rec.By)
	at, err := time.Parse(inbox.TimeLayout, rec.At)
	require.NoError(t, err, rec.At)
	require.WithinDuration(t, time.Now(), at, time.Minute)

	wrote, err := inbox.RecordSettingsIfMissing(ctx, env.DynamoDB, inbox.Store{Table: env.Table, AttentionShards: 2}, "worker@host")
	require.NoError(t, err)
	require.False(t, wrote, "the table records settings already")
	rec, _, err = inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: env.Table})
	require.NoError(t, err)
	require.Equal(t, 8, rec.Store.AttentionShards)
	require.Equal(t, "test@host", rec.By)

	// The record lives under the store's own key attribute names.
	layout := tables.Layout{PartitionKey: "pk", SortKey: "sk"}
	custom := testenv.Unique("t")
	require.NoError(t, tables.Ensure(ctx, env.DynamoDB, tables.Config{Name: custom, Layout: layout}))
	t.Cleanup(func() {
		_, _ = env.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(custom)})
	})
	s := inbox.Store{Table: custom, Layout: layout, AttentionShards: 3}
	wrote, err = inbox.RecordSettingsIfMissing(ctx, env.DynamoDB, s, "worker@host")
	require.NoError(t, err)
	require.True(t, wrote)
	rec, ok, err = inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: custom, Layout: layout})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, rec.Store.AttentionShards)
	require.Equal(t, inbox.DefaultCompletedTTL, rec.Store.TTL.Completed, "recorded with its defaults")
}

// A table that records nothing: ok is false, the store comes back as
// given, and there is no error.
func TestRecordedSettingsMissing(t *testing.T) {
	env := testenv.New(t, testenv.Options{NoQueue: true})
	given := inbox.Store{Table: env.Table, AttentionShards: 5}
	rec, ok, err := inbox.ReadRecorded(context.Background(), env.DynamoDB, given)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, given, rec.Store)
	require.Empty(t, rec.Settings)

	_, _, err = inbox.ReadRecorded(context.Background(), env.DynamoDB, inbox.Store{Table: testenv.Unique("missing")})
	var notFound *types.ResourceNotFoundException
	require.ErrorAs(t, err, &notFound, "the SDK's error, wrapped")
}

// A record that holds an unusable value is a *RecordedError naming the
// setting and the value; one that holds fewer settings (an older version
// wrote it) gives those it holds.
func TestRecordedSettingsBadValue(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	put := func(attrs map[string]types.AttributeValue) {
		t.Helper()
		item := map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"},
			"SK": &types.AttributeValueMemberS{Value: "INBOX"},
		}
		for k, v := range attrs {
			item[k] = v
		}
		_, err := env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: item})
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name    string
		setting inbox.Setting
		value   types.AttributeValue
		shown   string
		reason  string
	}{
		{"out of range", inbox.SettingAttentionShards, &types.AttributeValueMemberN{Value: "500"}, "500", "must be within 1..100"},
		{"zero", inbox.SettingAttentionShards, &types.AttributeValueMemberN{Value: "0"}, "0", "must be within 1.."},
		{"a string", inbox.SettingAttentionShards, &types.AttributeValueMemberS{Value: "sixteen"}, `"sixteen"`, "not a number"},
		{"a fraction", inbox.SettingFailedTTL, &types.AttributeValueMemberN{Value: "3600.5"}, "3600.5", "not a whole number"},
		{"too short a TTL", inbox.SettingCompletedTTL, &types.AttributeValueMemberN{Value: "86400"}, "86400", "must be at least 28 days"},
		{"not a boolean", inbox.SettingIndexProcessing, &types.AttributeValueMemberS{Value: "yes"}, `"yes"`, "not a boolean"},
		{"an unknown hash version", inbox.SettingRequestHash, &types.AttributeValueMemberS{Value: "v4"}, `"v4"`, `must be "v2" or "v3"`},
		{"a hash version number", inbox.SettingRequestHash, &types.AttributeValueMemberN{Value: "3"}, "3", "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put(map[string]types.AttributeValue{string(tc.setting): tc.value})
			given := inbox.Store{Table: env.Table}
			rec, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, given)
			var bad *inbox.RecordedError
			require.ErrorAs(t, err, &bad)
			require.False(t, ok)
			require.Equal(t, given, rec.Store, "nothing of an unusable record is applied")
			require.Equal(t, env.Table, bad.Table)
			require.Equal(t, tc.setting, bad.Setting)
			require.Equal(t, tc.shown, bad.Value)
			require.ErrorContains(t, err, tc.reason)
			require.ErrorContains(t, err, "table "+env.Table+" records an unusable "+string(tc.setting)+" "+tc.shown)
		})
	}

	put(map[string]types.AttributeValue{string(inbox.SettingAttentionShards): &types.AttributeValueMemberN{Value: "4"}})
	rec, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: env.Table, IndexProcessing: true})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []inbox.Setting{inbox.SettingAttentionShards}, rec.Settings)
	require.True(t, rec.Has(inbox.SettingAttentionShards))
	require.False(t, rec.Has(inbox.SettingIndexProcessing))
	require.Equal(t, 4, rec.Store.AttentionShards)
	require.True(t, rec.Store.IndexProcessing, "a setting the record does not hold keeps the store's")
}

// The request hash version: recorded as "v2" or "v3", read back; a record
// without it (an earlier release's) leaves the store's own, whose default
// is v2.
func TestRecordedRequestHashVersion(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	rec, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: env.Table})
	require.NoError(t, err)
	require.False(t, ok)
	s, err := inbox.Store{Table: env.Table}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, inbox.DefaultRequestHashVersion, s.RequestHashVersion)
	require.Equal(t, 2, s.RequestHashVersion)
	_, err = inbox.Store{Table: env.Table, RequestHashVersion: 1}.WithDefaults()
	require.ErrorContains(t, err, "RequestHashVersion 1 must be 2 or 3")

	require.NoError(t, inbox.RecordSettings(ctx, env.DynamoDB, inbox.Store{Table: env.Table, RequestHashVersion: 3}, "test@host"))
	out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"}, "SK": &types.AttributeValueMemberS{Value: "INBOX"}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: "v3"}, out.Item["requestHashVersion"])
	rec, ok, err = inbox.ReadRecorded(ctx, env.DynamoDB, inbox.Store{Table: env.Table})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, rec.Store.RequestHashVersion)
	require.Equal(t, "v3", inbox.SettingRequestHash.Value(rec.Store))
	require.False(t, inbox.SettingRequestHash.IsLayout())

	merged, mismatches := rec.Merge(inbox.Store{Table: env.Table, RequestHashVersion: 2}, func(s inbox.Setting) bool { return s == inbox.SettingRequestHash })
	require.Equal(t, []inbox.Setting{inbox.SettingRequestHash}, mismatches)
	merged, mismatches = rec.Merge(inbox.Store{Table: env.Table}, func(inbox.Setting) bool { return false })
	require.Empty(t, mismatches)
	require.Equal(t, 3, merged.RequestHashVersion)
}
