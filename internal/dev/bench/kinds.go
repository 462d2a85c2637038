package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/worker"
)

// Kind is a worker under measurement.
type Kind string

// The workers compared.
const (
	KindNaive   Kind = "naive"   // UpdateItem, then DeleteMessage; no inbox
	KindDefault Kind = "default" // gate PutItem + transactional commit
	KindFused   Kind = "fused"   // one transaction with the inbox record
	KindSingle  Kind = "single"  // one transaction: the fenced update and a check that no inbox record exists (ddbworker.SingleWrite)
	// KindSingleSkip is single with ddbworker.SkipInboxCheck: one fenced
	// conditional UpdateItem, no check of the inbox.
	KindSingleSkip Kind = "single-skip"
)

// kindOrder is the default list of kinds, in the order a sweep runs them:
// naive first, the others' throughput is read against it.
var kindOrder = []Kind{KindNaive, KindDefault, KindFused, KindSingle, KindSingleSkip}

// spec is everything that differs between the kinds, so that a new kind
// is one entry of kinds: how it consumes the benchmark's messages, what the
// bare loop of its ceiling sends, and what a message costs in AWS terms.
type spec struct {
	// route registers the kind's handler of CaseNoteRecorded on a worker's
	// registry; nil: the kind runs no worker but the bare loop, preparing
	// each message's calls as it comes (naive).
	route func(reg *ddbworker.Registry, table string) error
	// config adjusts the worker's configuration (nil: none).
	config func(*worker.Config)
	// prepare builds the calls the kind sends for one work item through the
	// library's own gate, handler and committer: what its ceiling sends.
	prepare func(table string, env *envelope.Envelope) (*prepared, error)
	// bare sends a prepared work item's calls; false keeps the message.
	bare func(ctx context.Context, ddb *dynamodb.Client, p *prepared) bool
	// records is how many inbox records a work item leaves (units reads
	// the completed one when there is one).
	records int
	// inOrder says the handler is caseflow's NoteInOrder: a note older
	// than its case's is superseded, and the case item must end with its
	// newest note's version.
	inOrder bool
	// units is what a message of a phase cost in AWS terms, on average:
	// from the sizes of the items the run wrote and what the phase sent and
	// applied (usage), so that it holds for a phase of fresh messages, of
	// duplicates, or of both mixed.
	units func(s sizes, u usage) capacity
}

var kinds = map[Kind]spec{
	KindNaive: {prepare: prepareNaive, bare: bareUpdate, units: func(s sizes, u usage) capacity {
		// An unconditional UpdateItem per message; a duplicate is applied
		// again.
		return capacity{Write: u.Updates * kb(s.Domain)}
	}},
	KindDefault: {
		route: func(reg *ddbworker.Registry, table string) error {
			return (&caseflow.Handlers{Table: table}).Register(reg)
		},
		prepare: prepareDefault, bare: bareGated, records: 1,
		units: func(s sizes, u usage) capacity {
			// The gate's PutItem (and, for new work, its aggregate index
			// entry), then a transaction of the domain update and the inbox
			// flip, each item charged twice, by the larger of its before
			// and after images. A duplicate is the gate's failed condition,
			// one more for each time it found its original in flight.
			gate := kb(s.Processing)
			return capacity{Write: u.Puts*gate + u.Work*kb(s.Index) + u.Tx*(2*kb(s.Domain)+2*math.Max(kb(s.Completed), gate))}
		},
	},
	KindFused: {
		route: func(reg *ddbworker.Registry, table string) error {
			return (&caseflow.Handlers{Table: table}).Register(reg, ddbworker.Fused())
		},
		prepare: prepareFused, bare: bareTransaction, records: 1,
		units: fusedUnits,
	},
	KindSingle: {
		route: func(reg *ddbworker.Registry, table string) error {
			return reg.Register(caseflow.TypeNote, ddbworker.JSON((&caseflow.Handlers{Table: table}).NoteInOrder), ddbworker.SingleWrite())
		},
		prepare: prepareSingle, bare: bareTransaction, inOrder: true,
		units: func(s sizes, u usage) capacity {
			// One transaction of the fenced update and the check that the
			// work has no inbox record (absent: charged as 1 KB), each
			// charged twice; a duplicate's or a late note's cancelled
			// transaction is counted as if it had applied (an upper bound).
			return capacity{Write: u.Tx * (2*kb(s.Domain) + 2)}
		},
	},
	KindSingleSkip: {
		route: func(reg *ddbworker.Registry, table string) error {
			return reg.Register(caseflow.TypeNote, ddbworker.JSON((&caseflow.Handlers{Table: table}).NoteInOrder),
				ddbworker.SingleWrite(), ddbworker.SkipInboxCheck())
		},
		prepare: prepareSingleSkip, bare: bareUpdate, inOrder: true,
		units: func(s sizes, u usage) capacity {
			// One conditional UpdateItem with the fence in the item; a
			// duplicate's or a late note's failed condition is charged by
			// the item's size all the same.
			return capacity{Write: u.Updates * kb(s.Domain)}
		},
	},
}

// fusedUnits: each transaction writes the domain update and the COMPLETED
// record; new work's also writes the record's index entry, once. A
// duplicate's transaction is cancelled, counted as if it had applied (an
// upper bound). The transactions per message are the worker's own,
// whatever the phase's mix. (Reads, eventually consistent, each charged as
// a read of the record, were the read ahead's, since removed: none now.)
func fusedUnits(s sizes, u usage) capacity {
	tx := 2*kb(s.Domain) + 2*kb(s.Completed)
	return capacity{Write: u.Tx*tx + u.Work*kb(s.Index), Read: u.Reads * readUnits(s.Completed, false)}
}

// usage is what a phase's worker (or bare loop) sent and applied, per
// message of the phase, as its meter counted it.
type usage struct {
	// Puts, Updates and Tx are its PutItem, UpdateItem and
	// TransactWriteItems calls.
	Puts, Updates, Tx float64
	// Reads are the keys its BatchGetItems read (the fused read ahead).
	Reads float64
	// Work is the share of the phase's messages that carried new work,
	// each applied once (read back): 1 fresh, 0 duplicates, mixed the
	// share of fresh messages.
	Work float64
}

// usageOf reads a phase's usage from its meter's counts.
func usageOf(p Phase) usage {
	n := float64(max(1, p.Messages))
	per := func(op string) float64 { return float64(p.Calls["DynamoDB."+op]) / n }
	return usage{Puts: per("PutItem"), Updates: per("UpdateItem"), Tx: per("TransactWriteItems"),
		Reads: float64(p.ReadKeys) / n, Work: float64(p.Work) / n}
}

// kindOf looks a kind up.
func kindOf(k Kind) (spec, error) {
	s, ok := kinds[k]
	if !ok {
		return spec{}, fmt.Errorf("bench: unknown worker %q (%s)", k, strings.Join(KindNames(), ", "))
	}
	return s, nil
}

// sizes are the items a run wrote, by DynamoDB's item-size rules (bytes).
type sizes struct {
	// Domain is the case item as the run left it.
	Domain int
	// Completed is the COMPLETED inbox record (0: the kind writes none).
	Completed int
	// Processing is the PROCESSING record the gate writes: the completed
	// one without its completion attributes, with a lease expiry.
	Processing int
	// Index is the record's aggregate index entry (KEYS_ONLY).
	Index int
}

// capacity is what a message costs in AWS capacity units. A write costs 1
// write unit per started KB of the item (the larger of its before and after
// images), a transactional write 2, and a write whose condition fails is
// charged all the same; a strongly consistent read costs 1 read unit per
// started 4 KB (readUnits), an eventually consistent one half of it, a
// transactional one 2.
type capacity struct {
	Write, Read float64
}

// readUnits are the read units of reading an item of size bytes: 1 per
// started 4 KB, strongly consistent; half of it eventually consistent. A
// batch read is charged item by item.
func readUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		return u / 2
	}
	return u
}

// KindNames are the kinds a benchmark runs by default, in order.
func KindNames() []string {
	names := make([]string, len(kindOrder))
	for i, k := range kindOrder {
		names[i] = string(k)
	}
	return names
}
