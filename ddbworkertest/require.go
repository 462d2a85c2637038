package ddbworkertest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker"
)

// The Require methods stop the test (t.Fatalf) when the result is not what
// they require, showing the whole Result.

// RequireApplied requires the commit to apply.
func (r *Result) RequireApplied(t testing.TB) {
	t.Helper()
	if r.Kind != Applied {
		t.Fatalf("want applied, got %s", r)
	}
}

// RequireSuperseded requires a guard to supersede the work with outcome
// (SUPERSEDED unless the guard names another) and returns the index of
// that write.
func (r *Result) RequireSuperseded(t testing.TB, outcome string) int {
	t.Helper()
	if r.Kind != Superseded || r.Outcome != outcome {
		t.Fatalf("want superseded %s, got %s", outcome, r)
	}
	return r.FailedWrite
}

// RequireDuplicate requires a single-write route's fence to find the work
// applied already.
func (r *Result) RequireDuplicate(t testing.TB) {
	t.Helper()
	if r.Kind != Duplicate {
		t.Fatalf("want duplicate, got %s", r)
	}
}

// RequireRerun requires a guard to re-run the handler and returns the index
// of that write.
func (r *Result) RequireRerun(t testing.TB) int {
	t.Helper()
	if r.Kind != Rerun {
		t.Fatalf("want rerun, got %s", r)
	}
	return r.FailedWrite
}

// RequireTerminal requires a terminal failure with code and returns it.
func (r *Result) RequireTerminal(t testing.TB, code string) *Failure {
	t.Helper()
	if r.Kind != Terminal || r.Failure.Code != code {
		t.Fatalf("want terminal %s, got %s", code, r)
	}
	return r.Failure
}

// RequireRetryable requires a retryable failure with code and returns it.
func (r *Result) RequireRetryable(t testing.TB, code string) *Failure {
	t.Helper()
	if r.Kind != Retryable || r.Failure.Code != code {
		t.Fatalf("want retryable %s, got %s", code, r)
	}
	return r.Failure
}

// RequireWrite requires a write to the item at key in table and returns
// it (the first, if there are more). A Put matches when its item has key's
// attributes with key's values.
func (r *Result) RequireWrite(t testing.TB, table string, key ddbworker.Key) Write {
	t.Helper()
	want, err := attributevalue.MarshalMap(map[string]any(key))
	if err != nil {
		t.Fatalf("ddbworkertest: RequireWrite: key: %v", err)
	}
	for _, w := range r.Writes {
		if w.Err == nil && w.Table == table && writesAt(w, want) {
			return w
		}
	}
	t.Fatalf("want a write to %s %s, got %s", table, literal(&types.AttributeValueMemberM{Value: want}), r)
	return Write{}
}

func writesAt(w Write, key map[string]types.AttributeValue) bool {
	switch it := w.Mutation.Item; {
	case it.Put != nil:
		for k, v := range key {
			if x, ok := it.Put.Item[k]; !ok || !sameKeyValue(x, v) {
				return false
			}
		}
		return len(key) > 0
	case it.Update != nil:
		return sameKey(it.Update.Key, key)
	case it.Delete != nil:
		return sameKey(it.Delete.Key, key)
	case it.ConditionCheck != nil:
		return sameKey(it.ConditionCheck.Key, key)
	}
	return false
}
