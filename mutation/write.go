package mutation

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
)

// VerdictKind is what a failed domain guard means.
type VerdictKind int

const (
	// Supersede: the write is obsolete (e.g. an older version arrived late).
	// The inbox completes with Verdict.Outcome and no domain write applies.
	Supersede VerdictKind = iota + 1
	// Retry: optimistic concurrency lost; re-run the handler (bounded), then
	// fail retryably with CONCURRENT_MODIFICATION.
	Retry
	// Fail: the work can never apply; terminal with Verdict.Code.
	Fail
	// Duplicate: the work applied already (a single-write route's fence
	// in the item names it); nothing of the commit applies and the work
	// completes as applied.
	Duplicate
)

// Verdict is a guard's judgement on its failed condition.
type Verdict struct {
	Kind    VerdictKind
	Outcome string // Supersede: the inbox outcome; default SUPERSEDED
	Code    string // Fail: the terminal code
	Message string
}

// Judge judges a write's guards on the item as it was before the commit
// (old; nil when there was none): failed says whether one of them fails
// on it, and v is then the policy of the first that does. It decides from
// old alone, as DynamoDB evaluates the write's condition: the commit asks
// it about the item a cancelled transaction returns, and the test kit
// (ddbworkertest) about the items a test declares.
type Judge func(old map[string]types.AttributeValue) (v Verdict, failed bool)

// Write is one domain write of a commit, rendered: its transaction item and
// the judge of its guards. ddbworker.Write.Mutation renders one; a write
// with no judge (a hand-built ddbworker.Raw write) is unjudged, and its
// failed condition means Retry.
type Write struct {
	Item  types.TransactWriteItem
	Judge Judge
	// Fence is set for a Put or Update with one version guard: what a
	// single-write route needs to fence it (see Fenced).
	Fence *Fence
}

// verdict is what w's failed condition means given the item as it was:
// its judge's verdict, or Retry when no guard fails on old (the item
// changed between the commit and this judgement) or w has no judge.
func (w Write) verdict(old map[string]types.AttributeValue) Verdict {
	if w.Judge != nil {
		if v, failed := w.Judge(old); failed {
			return v
		}
	}
	return Verdict{Kind: Retry}
}

// CheckWrites is the commit's check of its domain writes before any call:
// at most MaxWrites, each setting exactly one of Put, Update, Delete and
// ConditionCheck. A refusal is a terminal INVALID_HANDLER_RESULT
// *failure.Error wrapping ErrInvalidWrite.
func CheckWrites(writes []Write) error {
	if len(writes) > MaxWrites {
		return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("%w: %d domain writes, at most %d", ErrInvalidWrite, len(writes), MaxWrites))
	}
	for i, w := range writes {
		if err := w.Check(); err != nil {
			return failure.Wrap(failure.Terminal, failure.CodeInvalidResult, fmt.Errorf("write %d: %w", i, err))
		}
	}
	return nil
}

// Check is the commit's check of one write: it sets exactly one of Put,
// Update, Delete and ConditionCheck. A refusal wraps ErrInvalidWrite.
func (w Write) Check() error {
	n := 0
	for _, set := range []bool{w.Item.Put != nil, w.Item.Update != nil, w.Item.Delete != nil, w.Item.ConditionCheck != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: it sets %d of Put, Update, Delete and ConditionCheck, not exactly one", ErrInvalidWrite, n)
	}
	return nil
}
