package inbox_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

// The layout is recorded with the settings: its index names, their key
// attributes and the TTL attribute come back from the record in place of
// the reader's; Merge refuses a given name that differs; a record whose
// names are unusable together is a *RecordedError.
func TestRecordedLayout(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{NoQueue: true})
	layout := tables.Layout{PartitionKey: "PK", SortKey: "SK", AggregateIndex: "agg", AggregatePK: "aggPK", AggregateSK: "aggSK",
		AttentionIndex: "attn", AttentionPK: "attnPK", AttentionSK: "attnSK", TTL: "expiresAt"}
	require.NoError(t, inbox.RecordSettings(ctx, env.DynamoDB, inbox.Store{Table: env.Table, Layout: layout}, "ops"))

	reader := inbox.Store{Table: env.Table} // the defaults' layout
	rec, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, reader)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, rec.HasLayout())
	require.Equal(t, inbox.Settings(), rec.Settings)
	for _, s := range inbox.LayoutSettings() {
		require.True(t, s.IsLayout(), s)
	}
	require.False(t, inbox.SettingAttentionShards.IsLayout())
	got := rec.Store.Layout
	got.PartitionKey, got.SortKey = "PK", "SK" // not recorded: the table's key schema names them
	require.Equal(t, layout, got)

	merged, mismatches := rec.Merge(reader, func(inbox.Setting) bool { return false })
	require.Empty(t, mismatches)
	require.Equal(t, "attn", merged.Layout.AttentionIndex, "an unset name takes the recorded one")
	given := reader
	given.Layout.AttentionIndex = "GSI2"
	_, mismatches = rec.Merge(given, func(s inbox.Setting) bool { return s == inbox.SettingAttentionIndex })
	require.Equal(t, []inbox.Setting{inbox.SettingAttentionIndex}, mismatches)
	require.Equal(t, "GSI2", inbox.SettingAttentionIndex.Value(given))
	require.Equal(t, "attn", inbox.SettingAttentionIndex.Value(rec.Store))

	for _, tc := range []struct {
		name    string
		setting inbox.Setting
		value   types.AttributeValue
		reason  string
	}{
		{"not a string", inbox.SettingAggregateIndex, &types.AttributeValueMemberN{Value: "1"}, "not a string"},
		{"empty", inbox.SettingTTLAttribute, &types.AttributeValueMemberS{Value: ""}, "must be 1..255 characters"},
		{"named twice", inbox.SettingAttentionPK, &types.AttributeValueMemberS{Value: "aggPK"}, `names attribute "aggPK" twice`},
		{"a record attribute", inbox.SettingTTLAttribute, &types.AttributeValueMemberS{Value: "status"}, "is an inbox record attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, inbox.RecordSettings(ctx, env.DynamoDB, inbox.Store{Table: env.Table, Layout: layout}, "ops"))
			_, err := env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(env.Table),
				Key:              map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "DDBWORKER#CONFIG"}, "SK": &types.AttributeValueMemberS{Value: "INBOX"}},
				UpdateExpression: aws.String("SET #a = :v"), ExpressionAttributeNames: map[string]string{"#a": string(tc.setting)},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": tc.value}})
			require.NoError(t, err)
			_, ok, err := inbox.ReadRecorded(ctx, env.DynamoDB, reader)
			var bad *inbox.RecordedError
			require.ErrorAs(t, err, &bad)
			require.False(t, ok)
			require.ErrorContains(t, err, tc.reason)
		})
	}
}
