package bench

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

func TestItemSize(t *testing.T) {
	tests := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string", map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CASE#1"}}, 2 + 6},
		{"number: digits/2+1", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "12345"}}, 1 + 4},
		{"number: zeros trimmed", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1000"}}, 1 + 2},
		{"bool", map[string]types.AttributeValue{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 2 + 1},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "ab"}}}}, 1 + 3 + 1 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, itemSize(tt.item)) })
	}
	require.Equal(t, 1.0, kb(1))
	require.Equal(t, 1.0, kb(1024))
	require.Equal(t, 2.0, kb(1025))
	require.Equal(t, 1.0, kb(0), "a write costs at least one unit")
}
