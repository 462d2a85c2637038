// Package calltime owns the time a handler spent waiting on the calls
// ddbworker's own code made for it — the effect log's reads and writes
// (package effects) — so that the worker can tell, when the work's
// deadline ends a run, whether the handler ran long or the database was
// slow under it. The worker puts a Clock in the handler's context; code
// that calls AWS on the handler's behalf times each call with Start.
//
// It is internal: a handler's own calls to its own tables are the
// handler's time, and nothing outside this module can add to the clock.
package calltime
