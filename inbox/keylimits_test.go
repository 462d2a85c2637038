package inbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
)

// CheckKeyLimits: every key an inbox record derives from a work item must
// fit DynamoDB's limits (partition keys 2,048 bytes, sort keys 1,024): the
// record's keys, the aggregate index's partition key (its sort key is a
// 24-byte timestamp: since 0.9 it repeats neither the type nor the key,
// which the KEYS_ONLY index carries beside it).
func TestCheckKeyLimits(t *testing.T) {
	tests := []struct {
		name             string
		maxKey, maxField int
		ok               bool
		mentions         string
	}{
		{"the decoder's defaults", envelope.DefaultMaxKeyBytes, envelope.DefaultMaxFieldBytes, true, ""},
		{"(512, 256)", 512, 256, true, ""},
		{"tiny limits", 1, 1, true, ""},
		{"keys the aggregate sort key once limited to 742 bytes", 743, 256, true, ""},
		{"long keys: (2042, 256)", 2042, 256, true, ""},
		{"long fields: (512, 1100)", 512, 1100, false, "sort key of 1107 bytes"},
		{"fields over half a partition key", 1, 1022, false, "aggregate index key of 2049 bytes"},
		{"keys over a partition key", 2043, 1, false, "partition key of 2049 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := inbox.CheckKeyLimits(tc.maxKey, tc.maxField)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.ErrorContains(t, err, tc.mentions)
			require.ErrorContains(t, err, "DynamoDB allows")
		})
	}
}
