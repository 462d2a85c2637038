package ddbworkertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Reader serves a handler's own reads from the Existing items of the Work
// that runs it: the items its guards are judged against, so a test states
// the tables once (Before) and the handler reads what its commit meets.
// Its methods have the signatures of *dynamodb.Client's, so a handler that
// reads through an interface of them takes a *dynamodb.Client in
// production and a Reader in the kit:
//
//	type Handler struct {
//		Table string
//		DB    interface {
//			GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
//		}
//	}
//
//	h := &Handler{Table: "app", DB: ddbworkertest.Reader{}}
//
// A Reader holds nothing: it finds the items in the context Work gives the
// handler, so one Reader serves every Worker and every concurrent Work,
// each with its own items. A read with another context (one not derived
// from the handler's) is refused with ErrNoWork. It reads as DynamoDB's
// GetItem and BatchGetItem do, consistent or not alike (the items do not
// change while the handler runs): the item at the key, projected to the
// top-level attributes a ProjectionExpression names; no item when the
// table holds none there — a table the test declared nothing in is empty.
// A key whose attribute names are not the table's (as its Existing items
// name them) is refused, as DynamoDB refuses it.
type Reader struct{}

// ErrNoWork is the refusal of a Reader's read outside Work: with a context
// that is not the handler's.
var ErrNoWork = errors.New("ddbworkertest: a Reader reads the items of the Work that runs the handler: pass the handler's context")

// readsKey holds the Existing items of the Work a context is the
// handler's.
type readsKey struct{}

func withItems(ctx context.Context, items []stored) context.Context {
	return context.WithValue(ctx, readsKey{}, items)
}

// GetItem returns the Existing item at in.Key in in.TableName.
func (Reader) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	items, ok := ctx.Value(readsKey{}).([]stored)
	if !ok {
		return nil, ErrNoWork
	}
	item, err := get(items, aws.ToString(in.TableName), in.Key, in.ProjectionExpression, in.ExpressionAttributeNames)
	if err != nil {
		return nil, fmt.Errorf("ddbworkertest: GetItem: %w", err)
	}
	return &dynamodb.GetItemOutput{Item: item}, nil
}

// BatchGetItem returns the Existing items at the keys of in.RequestItems;
// nothing is left unprocessed.
func (Reader) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	items, ok := ctx.Value(readsKey{}).([]stored)
	if !ok {
		return nil, ErrNoWork
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for _, table := range slices.Sorted(maps.Keys(in.RequestItems)) {
		req := in.RequestItems[table]
		found := []map[string]types.AttributeValue{}
		for _, key := range req.Keys {
			item, err := get(items, table, key, req.ProjectionExpression, req.ExpressionAttributeNames)
			if err != nil {
				return nil, fmt.Errorf("ddbworkertest: BatchGetItem: %w", err)
			}
			if item != nil {
				found = append(found, item)
			}
		}
		out.Responses[table] = found
	}
	return out, nil
}

// get is the item at key in table (nil: none), projected to the top-level
// attributes projection names.
func get(items []stored, table string, key map[string]types.AttributeValue, projection *string, names map[string]string) (map[string]types.AttributeValue, error) {
	if table == "" || len(key) == 0 {
		return nil, errors.New("a read needs a table and a key")
	}
	for _, s := range items {
		if s.table == table && !slices.Equal(sortedNames(s.key), sortedNames(key)) {
			return nil, fmt.Errorf("ValidationException: the key %s does not match the schema of %s, whose items are keyed by %s",
				strings.Join(sortedNames(key), ", "), table, strings.Join(sortedNames(s.key), ", "))
		}
	}
	found := lookup(items, table, key)
	if found == nil {
		return nil, nil
	}
	if aws.ToString(projection) == "" {
		return maps.Clone(found), nil
	}
	out := map[string]types.AttributeValue{}
	for _, p := range strings.Split(aws.ToString(projection), ",") {
		p = strings.TrimSpace(p)
		if strings.HasPrefix(p, "#") {
			n, ok := names[p]
			if !ok {
				return nil, fmt.Errorf("ValidationException: the projection's %s is not in ExpressionAttributeNames", p)
			}
			p = n
		} else if strings.ContainsAny(p, ".[") {
			return nil, fmt.Errorf("the kit projects top-level attributes only, not %q: read the attribute and take the member", p)
		}
		if v, ok := found[p]; ok {
			out[p] = v
		}
	}
	return out, nil
}
