package relay_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/internal/testenv"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/relay"
)

// Regression (issue 24, tenants kept): the relay sent no MessageGroupId
// to a standard queue, so an outbox message lost its tenant on the way.
// An outbox event's tenant is its message's MessageGroupId on a standard
// queue — published from the stream (Run) and by the sweep alike; a
// tenant another writer stored that SQS would refuse goes as its SHA-256
// (one tenant per value, never a refused record); a record without one
// goes without. On a FIFO queue the aggregate stays the group.
func TestRelayKeepsTheTenant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fifo  bool
		sweep bool
	}{
		{"standard queue, stream", false, false},
		{"standard queue, sweep", false, true},
		{"FIFO queue, stream", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.fifo)
			groups := &testenv.MessageGroups{}
			tenants := map[string]string{"a": "acct-1", "b": "acct-2", "c": "", "d": "acme corp"}
			var ids []string
			for _, agg := range []string{"a", "b", "c", "d"} {
				for n := 1; n <= 2; n++ {
					e := event(agg, n)
					tenant := tenants[agg]
					if agg == "d" {
						tenant = "placeholder" // package outbox refuses "acme corp": written below as other code would
					}
					put, err := w.outbox.Put(context.Background(), outbox.Event{Envelope: e, Tenant: tenant})
					require.NoError(t, err)
					if agg == "d" {
						put.Put.Item[attr.OutboxTenant] = &types.AttributeValueMemberS{Value: tenants["d"]}
					}
					_, err = w.env.DynamoDB.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}})
					require.NoError(t, err)
					ids = append(ids, e.MessageID)
				}
			}
			now := time.Now().Add(time.Hour)
			r, err := relay.New(relay.Deps{DynamoDB: w.env.DynamoDB, Streams: w.streams, SQS: sqs.NewFromConfig(w.env.AWS, groups.Options), Metrics: metricstest.New()},
				relay.Config{Table: w.env.Table, QueueURL: w.env.Queues.URL, LeaseDuration: 3 * time.Second, PollInterval: 50 * time.Millisecond,
					DiscoveryInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second, SweepAge: 30 * time.Minute, Now: func() time.Time { return now }})
			require.NoError(t, err)
			if tc.sweep {
				res, err := r.Sweep(context.Background())
				require.NoError(t, err)
				require.Equal(t, 8, res.Published)
			} else {
				w.run(r)
				testenv.Eventually(t, 30*time.Second, func() bool { return w.allPublished(ids) })
			}

			got := map[string]string{}
			for _, s := range groups.Sent(w.env.Queues.URL) {
				got[eventID(s.Body)] = aws.ToString(s.GroupID)
			}
			sum := sha256.Sum256([]byte("acme corp"))
			want := map[string]string{}
			for _, agg := range []string{"a", "b", "c", "d"} {
				for n := 1; n <= 2; n++ {
					g := map[string]string{"a": "acct-1", "b": "acct-2", "c": "", "d": hex.EncodeToString(sum[:])}[agg]
					if tc.fifo {
						g = agg
					}
					want[event(agg, n).MessageID] = g
				}
			}
			require.Equal(t, want, got)
		})
	}
}
