// Package writes is the engine's way into a ddbworker.Write, which shows no
// engine type in its API: Raw wraps a hand-built mutation.Write (a
// condition the builders do not cover, such as effects' pending
// completion), and Mutation renders a Write as the commit's transaction
// item and the judge of its guards (the worker, the test kit and the
// benchmark call it). Package ddbworker registers both when it
// initialises; every caller names ddbworker.Write, so it has.
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
