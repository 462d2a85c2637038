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
// single-write route fences: which work set each of its fenced version
// attributes.
type itemFence struct {
	Table string            `json:"table"`
	Item  map[string]string `json:"item"`
	Found bool              `json:"found"`
	// Fences are the item's fences, one per version attribute a
	// single-write route guards it by, by that attribute's name (empty:
	// no fence).
	Fences []versionFence `json:"fences"`
	// NamesKey says whether one of them names the key asked about.
	NamesKey bool `json:"namesKey"`
}

// versionFence is one version attribute's fence: the idempotency key,
// message type and request hash of the work that set the attribute's
// current value. Only that work: the fence of an older value was
// overwritten.
type versionFence struct {
	// VersionAttr is the version attribute (the fence's attributes are
	// mutation.FenceKeyAttr, FenceTypeAttr and FenceHashAttr of it).
	VersionAttr string `json:"versionAttr"`
	// Version is its value, as DynamoDB holds the number ("" when absent).
	Version string `json:"version,omitempty"`
	Key     string `json:"fenceKey"`
	// Type is the work's message type ("": a fence written before fences
	// named the type).
	Type string `json:"fenceType,omitempty"`
	Hash string `json:"fenceHash,omitempty"`
	// NamesKey says whether Key is the key asked about (and Type the type
	// asked about, when one was and the fence names one).
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

// readFence reads the domain item at key in table (strongly consistent,
// the whole item: the fences' names depend on the version attributes) and
// its fences, as they bear on idempotency key asked (of message type
// askedType; "": any).
func readFence(ctx context.Context, ddb interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}, table string, key map[string]string, asked, askedType string) (*itemFence, error) {
	av := make(map[string]types.AttributeValue, len(key))
	for k, v := range key {
		av[k] = &types.AttributeValueMemberS{Value: v}
	}
	out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: av, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read item %s of table %s: %w", formatItemKey(key), table, err)
	}
	f := &itemFence{Table: table, Item: key, Found: out.Item != nil, Fences: []versionFence{}}
	for _, name := range slices.Sorted(maps.Keys(out.Item)) {
		attr, ok := strings.CutPrefix(name, mutation.FenceKeyPrefix)
		k, isS := out.Item[name].(*types.AttributeValueMemberS)
		if !ok || !isS || attr == "" {
			continue
		}
		vf := versionFence{VersionAttr: attr, Key: k.Value}
		if t, ok := out.Item[mutation.FenceTypeAttr(attr)].(*types.AttributeValueMemberS); ok {
			vf.Type = t.Value
		}
		vf.NamesKey = k.Value == asked && (askedType == "" || vf.Type == "" || vf.Type == askedType)
		if h, ok := out.Item[mutation.FenceHashAttr(attr)].(*types.AttributeValueMemberS); ok {
			vf.Hash = h.Value
		}
		if v, ok := out.Item[attr].(*types.AttributeValueMemberN); ok {
			vf.Version = v.Value
		}
		f.Fences = append(f.Fences, vf)
		f.NamesKey = f.NamesKey || vf.NamesKey
	}
	return f, nil
}

func formatItemKey(key map[string]string) string {
	parts := make([]string, 0, len(key))
	for _, k := range slices.Sorted(maps.Keys(key)) {
		parts = append(parts, k+"="+key[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// printFence says, for people, what the item's fences tell of key. A
// fence names only the work of its version attribute's current value: of
// work it does not name, it cannot say whether it applied earlier.
func printFence(w io.Writer, f *itemFence, key string) {
	where := fmt.Sprintf("item %s of table %s", formatItemKey(f.Item), f.Table)
	switch {
	case !f.Found:
		fmt.Fprintf(w, "%s: no such item\n", where)
		return
	case len(f.Fences) == 0:
		fmt.Fprintf(w, "%s: no fence (%s<version attribute>): no single-write route has written it\n", where, mutation.FenceKeyPrefix)
		return
	}
	for _, vf := range f.Fences {
		at := vf.VersionAttr
		if vf.Version != "" {
			at += " " + vf.Version
		}
		of := "" // the work's type, when the fence names one
		if vf.Type != "" {
			of = " of type " + vf.Type
		}
		if vf.NamesKey {
			fmt.Fprintf(w, "%s: its %s fence names %s%s (request hash %s): that work set %s, the current value — applied\n", where, vf.VersionAttr, key, of, vf.Hash, at)
			continue
		}
		fmt.Fprintf(w, "%s: its %s fence names other work, %s%s (request hash %s), which set %s: the fence names only the newest version's work, so it cannot tell whether %s applied before that version (and was overtaken), was superseded, or has not applied; its inbox records above say what failed\n",
			where, vf.VersionAttr, vf.Key, of, vf.Hash, at, key)
	}
}
