package tables_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/tables"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestEnsureCreatesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	name := testenv.Unique("tables")
	t.Cleanup(func() { _, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })

	// Two concurrent first calls, then a third: all succeed.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = tables.Ensure(ctx, ddb, tables.Config{Name: name}) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, tables.Ensure(ctx, ddb, tables.Config{Name: name}))

	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.Equal(t, types.TableStatusActive, desc.Table.TableStatus)
	require.Equal(t, types.BillingModePayPerRequest, desc.Table.BillingModeSummary.BillingMode)
	idx := map[string]types.ProjectionType{}
	for _, g := range desc.Table.GlobalSecondaryIndexes {
		idx[aws.ToString(g.IndexName)] = g.Projection.ProjectionType
	}
	require.Equal(t, map[string]types.ProjectionType{tables.DefaultLayout().AggregateIndex: types.ProjectionTypeKeysOnly, tables.DefaultLayout().AttentionIndex: types.ProjectionTypeKeysOnly}, idx)

	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
	require.Equal(t, tables.DefaultLayout().TTL, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
}

func TestEnsureRejectsForeignTable(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	name := testenv.Unique("foreign")
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })

	err = tables.Ensure(ctx, ddb, tables.Config{Name: name})
	require.ErrorIs(t, err, tables.ErrIncompatible)
	var inc *tables.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.Equal(t, name, inc.Table)
}

func TestConfigValidation(t *testing.T) {
	err := tables.Ensure(context.Background(), nil, tables.Config{WaitTimeout: -1})
	require.ErrorContains(t, err, "Name is required")
	require.ErrorContains(t, err, "WaitTimeout must not be negative")
}

// The layout's key attributes must be strings wherever the table defines
// them: an index whose sort key is a number is a difference Verify names.
func TestVerifyWantsStringKeys(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	name := testenv.Unique("typed")
	in := tables.Definition(name, tables.DefaultLayout())
	for i, d := range in.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == "GSI2SK" {
			in.AttributeDefinitions[i].AttributeType = types.ScalarAttributeTypeN
		}
	}
	_, err := ddb.CreateTable(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
	_, err = ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}})
	require.NoError(t, err)

	err = tables.Verify(ctx, ddb, name, tables.Layout{})
	var inc *tables.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.Equal(t, "attribute GSI2SK is of type N, but the inbox's keys are strings", inc.Problem)
}

// An index of the application's keyed on an attribute the inbox records
// write with another type would make DynamoDB refuse every record ("Type
// mismatch for Index Key"): Verify (run's startup check) refuses the
// table, and the refusal is what the write shows. An index keyed on such
// attributes of the same type is not refused: the records enter it, which
// tables adopt warns about.
func TestVerifyRefusesAnIndexOnARecordAttributeOfAnotherType(t *testing.T) {
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(testenv.AWSConfig(t))
	create := func(attr string, typ types.ScalarAttributeType) string {
		name := testenv.Unique("recidx")
		in := tables.Definition(name, tables.DefaultLayout())
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(attr), AttributeType: typ})
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{IndexName: aws.String("byIt"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String(attr), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}})
		_, err := ddb.CreateTable(ctx, in)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
		_, err = ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}})
		require.NoError(t, err)
		return name
	}

	clash := create(attr.Status, types.ScalarAttributeTypeN)
	err := tables.Verify(ctx, ddb, clash, tables.Layout{})
	var inc *tables.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.Contains(t, inc.Problem, "index byIt is keyed on status of type N, which the inbox records write as type S: DynamoDB would refuse every record")
	_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(clash), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "IDEMPOTENCY#k"}, "SK": &types.AttributeValueMemberS{Value: "WORKER#T"},
		attr.Status: &types.AttributeValueMemberS{Value: "PROCESSING"}}})
	require.ErrorContains(t, err, "Type mismatch", "what Verify refuses is what DynamoDB refuses")

	same := create(attr.Status, types.ScalarAttributeTypeS)
	require.NoError(t, tables.Verify(ctx, ddb, same, tables.Layout{}))
	plan, err := tables.Plan(ctx, ddb, tables.AdoptConfig{Name: same})
	require.NoError(t, err)
	require.Len(t, plan.Blockers, 1, "the records would enter the index: shared only when told")
	require.Contains(t, plan.Blockers[0].Reason, "your index byIt (status) KEYS_ONLY, ACTIVE is keyed on status, which the inbox records write too: they would enter it")
	plan, err = tables.Plan(ctx, ddb, tables.AdoptConfig{Name: same, ShareIndexes: []string{"byIt"}})
	require.NoError(t, err)
	require.Empty(t, plan.Blockers)
	require.Contains(t, fmt.Sprint(plan.Kept), "shared as told — the inbox records enter it (they write status)")
}
