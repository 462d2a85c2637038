package writes

import "github.com/ddbworker/ddbworker/mutation"

var (
	raw    func(mutation.Write) any
	render func(any) (mutation.Write, error)
)

// Register is package ddbworker's, once, at init.
func Register(wrap func(mutation.Write) any, mutationOf func(any) (mutation.Write, error)) {
	raw, render = wrap, mutationOf
}

// Raw wraps w as a W, a ddbworker.Write: the worker commits it as it is,
// and the test kit judges it by its policy only (its judge, or none: as if
// the condition held). Without a judge, a failed condition re-runs the
// handler.
func Raw[W any](w mutation.Write) W { return raw(w).(W) }

// Mutation renders w, a ddbworker.Write, as the commit's transaction item,
// built through feature/dynamodb/expression, and the judge of its guards,
// which names the first guard that fails on the item as it was. A Put or
// Update with exactly one NewerVersion guard also carries what a
// single-write route fences it with (mutation.Write.Fence).
func Mutation(w any) (mutation.Write, error) { return render(w) }
