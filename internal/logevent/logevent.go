package logevent

// The worker's delivery log line's message (msg) is its event: one stable name per
// outcome, all starting with Prefix, so a log query selects one
// outcome by name and every delivery by the prefix. The line's result
// field holds the outcome itself (a handler's own outcome, such as
// already_recorded, is logged as completed with that result).
const (
	Prefix     = "worker_message_"
	Completed  = Prefix + "completed" // applied, or a handler's own outcome: its writes committed
	Duplicate  = Prefix + "duplicate"
	Superseded = Prefix + "superseded"
	InFlight   = Prefix + "in_flight"
	Retry      = Prefix + "retry"
	Terminal   = Prefix + "terminal"
	Deferred   = Prefix + "deferred"
	LeaseLost  = Prefix + "lease_lost"
	Released   = Prefix + "released"
	Parked     = Prefix + "parked"
)
