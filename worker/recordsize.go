package worker

import (
	"strings"
	"sync"
	"time"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

// recordWarnBytes is the size at which the worker warns that a message
// type's inbox records approach DynamoDB's 1 KB write unit: over it, each
// write of the record costs two units instead of one.
const recordWarnBytes = 900

// recordSizes measures the COMPLETED inbox record of each work item as
// DynamoDB counts its size (tables.ItemSize), and says once per message
// type when one approaches a write-unit boundary.
//
// The size of a record is a fixed part, set by the message type and by
// which of the work's strings are set, plus the length of each of those
// strings (each is stored once): the fixed part is measured once per
// type and shape by encoding a record, and a work item's size is that
// plus its strings' lengths — exact, without encoding every record.
type recordSizes struct {
	store inbox.Store
	owner string
	mu    sync.Mutex
	fixed map[recordShape]int
	// warned holds the message types already warned about.
	warned map[string]bool
}

// recordShape is a message type and which of a work item's optional
// strings are set.
type recordShape struct {
	messageType string
	set         uint8
}

// maxRecordShapes bounds the cache: message types are the registered ones
// (bounded), times 2⁵ shapes.
const maxRecordShapes = 4096

func newRecordSizes(store inbox.Store, owner string) *recordSizes {
	return &recordSizes{store: store, owner: owner, fixed: map[recordShape]int{}, warned: map[string]bool{}}
}

// optional are the work's strings a record may omit, in a fixed order.
func optional(wk *inbox.Work) [5]string {
	return [5]string{wk.AggregateType, wk.AggregateID, wk.CorrelationID, wk.CausationID, wk.Producer}
}

// size is the byte size of w's COMPLETED record, and whether this is the
// first record of its type at or over recordWarnBytes.
func (s *recordSizes) size(w *inbox.Work) (bytes int, warn bool) {
	opt := optional(w)
	shape := recordShape{messageType: w.MessageType}
	variable := len(w.Key) + len(w.RequestHash)
	for i, v := range opt {
		if v != "" {
			shape.set |= 1 << i
			variable += len(v)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fixed, ok := s.fixed[shape]
	if !ok {
		fixed = s.measure(w.MessageType, w.SchemaVersion, shape.set)
		if len(s.fixed) >= maxRecordShapes {
			clear(s.fixed)
		}
		s.fixed[shape] = fixed
	}
	bytes = fixed + variable
	if bytes >= recordWarnBytes && !s.warned[w.MessageType] {
		s.warned[w.MessageType] = true
		warn = true
	}
	return bytes, warn
}

// measure encodes a COMPLETED record of messageType whose set strings are
// one byte long and whose key and hash are empty, and returns its size
// less those bytes: the fixed part of the shape.
func (s *recordSizes) measure(messageType string, schema int, set uint8) int {
	one := func(i int) string {
		if set&(1<<i) != 0 {
			return "x"
		}
		return ""
	}
	w := inbox.Work{MessageType: messageType, SchemaVersion: schema, Key: "k", RequestHash: "h",
		AggregateType: one(0), AggregateID: one(1), CorrelationID: one(2), CausationID: one(3), Producer: one(4)}
	now := time.Now()
	rec := inbox.NewRecord(&w, now)
	rec.LeaseToken, rec.LeaseOwner = strings.Repeat("0", 32), s.owner
	n := tables.ItemSize(s.store.Encode(s.store.CompletedRecord(rec, now, inbox.OutcomeApplied, "")))
	for _, v := range optional(&w) {
		n -= len(v)
	}
	return n - len(w.Key) - len(w.RequestHash)
}
