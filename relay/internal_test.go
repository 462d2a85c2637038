package relay

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"
)

// Parents before children: a shard whose parent is still in the stream
// and not read to its end waits; a trimmed parent does not hold it back.
func TestClaimable(t *testing.T) {
	shard := func(id, parent string) types.Shard {
		s := types.Shard{ShardId: aws.String(id)}
		if parent != "" {
			s.ParentShardId = aws.String(parent)
		}
		return s
	}
	// p → c1, c2 (a split); c1 → g; orphan's parent was trimmed.
	stream := []types.Shard{shard("p", ""), shard("c1", "p"), shard("c2", "p"), shard("g", "c1"), shard("orphan", "trimmed")}
	tests := []struct {
		name           string
		ended, running map[string]bool
		want           []string
	}{
		{name: "first start", want: []string{"p", "orphan"}},
		{name: "parent being read", running: map[string]bool{"p": true}, want: []string{"orphan"}},
		{name: "parent finished", ended: map[string]bool{"p": true}, want: []string{"c1", "c2", "orphan"}},
		{name: "one child finished", ended: map[string]bool{"p": true, "c1": true}, running: map[string]bool{"c2": true, "orphan": true}, want: []string{"g"}},
		{name: "all finished", ended: map[string]bool{"p": true, "c1": true, "c2": true, "g": true, "orphan": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range claimable(stream, tt.ended, tt.running) {
				got = append(got, aws.ToString(s.ShardId))
			}
			require.Equal(t, tt.want, got)
		})
	}
}
