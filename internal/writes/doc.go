// Package writes is the engine's way into a ddbworker.Write, which shows no
// engine type in its API: Raw wraps a hand-built mutation.Write (a
// condition the builders do not cover, such as effects' pending
// completion), and Mutation renders a Write as the commit's transaction
// item and the judge of its guards (the worker, the test kit and the
// benchmark call it). Package ddbworker registers both when it
// initialises; every caller names ddbworker.Write, so it has.
package writes
