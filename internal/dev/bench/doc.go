// Package bench measures ddbworker against the floor: for each worker —
// the naive baseline (UpdateItem then DeleteMessage, no inbox), ddbworker's
// default path (gate + transactional commit), its fused commit and
// its single-write route (one conditional UpdateItem fenced in the domain
// item) — it runs the same message set at the same concurrency twice: once
// through the worker and once through a bare loop that issues exactly the
// DynamoDB and SQS calls that worker needs per message, prepared in
// advance, with no worker around them (the ceiling). It reports
// throughput, efficiency (worker ÷ ceiling), latency, CPU and memory per
// message, calls per fresh and per duplicate message (or per message of a
// mixed run) counted by SDK middleware, WCU both as DynamoDB Local reports
// them and computed in AWS terms from item sizes and the calls made (with
// read units, likewise), and work applied twice or lost, read back from the
// case items. The kinds differ in one place (kinds.go): a new kind is one
// entry there.
//
// The messages are case notes (caseflow.NoteRecorded), each carrying its
// version among its case's notes; a share arrives late (after the case's
// next note): the single-write route's handler keeps the newest note and
// supersedes those, the others apply every note. A share of each run,
// swept over Config.Duplicates, are duplicates: earlier work re-sent in a
// new SQS message.
//
// A measurement runs in two phases by default, each through a consumer of
// its own on a queue of its own — every fresh message, then every
// duplicate — so that a fresh message's and a duplicate's costs are
// counted apart. Mixed (Config.Mix), it is one phase whose stream
// interleaves each duplicate some fresh messages after its original
// (MixDistanceMin to MixDistanceMax), as production sends them: the
// per-message figures are then over all messages (Result.All), and only
// this mode shows what depends on the mix, the fused read ahead above all
// (it reads while duplicates arrive: a fresh phase turns it off, a
// duplicate phase keeps it on). The ceiling runs the same stream, and
// work lost or applied twice is read back alike in both modes.
//
// The throttled scenario (Config.Throttle) runs the default worker against
// DynamoDB through an internal/ddbproxy that throttles a share of the
// requests at random, once as shipped (database health gate and adaptive
// concurrency limit) and once with both turned off through internal/hooks,
// on a queue whose redrive policy dead-letters after 10 receives. It
// reports the requests per applied message as the proxy saw them,
// throughput, probes, time paused, the limit, dead-lettered messages,
// business attempts used and work applied twice (read back).
//
// It runs against whatever endpoints it is given (the local emulators in
// `ddbworker-dev bench`); it owns no protocol logic.
package bench
