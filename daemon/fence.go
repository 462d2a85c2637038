package daemon

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/mutation"
)

// itemFence is what `inbox get KEY --item …` shows of a domain item a
// single-write route fences: which work set its version.
type itemFence struct {
	Table string            `json:"table"`
	Item  map[string]string `json:"item"`
	Found bool              `json:"found"`
	// Key and Hash are the fence: the idempotency key and the request
	// hash of the work that set the item's version (empty: no fence).
	Key  string `json:"fenceKey,omitempty"`
	Hash string `json:"fenceHash,omitempty"`
	// NamesKey says whether the fence names the key asked about.
	NamesKey bool `json:"namesKey"`
}

// parseItemKey reads --item's NAME=VALUE pairs: the domain item's key
// attributes, as strings.
func parseItemKey(pairs []string) (map[string]string, error) {
	key := map[string]string{}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--item %q: want NAME=VALUE (a key attribute of the domain item, a string)", p)
		}
		if _, dup := key[name]; dup {
			return nil, fmt.Errorf("--item %s given twice", name)
		}
		key[name] = value
	}
	return key, nil
}

// readFence reads the domain item at key in table (strongly consistent)
// and its fence, as it bears on idempotency key asked.
func readFence(ctx context.Context, ddb interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}, table string, key map[string]string, asked string) (*itemFence, error) {
	av := make(map[string]types.AttributeValue, len(key))
	for k, v := range key {
		av[k] = &types.AttributeValueMemberS{Value: v}
	}
	out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: av, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#k, #h"), ExpressionAttributeNames: map[string]string{"#k": mutation.FenceKeyAttr, "#h": mutation.FenceHashAttr}})
	if err != nil {
		return nil, fmt.Errorf("read item %s of table %s: %w", formatItemKey(key), table, err)
	}
	f := &itemFence{Table: table, Item: key, Found: out.Item != nil}
	if s, ok := out.Item[mutation.FenceKeyAttr].(*types.AttributeValueMemberS); ok {
		f.Key = s.Value
	}
	if s, ok := out.Item[mutation.FenceHashAttr].(*types.AttributeValueMemberS); ok {
		f.Hash = s.Value
	}
	f.NamesKey = f.Key != "" && f.Key == asked
	return f, nil
}

func formatItemKey(key map[string]string) string {
	parts := make([]string, 0, len(key))
	for _, k := range slices.Sorted(maps.Keys(key)) {
		parts = append(parts, k+"="+key[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// printFence says, for people, what the item's fence tells of key.
func printFence(w io.Writer, f *itemFence, key string) {
	where := fmt.Sprintf("item %s of table %s", formatItemKey(f.Item), f.Table)
	switch {
	case !f.Found:
		fmt.Fprintf(w, "%s: no such item\n", where)
	case f.Key == "":
		fmt.Fprintf(w, "%s: no fence (%s): no single-write route has written it\n", where, mutation.FenceKeyAttr)
	case f.NamesKey:
		fmt.Fprintf(w, "%s: its fence names %s (request hash %s): that work set the item's current version — applied\n", where, key, f.Hash)
	default:
		fmt.Fprintf(w, "%s: its fence names other work, %s (request hash %s): %s did not set the current version — it applied before it, was superseded, or has not applied; its inbox records above say what failed\n",
			where, f.Key, f.Hash, key)
	}
}
