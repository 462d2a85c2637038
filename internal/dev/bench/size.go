package bench

import (
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemSize is an item's size by DynamoDB's rules: each attribute's name
// plus its value — strings and binaries by length, numbers by significant
// digits (about one byte per two digits, plus one), booleans and nulls one
// byte, lists and maps three bytes plus one per element plus their contents.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	digits := strings.Trim(strings.TrimLeft(strings.Split(strings.TrimLeft(s, "-+"), "e")[0], "0"), ".")
	digits = strings.ReplaceAll(digits, ".", "")
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return 1
	}
	return int(math.Ceil(float64(len(digits))/2)) + 1
}

// kb is the write units of an item of size bytes: one per started KB.
func kb(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// indexEntrySize is a KEYS_ONLY index entry: the table keys and the index keys.
func indexEntrySize(item map[string]types.AttributeValue, keys ...string) int {
	n := 0
	for _, k := range keys {
		if v, ok := item[k]; ok {
			n += len(k) + valueSize(v)
		}
	}
	return n
}
