package sqsbatch_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
)

// entry is a caller's own entry type: Split needs only its size.
type entry struct {
	id   int
	size int
}

func sizeOf(e entry) int { return e.size }

// checkSplit requires what Split promises: every entry exactly once, in
// order; no empty batch; no batch over a limit unless it is one entry
// larger than the byte limit; and no needless cut (the next batch's first
// entry did not fit in the batch before it).
func checkSplit(t *testing.T, entries []entry, l sqsbatch.Limits, batches [][]entry) {
	t.Helper()
	maxEntries, maxBytes := l.Entries, l.Bytes
	if maxEntries <= 0 || maxEntries > sqsbatch.MaxEntries {
		maxEntries = sqsbatch.MaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = sqsbatch.MaxBatchBytes
	}
	var flat []entry
	for b, batch := range batches {
		require.NotEmpty(t, batch, "batch %d", b)
		require.LessOrEqual(t, len(batch), maxEntries, "batch %d", b)
		total := 0
		for _, e := range batch {
			total += e.size
		}
		if total > maxBytes {
			require.Len(t, batch, 1, "batch %d is over %d bytes (%d) with more than one entry", b, maxBytes, total)
			require.Greater(t, batch[0].size, maxBytes)
		}
		if b > 0 {
			prev := batches[b-1]
			prevTotal := 0
			for _, e := range prev {
				prevTotal += e.size
			}
			require.False(t, len(prev) < maxEntries && prevTotal+batch[0].size <= maxBytes,
				"batch %d's first entry would have fitted in batch %d", b, b-1)
		}
		flat = append(flat, batch...)
	}
	if len(entries) == 0 {
		require.Empty(t, flat)
		return
	}
	require.Equal(t, entries, flat, "every entry exactly once, in order")
}

func entries(sizes ...int) []entry {
	out := make([]entry, len(sizes))
	for i, s := range sizes {
		out[i] = entry{id: i, size: s}
	}
	return out
}

func ids(batches [][]entry) [][]int {
	var out [][]int
	for _, b := range batches {
		var ids []int
		for _, e := range b {
			ids = append(ids, e.id)
		}
		out = append(out, ids)
	}
	return out
}

func TestSplit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		sizes  []int
		limits sqsbatch.Limits
		want   [][]int // entry ids per batch
	}{
		{"none", nil, sqsbatch.Limits{}, nil},
		{"one", []int{10}, sqsbatch.Limits{}, [][]int{{0}}},
		{"ten entries per call", make([]int, 23), sqsbatch.Limits{}, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {20, 21, 22}}},
		{"fewer entries per call", make([]int, 5), sqsbatch.Limits{Entries: 2}, [][]int{{0, 1}, {2, 3}, {4}}},
		{"more than ten entries is ten", make([]int, 11), sqsbatch.Limits{Entries: 50}, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}}},
		{"bytes: exactly the limit fits", []int{60, 40, 1}, sqsbatch.Limits{Bytes: 100}, [][]int{{0, 1}, {2}}},
		{"bytes: one over starts a new batch", []int{60, 41, 1}, sqsbatch.Limits{Bytes: 100}, [][]int{{0}, {1, 2}}},
		{"an oversized entry first goes alone", []int{150, 1, 1}, sqsbatch.Limits{Bytes: 100}, [][]int{{0}, {1, 2}}},
		{"an oversized entry between others goes alone", []int{10, 150, 10}, sqsbatch.Limits{Bytes: 100}, [][]int{{0}, {1}, {2}}},
		{"oversized entries in a row each go alone", []int{150, 150}, sqsbatch.Limits{Bytes: 100}, [][]int{{0}, {1}}},
		{"default: 1 MiB per call", []int{mib - 100, 100, 1}, sqsbatch.Limits{}, [][]int{{0, 1}, {2}}},
		{"a near-1 MiB message alone at 1 MiB", []int{100, mib - 50, 100, 100}, sqsbatch.Limits{Bytes: sqsbatch.MaxBatchBytes}, [][]int{{0}, {1}, {2, 3}}},
		{"portable: 256 KiB per call", []int{200 << 10, 100 << 10, 100 << 10, 56 << 10}, sqsbatch.Limits{Bytes: sqsbatch.PortableBatchBytes}, [][]int{{0}, {1, 2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := entries(tc.sizes...)
			calls := 0
			got := sqsbatch.Split(es, func(e entry) int { calls++; return e.size }, tc.limits)
			require.Equal(t, tc.want, ids(got))
			require.Equal(t, len(es), calls, "size is called once per entry")
			checkSplit(t, es, tc.limits, got)
		})
	}
}

// A batch is a subslice that cannot grow into the next one.
func TestSplitBatchesDoNotAlias(t *testing.T) {
	es := entries(1, 1, 1, 1)
	got := sqsbatch.Split(es, sizeOf, sqsbatch.Limits{Entries: 2})
	require.Len(t, got, 2)
	_ = append(got[0], entry{id: 99})
	require.Equal(t, entries(1, 1, 1, 1), es)
}

func TestFits(t *testing.T) {
	l := sqsbatch.Limits{Bytes: 100}
	require.True(t, l.Fits(0, 0, 1000), "a batch's first entry is always admitted")
	require.True(t, l.Fits(1, 50, 50))
	require.False(t, l.Fits(1, 50, 51))
	require.True(t, l.Fits(9, 0, 0))
	require.False(t, l.Fits(10, 0, 0), "at most ten entries")
	require.False(t, sqsbatch.Limits{Entries: 3}.Fits(3, 0, 0))
	require.True(t, sqsbatch.Limits{}.Fits(1, sqsbatch.MaxBatchBytes-1, 1), "zero Bytes: SQS's 1 MiB")
	require.False(t, sqsbatch.Limits{}.Fits(1, sqsbatch.MaxBatchBytes-1, 2))
}

// MessageSize counts as SQS does: the body, and each attribute's name,
// data type and value (string or binary), in bytes (not characters).
func TestMessageSize(t *testing.T) {
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	require.Equal(t, 0, sqsbatch.MessageSize("", nil))
	require.Equal(t, 6, sqsbatch.MessageSize("héllo", nil), "bytes, not characters")
	require.Equal(t, 4+len("tenant")+len("String")+len("acme"), sqsbatch.MessageSize("body", map[string]types.MessageAttributeValue{"tenant": str("acme")}))
	attrs := map[string]types.MessageAttributeValue{
		"ddbworker.firstSentAt": {DataType: aws.String("Number"), StringValue: aws.String("1767225600000")},
		"blob":                  {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
		"custom":                {DataType: aws.String("String.tenant"), StringValue: aws.String(strings.Repeat("é", 3))},
	}
	require.Equal(t, 21+6+13, sqsbatch.AttributeSize("ddbworker.firstSentAt", attrs["ddbworker.firstSentAt"]))
	require.Equal(t, 4+6+3, sqsbatch.AttributeSize("blob", attrs["blob"]))
	require.Equal(t, 6+13+6, sqsbatch.AttributeSize("custom", attrs["custom"]))
	require.Equal(t, 2+40+13+25, sqsbatch.MessageSize("{}", attrs))
}

// FuzzSplit: whatever the sizes and limits, every entry appears exactly
// once, in order, and no batch breaks a limit unless it is a single
// oversized entry.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{}, 0, 0)
	f.Add([]byte{0, 1, 0, 2, 0, 3}, 2, 4)
	f.Add([]byte{255, 255, 0, 1, 0, 1, 255, 255, 0, 0}, 10, 1000)
	f.Add([]byte{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0}, 0, 0)
	f.Fuzz(func(t *testing.T, data []byte, maxEntries, maxBytes int) {
		var sizes []int
		for len(data) >= 2 {
			// Sizes up to 64 KiB, scaled by 32 so that some pass 1 MiB.
			sizes = append(sizes, int(binary.BigEndian.Uint16(data))*32)
			data = data[2:]
		}
		l := sqsbatch.Limits{Entries: maxEntries % 20, Bytes: maxBytes % (2 << 20)}
		es := entries(sizes...)
		checkSplit(t, es, l, sqsbatch.Split(es, sizeOf, l))
	})
}
