package hooks

import "context"

// Named failpoints: places where a chaos harness may crash the process.
const (
	AfterGate    = "after-gate"
	AfterCommit  = "after-commit"
	BeforeDelete = "before-delete"
	MidBatch     = "mid-batch"
	// The effect log's (package effects), inside a handler's Do: after the
	// effect is recorded STARTED and before the provider is called; after
	// the provider answered and before its answer is recorded; after the
	// completion is recorded and before the work's commit.
	EffectBeforeCall   = "effect-before-call"
	EffectAfterCall    = "effect-after-call"
	EffectBeforeCommit = "effect-before-commit"
)

// Failpoints of the outbox relay (package relay).
const (
	RelayAfterSend        = "relay-after-send"
	RelayAfterMark        = "relay-after-mark"
	RelayBeforeCheckpoint = "relay-before-checkpoint"
)

// RelayFailpoints lists the relay's failpoint names in a stable order.
func RelayFailpoints() []string {
	return []string{RelayAfterSend, RelayAfterMark, RelayBeforeCheckpoint}
}

// Failpoints lists the failpoint names in a stable order.
func Failpoints() []string { return []string{AfterGate, AfterCommit, BeforeDelete, MidBatch} }

// EffectFailpoints lists the effect log's failpoint names in a stable
// order (they fire only in handlers that call effects.Log.Do).
func EffectFailpoints() []string {
	return []string{EffectBeforeCall, EffectAfterCall, EffectBeforeCommit}
}

// Hooks are a Run's development hooks. The zero value is production.
type Hooks struct {
	// Failpoint is called at each named failpoint.
	Failpoint func(name string)
	// NoHealthGate turns the database health gate off (a benchmark's
	// baseline: what the worker did before it had one).
	NoHealthGate bool
	// FixedConcurrency keeps the concurrency limit at its ceiling.
	FixedConcurrency bool
}

type key struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h Hooks) context.Context { return context.WithValue(ctx, key{}, h) }

// From returns the hooks ctx carries (the zero value when none).
func From(ctx context.Context) Hooks {
	h, _ := ctx.Value(key{}).(Hooks)
	return h
}
