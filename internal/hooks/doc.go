// Package hooks carries the engine's test and development hooks — named
// failpoints where a chaos harness may crash the process, and switches a
// benchmark uses to measure the worker without its health gate or its
// adaptive concurrency — to a worker through the context given to Run.
//
// It is internal: no program outside this module can set a hook, so none
// is reachable in a user's binary or in the production ddbworker (the
// fault flags that set them are the development binary's,
// internal/dev/devcmd). It owns nothing else.
package hooks
