// Package adaptive owns the worker's adaptive concurrency limit: AIMD
// (additive increase, multiplicative decrease) on top of a latency signal.
//
//   - Overload (a throttle, a 5xx, a timeout) cuts the limit by Decrease, at
//     most once per Cooldown, so a burst of failures from one moment counts
//     once.
//   - Commit latency rising above LatencyTolerance times its long-run
//     baseline cuts the limit gently (by 10 %, same cooldown) and stops
//     growth: the database is slowing before it throttles.
//   - Each success adds 1/limit (one slot per limit successes: one per
//     round of work) — or a whole slot per success below the slow-start
//     threshold after Restart, so a recovery ramps up quickly but not in one
//     burst.
//
// The limit stays within [Min, Max]. It does not hold slots (internal/slots
// does) and does not decide what an overload is (the worker does).
package adaptive
