package mutation

import (
	"fmt"

	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/failure"
)

// The fence's judgement of an item, by key and message type as the inbox
// names work, and of an item an older worker fenced (key and hash, no
// type): names is the fence's part of the condition (read on the item),
// fenceVerdict what the item as it was says of the work.
func TestFenceVerdict(t *testing.T) {
	f := &Fence{Attr: "v", Version: 3}
	s := Stamp{Key: "k1", Type: "A", Hash: "v2:aa"}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// item is an item at version v (""), its fence naming key, typ and
	// hash (each "": absent — a typ "" is an older worker's fence).
	item := func(v, key, typ, hash string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{"PK": str("CASE#1")}
		if v != "" {
			it["v"] = &types.AttributeValueMemberN{Value: v}
		}
		for attr, val := range map[string]string{FenceKeyAttr("v"): key, FenceTypeAttr("v"): typ, FenceHashAttr("v"): hash} {
			if val != "" {
				it[attr] = str(val)
			}
		}
		return it
	}
	mismatch := func(msg string) Verdict { return Verdict{Kind: Fail, Code: failure.CodeHashMismatch, Message: msg} }
	const reused = "v %s of the item was set by this key's work with another request hash: the key was reused for other work"
	const older = "v %s of the item was set by this key's work with another request hash, under a fence that does not name its message type: the key was reused for other work, or this is another type's work under the key, which that fence cannot tell"
	for _, tc := range []struct {
		name    string
		old     map[string]types.AttributeValue
		named   bool // the fence names s's work: the condition refuses the item
		decided bool
		want    Verdict
	}{
		{"no item", nil, false, false, Verdict{}},
		{"no fence, an older version", item("2", "", "", ""), false, false, Verdict{}},
		{"no fence, its version", item("3", "", "", ""), false, true, mismatch("v 3 of the item was set by work the item does not name")},
		{"no fence, a newer version", item("4", "", "", ""), false, true, Verdict{Kind: Supersede}},

		{"its work: duplicate", item("3", "k1", "A", "v2:aa"), true, true, Verdict{Kind: Duplicate}},
		{"its work under a newer version: duplicate", item("5", "k1", "A", "v2:aa"), true, true, Verdict{Kind: Duplicate}},
		{"its work under an older version: duplicate", item("2", "k1", "A", "v2:aa"), true, true, Verdict{Kind: Duplicate}},
		{"its key and type, another hash: key reuse", item("3", "k1", "A", "v2:bb"), true, true, mismatch(fmt.Sprintf(reused, "3"))},
		{"its key and type, another hash, an older version: key reuse", item("2", "k1", "A", "v2:bb"), true, true, mismatch(fmt.Sprintf(reused, "2"))},

		{"its key, another type, an older version: not its work", item("2", "k1", "B", "v2:bb"), false, false, Verdict{}},
		{"its key, another type, its version: the version guard's", item("3", "k1", "B", "v2:bb"), false, false, Verdict{}},
		{"its key, another type, a newer version: superseded", item("4", "k1", "B", "v2:bb"), false, true, Verdict{Kind: Supersede}},
		{"its key, another type with its hash: not its work", item("3", "k1", "B", "v2:aa"), false, false, Verdict{}},

		{"another key, an older version", item("2", "k0", "A", "v2:00"), false, false, Verdict{}},
		{"another key, its version: mismatch", item("3", "k0", "A", "v2:00"), false, true, mismatch(`v 3 of the item was set by the work of key "k0"`)},
		{"another key, a newer version: superseded", item("4", "k0", "A", "v2:00"), false, true, Verdict{Kind: Supersede}},

		// An older worker's fence names a key and a hash only.
		{"an older fence, its hash: duplicate", item("3", "k1", "", "v2:aa"), true, true, Verdict{Kind: Duplicate}},
		{"an older fence, its hash, a newer version: duplicate", item("4", "k1", "", "v2:aa"), true, true, Verdict{Kind: Duplicate}},
		{"an older fence, its key, another hash: mismatch", item("3", "k1", "", "v2:bb"), true, true, mismatch(fmt.Sprintf(older, "3"))},
		{"an older fence, its key, another hash, an older version: mismatch", item("2", "k1", "", "v2:bb"), true, true, mismatch(fmt.Sprintf(older, "2"))},
		{"an older fence of another key, an older version", item("2", "k0", "", "v2:00"), false, false, Verdict{}},
		{"an older fence of another key, its version: mismatch", item("3", "k0", "", "v2:00"), false, true, mismatch(`v 3 of the item was set by the work of key "k0"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.named, names(tc.old, f, s), "names")
			v, decided := fenceVerdict(tc.old, f, s)
			require.Equal(t, tc.decided, decided)
			require.Equal(t, tc.want, v)
		})
	}
}
