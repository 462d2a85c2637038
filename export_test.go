package ddbworker

import "github.com/ddbworker/ddbworker/mutation"

// Mutation is the rendering the engine reaches through internal/writes,
// for this package's tests.
func (w Write) Mutation() (mutation.Write, error) { return w.toMutation() }
