package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// AppTableOptions shape an application's table that predates ddbworker.
type AppTableOptions struct {
	// PK and SK are its key attributes (strings). Default: pk, sk. NoSortKey
	// makes a table of a partition key alone.
	PK, SK    string
	NoSortKey bool
	// TTL, when set, is its own TTL attribute, enabled; its sessions carry
	// it (a day from now, in epoch seconds).
	TTL string
	// Items is how many application items it holds, of five shapes.
	// Default: 300.
	Items int
	// Indexes are global secondary indexes of its own besides byEmail
	// (email) and byStatus (status, placedAt); Attributes their key
	// attributes.
	Indexes    []types.GlobalSecondaryIndex
	Attributes []types.AttributeDefinition
	// Provisioned makes it bill provisioned capacity (7 RCU, 3 WCU, and as
	// much for its indexes) instead of on demand.
	Provisioned bool
}

// AppTable is an application's table made by NewAppTable.
type AppTable struct {
	Name   string
	PK, SK string
}

// NewAppTable creates a table such as a two-year-old application has —
// its own key names, its own indexes, perhaps its own TTL — fills it with
// customers, orders, sessions, audit events and a counter, and deletes it
// when the test ends. It skips the test when the emulators are not
// available (see Main).
func NewAppTable(t testing.TB, ddb *dynamodb.Client, opts AppTableOptions) *AppTable {
	t.Helper()
	if opts.PK == "" {
		opts.PK = "pk"
	}
	if opts.SK == "" && !opts.NoSortKey {
		opts.SK = "sk"
	}
	if opts.Items == 0 {
		opts.Items = 300
	}
	a := &AppTable{Name: Unique("app"), PK: opts.PK, SK: opts.SK}
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	key := []types.KeySchemaElement{{AttributeName: aws.String(opts.PK), KeyType: types.KeyTypeHash}}
	defs := []types.AttributeDefinition{str(opts.PK), str("email"), str("status"), str("placedAt")}
	if opts.SK != "" {
		key = append(key, types.KeySchemaElement{AttributeName: aws.String(opts.SK), KeyType: types.KeyTypeRange})
		defs = append(defs, str(opts.SK))
	}
	defs = append(defs, opts.Attributes...)
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(a.Name), KeySchema: key, AttributeDefinitions: defs, BillingMode: types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: append([]types.GlobalSecondaryIndex{
			{IndexName: aws.String("byEmail"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("email"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}},
			{IndexName: aws.String("byStatus"), KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("status"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("placedAt"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"total"}}},
		}, opts.Indexes...),
	}
	if opts.Provisioned {
		in.BillingMode = types.BillingModeProvisioned
		in.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(7), WriteCapacityUnits: aws.Int64(3)}
		for i := range in.GlobalSecondaryIndexes {
			in.GlobalSecondaryIndexes[i].ProvisionedThroughput = in.ProvisionedThroughput
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := ddb.CreateTable(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(a.Name)})
	})
	require.NoError(t, dynamodb.NewTableExistsWaiter(ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.Name)}, time.Minute))
	if opts.TTL != "" {
		_, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(a.Name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(opts.TTL), Enabled: aws.Bool(true)}})
		require.NoError(t, err)
	}
	var items []map[string]types.AttributeValue
	for i := range opts.Items {
		items = append(items, a.item(i, opts.TTL))
	}
	for start := 0; start < len(items); start += 25 {
		var reqs []types.WriteRequest
		for _, it := range items[start:min(start+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		for pending := map[string][]types.WriteRequest{a.Name: reqs}; len(pending) > 0; {
			out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			require.NoError(t, err)
			pending = out.UnprocessedItems
		}
	}
	return a
}

// item is the i-th application item: one of five shapes, each with the
// types an application of some age accumulates.
func (a *AppTable) item(i int, ttl string) map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	it := map[string]types.AttributeValue{}
	keys := func(pk, sk string) {
		if a.SK == "" {
			it[a.PK] = s(pk + "|" + sk)
			return
		}
		it[a.PK], it[a.SK] = s(pk), s(sk)
	}
	customer := fmt.Sprintf("CUSTOMER#%04d", i/5)
	switch i % 5 {
	case 0:
		keys(customer, "PROFILE")
		it["email"] = s(fmt.Sprintf("c%04d@example.com", i/5))
		it["name"] = s(fmt.Sprintf("Customer %d — ünïcode", i/5))
		it["tags"] = &types.AttributeValueMemberSS{Value: []string{"b2b", "early"}}
		it["marketing"] = &types.AttributeValueMemberBOOL{Value: i%2 == 0}
		it["address"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"city": s("Lyon"), "zip": s("69002")}}
		it["createdAt"] = n(fmt.Sprintf("%d", 1_650_000_000+i))
	case 1, 2:
		keys(customer, fmt.Sprintf("ORDER#%04d", i))
		it["status"] = s([]string{"OPEN", "SHIPPED"}[i%2])
		it["placedAt"] = s(time.Unix(int64(1_660_000_000+i*60), 0).UTC().Format(time.RFC3339))
		it["total"] = n(fmt.Sprintf("%d.%02d", i, i%100))
		it["lines"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"sku": s("SKU-1"), "qty": n("2")}},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"sku": s("SKU-2"), "qty": n("1")}},
		}}
	case 3:
		keys(fmt.Sprintf("SESSION#%04d", i), "SESSION")
		it["token"] = &types.AttributeValueMemberB{Value: []byte{0, 1, 2, byte(i)}}
		if ttl != "" {
			it[ttl] = n(fmt.Sprintf("%d", time.Now().Add(24*time.Hour).Unix()))
		}
	default:
		keys(fmt.Sprintf("AUDIT#2024-%02d", i%12+1), fmt.Sprintf("EVENT#%06d", i))
		it["payload"] = &types.AttributeValueMemberB{Value: []byte(fmt.Sprintf(`{"event":%d}`, i))}
		it["reviewed"] = &types.AttributeValueMemberNULL{Value: true}
		it["scores"] = &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}}
	}
	return it
}

// Items scans the table (strongly consistent) and returns the
// application's items — none of ddbworker's (keys starting IDEMP#,
// REJECT#, DDBWORKER#) — sorted by key.
func (a *AppTable) Items(t testing.TB, ddb *dynamodb.Client) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(ddb, &dynamodb.ScanInput{TableName: aws.String(a.Name), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, it := range page.Items {
			if pk, ok := it[a.PK].(*types.AttributeValueMemberS); ok && hasAnyPrefix(pk.Value, "IDEMP#", "REJECT#", "DDBWORKER#") {
				continue
			}
			items = append(items, it)
		}
	}
	keyOf := func(it map[string]types.AttributeValue) string {
		k := it[a.PK].(*types.AttributeValueMemberS).Value
		if a.SK != "" {
			k += "\x00" + it[a.SK].(*types.AttributeValueMemberS).Value
		}
		return k
	}
	sort.Slice(items, func(i, j int) bool { return keyOf(items[i]) < keyOf(items[j]) })
	return items
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
