package ddbworkertest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

func s(v string) types.AttributeValue  { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue  { return &types.AttributeValueMemberN{Value: v} }
func b(v ...byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }
func l(v ...types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberL{Value: v}
}
func m(kv ...any) types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(types.AttributeValue)
	}
	return &types.AttributeValueMemberM{Value: out}
}

var names = map[string]string{"#a": "a", "#m": "m", "#n": "n", "#l": "l", "#k": "PK"}

var item = map[string]types.AttributeValue{"PK": s("k"), "m": m("n", n("3")), "l": l(n("7"))}

// with is item with attribute a set to v.
func with(v types.AttributeValue) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for k, x := range item {
		out[k] = x
	}
	out["a"] = v
	return out
}

// evalCases are conditions on items and what they decide. The answers
// that are not unknown are DynamoDB's: each was checked against DynamoDB
// Local (DeleteItem with the condition), and a ValidationException there
// is unknown here (the kit does not decide what DynamoDB refuses).
var evalCases = []struct {
	expr string
	item map[string]types.AttributeValue
	v    types.AttributeValue
	want truth
}{
	// No item at all.
	{"attribute_exists(#k)", nil, nil, no},
	{"attribute_not_exists(#k)", nil, nil, yes},
	{"#a = :v", nil, n("5"), no},
	{"#a <> :v", nil, n("5"), yes},
	{"#a < :v", nil, n("5"), no},
	{"NOT (#a < :v)", nil, n("5"), yes},
	{"attribute_not_exists(#a) OR #a < :v", nil, n("5"), yes},
	// The attribute is missing from the item.
	{"#a = :v", item, s("x"), no},
	{"#a <> :v", item, s("x"), yes},
	{"#a >= :v", item, n("1"), no},
	// Numbers by value.
	{"#a = :v", with(n("5")), n("5.00"), yes},
	{"#a < :v", with(n("5")), n("6"), yes},
	{"#a < :v", with(n("5")), n("5"), no},
	{"#a <= :v", with(n("5")), n("5"), yes},
	{"#a > :v", with(n("5")), n("-1e2"), yes},
	{"#a >= :v", with(n("5")), n("4"), yes},
	{"attribute_not_exists(#a) OR #a < :v", with(n("5")), n("5"), no},
	{"attribute_not_exists(#a) OR #a < :v", with(n("5")), n("6"), yes},
	// Types differ: equality false, orderings false.
	{"#a = :v", with(n("5")), s("5"), no},
	{"#a <> :v", with(n("5")), s("5"), yes},
	{"#a < :v", with(n("5")), s("6"), no},
	{"#a < :v", with(l(n("1"))), n("5"), no},
	// Strings by UTF-8 bytes, binaries by bytes.
	{"#a < :v", with(s("b")), s("é"), yes},
	{"#a > :v", with(s("b")), s(""), yes},
	{"#a < :v", with(b(1)), b(2), yes},
	// Equality of documents and sets.
	{"#a = :v", with(l(n("1"), s("x"))), l(n("1"), s("x")), yes},
	{"#a = :v", with(l(n("1"), s("x"))), l(s("x"), n("1")), no},
	{"#a = :v", with(m("y", s("z"), "x", n("1.0"))), m("x", n("1"), "y", s("z")), yes},
	{"#a = :v", with(&types.AttributeValueMemberSS{Value: []string{"p", "q"}}), &types.AttributeValueMemberSS{Value: []string{"q", "p"}}, yes},
	{"#a = :v", with(&types.AttributeValueMemberNS{Value: []string{"1", "2"}}), &types.AttributeValueMemberNS{Value: []string{"2", "1.0"}}, yes},
	{"#a = :v", with(&types.AttributeValueMemberBOOL{Value: true}), &types.AttributeValueMemberBOOL{Value: true}, yes},
	{"#a = :v", with(&types.AttributeValueMemberNULL{Value: true}), &types.AttributeValueMemberNULL{Value: true}, yes},
	// Nested paths and list indexes.
	{"#m.#n = :v", item, n("3"), yes},
	{"#m.#n < :v", item, n("3"), no},
	{"#l[0] > :v", item, n("6"), yes},
	{"#l[3] <> :v", item, n("6"), yes},
	{"attribute_exists(#m.#n)", item, nil, yes},
	{"attribute_not_exists(#l[1])", item, nil, yes},
	{"NOT attribute_exists(#a)", item, nil, yes},
	{"NOT #a = :v", item, n("1"), yes},
	// Values on both sides, literal names.
	{":v < #a", with(n("5")), n("4"), yes},
	{"a = :v AND PK = :v", with(s("k")), s("k"), yes},
	// DynamoDB refuses an ordering of a value that is not a number,
	// string or binary — even where the rest would decide.
	{"#a < :v", with(n("5")), l(n("1")), unknown},
	{"attribute_not_exists(#a) OR #a < :v", nil, &types.AttributeValueMemberBOOL{Value: true}, unknown},
	// Forms the kit does not decide.
	{"begins_with(#a, :v)", with(s("abc")), s("a"), unknown},
	{"contains(#a, :v)", with(s("abc")), s("a"), unknown},
	{"size(#a) > :v", with(s("abc")), n("1"), unknown},
	{"#a BETWEEN :v AND :v", with(n("1")), n("1"), unknown},
	{"#a IN (:v)", with(n("1")), n("1"), unknown},
	{"#a = :missing", with(n("1")), n("1"), unknown},
	// Unknown is carried through: false AND unknown is false.
	{"attribute_exists(#a) AND begins_with(#a, :v)", item, s("a"), no},
	{"attribute_not_exists(#a) OR begins_with(#a, :v)", item, s("a"), yes},
	{"attribute_exists(#a) AND begins_with(#a, :v)", with(s("abc")), s("a"), unknown},
	{"NOT begins_with(#a, :v)", with(s("abc")), s("a"), unknown},
}

func TestEvaluate(t *testing.T) {
	for _, tc := range evalCases {
		t.Run(tc.expr, func(t *testing.T) {
			c, err := parseCondition(tc.expr, names)
			require.NoError(t, err)
			values := map[string]types.AttributeValue{}
			if tc.v != nil {
				values[":v"] = tc.v
			}
			require.Equal(t, tc.want, evaluate(c, tc.item, values))
		})
	}
}

func TestRenderCondition(t *testing.T) {
	values := map[string]types.AttributeValue{":v": n("7"), ":s": s("a\"b"), ":l": l(n("1"), m("k", b(1, 2)))}
	for _, tc := range []struct{ expr, want string }{
		{"((attribute_exists (#k)) AND ((attribute_not_exists (#a)) OR (#a < :v))) AND (#m = :s)",
			`attribute_exists(PK) AND (attribute_not_exists(a) OR a < 7) AND m = "a\"b"`},
		{"(#a = :v OR #a = :s) OR NOT (#k = :l AND #k <> :v)", `a = 7 OR a = "a\"b" OR NOT (PK = [1, {k: 0x0102}] AND PK <> 7)`},
		{"NOT NOT #a = :v", "NOT NOT a = 7"},
		{"#m.#n[2].x >= :v", "m.n[2].x >= 7"},
		{"size(#a) BETWEEN :v AND :v", "size(a) BETWEEN 7 AND 7"},
		{"#a in (:v, :s)", `a IN (7, "a\"b")`},
		{"begins_with(#a, :s)", `begins_with(a, "a\"b")`},
	} {
		c, err := parseCondition(tc.expr, names)
		require.NoError(t, err, tc.expr)
		require.Equal(t, tc.want, renderCond(c, values), tc.expr)
	}
	for _, bad := range []string{"", "#a =", "#a = :v)", "(#a = :v", "#missing = :v", "#a", "#a BETWEEN :v", "#a[x] = :v", "#a ! :v", "# = :v"} {
		_, err := parseCondition(bad, names)
		require.Error(t, err, bad)
	}
	// What does not parse is still shown with its names and values.
	require.Equal(t, "a ! 7", substitute("#a ! :v", names, values))
	require.Equal(t, "SET a = 7, `odd name` = :gone", substitute("SET #a = :v,\n #o = :gone", map[string]string{"#a": "a", "#o": "odd name"}, values))
}
