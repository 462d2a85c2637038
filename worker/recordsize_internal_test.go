package worker

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

// The size a recordSizes predicts is the size of the record the inbox
// writes, for any lengths and any set of optional strings; the warning
// comes once per type, at 900 bytes.
func TestRecordSizes(t *testing.T) {
	store, err := inbox.Store{Table: "t"}.WithDefaults()
	require.NoError(t, err)
	s := newRecordSizes(store, "host-1/1234")
	rng := rand.New(rand.NewPCG(1, 2))
	str := func(n int) string { return strings.Repeat("a", n) }
	for range 300 {
		w := inbox.Work{Key: str(1 + rng.IntN(256)), MessageType: "Type" + str(rng.IntN(96)), RequestHash: "v2:" + str(64), SchemaVersion: 1}
		for i, p := range []*string{&w.AggregateType, &w.AggregateID, &w.CorrelationID, &w.CausationID, &w.Producer} {
			if rng.IntN(3) > 0 || i < 2 {
				*p = str(1 + rng.IntN(64))
			}
		}
		now := time.Now()
		rec := inbox.NewRecord(&w, now)
		rec.LeaseToken, rec.LeaseOwner = strings.Repeat("f", 32), "host-1/1234"
		want := tables.ItemSize(store.Encode(store.CompletedRecord(rec, now, inbox.OutcomeApplied, "")))
		got, _ := s.size(&w)
		require.Equal(t, want, got, "%+v", w)
	}

	s = newRecordSizes(store, "host-1/1234")
	small := inbox.Work{Key: "k-1", MessageType: "Small", RequestHash: "v2:" + str(64), AggregateType: "Case", AggregateID: "c1"}
	n, warn := s.size(&small)
	require.Less(t, n, recordWarnBytes)
	require.False(t, warn)
	big := small
	big.MessageType, big.Key, big.CorrelationID = "Big", str(300), str(300)
	n, warn = s.size(&big)
	require.GreaterOrEqual(t, n, recordWarnBytes)
	require.True(t, warn, "the first record of a type over 900 bytes warns")
	_, warn = s.size(&big)
	require.False(t, warn, "once per type")
}
