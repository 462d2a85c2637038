package inbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
)

// CheckKeyLimits: every key an inbox record derives from a work item must
// fit DynamoDB's limits (partition keys 2,048 bytes, sort keys 1,024). The
// tightest is the aggregate index's sort key: a 24-byte timestamp, two '#',
// the message type (up to maxFieldBytes) and the idempotency key (up to
// maxKeyBytes): 26 + field + key <= 1,024.
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
		{"aggregate sort key exactly 1,024 bytes", 742, 256, true, ""},
		{"aggregate sort key one byte over", 743, 256, false, "aggregate index sort key of 1025 bytes"},
		{"long keys: (1000, 256)", 1000, 256, false, "aggregate index sort key"},
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
