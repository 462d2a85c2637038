package ddbworkertest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// A condition is shown with its names and values resolved and only the
// parentheses its precedence needs; nothing else of it changes.
func TestRenderCondition(t *testing.T) {
	names := map[string]string{"#a": "a", "#m": "m", "#n": "n", "#k": "PK", "#o": "odd name"}
	values := map[string]types.AttributeValue{
		":v": &types.AttributeValueMemberN{Value: "7"},
		":s": &types.AttributeValueMemberS{Value: "a) OR (b  c"},
		":l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberB{Value: []byte{1, 2}}}},
	}
	for _, tc := range []struct{ expr, want string }{
		// As the expression builder writes them.
		{"((attribute_exists (#k)) AND ((attribute_not_exists (#a)) OR (#a < :v))) AND (#m = :s)",
			`attribute_exists(PK) AND (attribute_not_exists(a) OR a < 7) AND m = "a) OR (b  c"`},
		{"(attribute_not_exists (#a)) OR (#a < :v)", "attribute_not_exists(a) OR a < 7"},
		{"((#a = :v) OR (#a = :s)) OR (NOT ((#k = :l) AND (#k <> :v)))", `a = 7 OR a = "a) OR (b  c" OR NOT (PK = [1, 0x0102] AND PK <> 7)`},
		{"((#a = :v) OR (#m = :v)) AND (#k = :v)", "(a = 7 OR m = 7) AND PK = 7"},
		{"(#k = :v) AND ((#a = :v) OR (#m = :v))", "PK = 7 AND (a = 7 OR m = 7)"},
		{"NOT (attribute_exists (#a))", "NOT attribute_exists(a)"},
		{"NOT ((#a = :v) OR (#m = :v))", "NOT (a = 7 OR m = 7)"},
		{"(#a BETWEEN :v AND :v) AND (#m IN (:v, :s))", `a BETWEEN 7 AND 7 AND m IN (7, "a) OR (b  c")`},
		{"(begins_with (#a, :s)) AND (size (#m.#n[2]) > :v)", `begins_with(a, "a) OR (b  c") AND size(m.n[2]) > 7`},
		// Written by hand.
		{"NOT NOT #a = :v", "NOT NOT a = 7"},
		{"(#a = :v OR #o = :v) AND #k = :v", "(a = 7 OR `odd name` = 7) AND PK = 7"},
		{"#a = :v AND (#m = :v AND #k = :v)", "a = 7 AND m = 7 AND PK = 7"},
		// Unbalanced: shown as it is.
		{"(#a = :v", "(a = 7"},
		{"#a = :v)", "a = 7)"},
	} {
		require.Equal(t, tc.want, substitute(tidy(tc.expr), names, values), tc.expr)
	}
	require.Equal(t, "SET a = 7, `odd name` = :gone", substitute("SET #a = :v,\n #o = :gone", names, values))
}
