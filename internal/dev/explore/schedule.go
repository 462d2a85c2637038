package explore

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ddbworker/ddbworker/worker"
)

// Mode is how a message type commits.
type Mode string

// The commit modes a route is drawn with.
const (
	Gated       Mode = "gated"
	Fused       Mode = "fused"
	SingleWrite Mode = "single-write"
)

// The message types of the explorer's domain and the body each is sent
// in. The envelope types share one aggregate space and one version
// attribute, so that one key under two of them, out-of-order versions and
// a key reused for another payload meet on the same item.
const (
	TypeA      = "XA"    // envelope
	TypeB      = "XB"    // envelope
	TypeC      = "XC"    // envelope
	TypeEffect = "XEff"  // envelope, gated, effects.Do
	TypeOwn    = "XOwn"  // own JSON, type in the body
	TypeSNS    = "XSns"  // SNS notification of own JSON
	TypeEB     = "XEb"   // EventBridge event
	TypeAttr   = "XAttr" // own JSON, type in a message attribute
)

// Types lists the message types in registration order.
func Types() []string {
	return []string{TypeA, TypeB, TypeC, TypeEffect, TypeOwn, TypeSNS, TypeEB, TypeAttr}
}

// Kind is what a work item's handler does.
type Kind string

// Work kinds.
const (
	KindOK     Kind = "ok"     // applies
	KindPoison Kind = "poison" // fails terminal POISON every run
	KindFlaky  Kind = "flaky"  // fails retryable FLAKY on its first Flaky runs, then applies
)

// Work is one work item: what the checker accounts for.
type Work struct {
	// WID names the work's counter in its aggregate item (n_WID): how
	// often it applied.
	WID     string
	Key     string
	Type    string
	Agg     string
	Version int64
	Kind    Kind
	// Flaky is how many runs fail before one applies (KindFlaky).
	Flaky int
	// MaxAttempts is the envelope's attemptPolicy.maxBusinessAttempts (0:
	// the worker's).
	MaxAttempts int
	// Reuse names the group of works that share one key and type with
	// other payloads ("" for none): at most one of them applies.
	Reuse string
	// Pair names the other type of a key sent under two types ("").
	Pair string
	// NotBefore defers the work (attemptPolicy.notBefore) this long past
	// its first send.
	NotBefore time.Duration
	// Attrs is how many producer attributes its messages carry.
	Attrs int
	// Pad varies the payload of a reused key.
	Pad string
}

// enveloped reports whether typ's bodies are ddbworker envelopes.
func enveloped(typ string) bool {
	return typ == TypeA || typ == TypeB || typ == TypeC || typ == TypeEffect
}

// Terminal reports whether w is expected to end terminal if nothing
// reopens it: poison, or flaky past its attempts (its attemptPolicy's,
// else the workers' maxAttempts).
func (s *Schedule) Terminal(w *Work) bool {
	return w.Kind == KindPoison || (w.Kind == KindFlaky && w.Flaky >= cmp.Or(w.MaxAttempts, s.MaxAttempts))
}

// Send is one message of the stream.
type Send struct {
	At   time.Duration
	Work int // index in Schedule.Works
	// Burst sends this copy together with the previous one (a concurrent
	// duplicate).
	Burst bool
}

// FaultKind names a scheduled fault.
type FaultKind string

// Fault kinds: SDK-middleware faults per call kind (Call), proxy outages,
// host events.
const (
	FaultLost          FaultKind = "lost-response"
	FaultThrottle      FaultKind = "throttle"
	FaultThrottleKey   FaultKind = "throttle-key"
	FaultServerError   FaultKind = "5xx"
	FaultHang          FaultKind = "hang"
	FaultSQSLatency    FaultKind = "sqs-latency"
	FaultSQSError      FaultKind = "sqs-error"
	FaultOutage        FaultKind = "outage"
	FaultDeploy        FaultKind = "deploy"
	FaultCrash         FaultKind = "crash"
	FaultFailpointKill FaultKind = "failpoint-kill"
)

// Call kinds a fault may be aimed at.
const (
	CallGate       = "gate"
	CallTakeover   = "takeover"
	CallCommit     = "commit"
	CallFenced     = "fenced-write"
	CallFailure    = "failure-record"
	CallRelease    = "release"
	CallRenewal    = "renewal"
	CallEffect     = "effect"
	CallDLQSend    = "dlq-send"
	CallResend     = "resend"
	CallDelete     = "delete"
	CallVisibility = "visibility"
	CallReceive    = "receive"
)

var ddbCalls = []string{CallGate, CallTakeover, CallCommit, CallFenced, CallFailure, CallRelease, CallRenewal, CallEffect}
var sqsCalls = []string{CallDLQSend, CallResend, CallDelete, CallVisibility}

// Fault is one fault window (or, for host events, one moment).
type Fault struct {
	Kind FaultKind
	At   time.Duration
	For  time.Duration
	// Call is the call kind (SDK faults), "" for every call of the
	// service.
	Call string
	Rate float64
	// Delay is the SQS latency or the hang's length.
	Delay time.Duration
	// Mode is the outage's proxy mode: throttle, 5xx, hang.
	Mode string
	// Host is the host a deploy or crash hits (index).
	Host int
	// Failpoint is the failpoint that kills (FaultFailpointKill).
	Failpoint string
	// HotAgg is the aggregate whose calls are throttled (FaultThrottleKey).
	HotAgg string
}

func (f Fault) String() string {
	s := fmt.Sprintf("%6s %-15s", f.At.Round(10*time.Millisecond), f.Kind)
	switch f.Kind {
	case FaultDeploy, FaultCrash:
		return s + fmt.Sprintf(" host %d", f.Host)
	case FaultFailpointKill:
		return s + fmt.Sprintf(" %s rate %.2f for %s", f.Failpoint, f.Rate, f.For)
	case FaultOutage:
		return s + fmt.Sprintf(" %s for %s", f.Mode, f.For)
	case FaultSQSLatency, FaultHang:
		return s + fmt.Sprintf(" %s rate %.2f delay %s for %s", orAll(f.Call), f.Rate, f.Delay, f.For)
	case FaultThrottleKey:
		return s + fmt.Sprintf(" agg %s rate %.2f for %s", f.HotAgg, f.Rate, f.For)
	}
	return s + fmt.Sprintf(" %s rate %.2f for %s", orAll(f.Call), f.Rate, f.For)
}

func orAll(call string) string {
	if call == "" {
		return "all"
	}
	return call
}

// OpKind names an operator action.
type OpKind string

// Operator actions.
const (
	OpReopen          OpKind = "inbox-reopen"     // reopen FAILED_TERMINAL records of flaky work
	OpRedriveAll      OpKind = "dlq-redrive-all"  // ddbworker dlq redrive --all
	OpRedriveFiltered OpKind = "dlq-redrive-code" // ddbworker dlq redrive --filter code=…
	OpSQSRedrive      OpKind = "sqs-redrive"      // SQS's own redrive: body and attributes as they are
	OpSweep           OpKind = "sweep"            // the stale-lease sweeper
)

// Op is one operator action.
type Op struct {
	Kind OpKind
	At   time.Duration
	// Code filters OpRedriveFiltered.
	Code string
	// Final runs after the stream drained (the operator's round), not at
	// At.
	Final bool
}

func (o Op) String() string {
	when := fmt.Sprintf("%6s", o.At.Round(10*time.Millisecond))
	if o.Final {
		when = " after"
	}
	if o.Code != "" {
		return fmt.Sprintf("%s %s code=%s", when, o.Kind, o.Code)
	}
	return fmt.Sprintf("%s %s", when, o.Kind)
}

// Schedule is everything one seed decides.
type Schedule struct {
	Seed        uint64
	FIFO        bool
	MaxReceive  int
	Visibility  time.Duration
	Policy      worker.TerminalPolicy
	MaxAttempts int
	Modes       map[string]Mode
	// TypeAttr is the message attribute TypeAttr's route reads its type
	// from.
	TypeAttr string
	// Consecutive is the workers' HealthConfig.ConsecutiveFailures: how
	// soon the health gate trips (and parks what it holds).
	Consecutive int
	// ProviderLatency is how long the effect route's provider takes to
	// answer: a call in flight when the database goes away.
	ProviderLatency time.Duration
	Daemons         int
	Lambdas         int
	Concurrency     int
	Stream          time.Duration
	// App, when set, makes the run's table an existing application's,
	// adopted before the hosts start and written by the application
	// throughout the stream (app.go).
	App    *AppTable
	Works  []*Work
	Sends  []Send
	Faults []Fault
	Ops    []Op
}

// Hosts is the number of hosts.
func (s *Schedule) Hosts() int { return s.Daemons + s.Lambdas }

// Options shape generation (not drawn from the seed).
type Options struct {
	// Stream is how long messages keep arriving.
	Stream time.Duration
	// NoFaults turns off every fault and host event (a clean run).
	NoFaults bool
	// NoOps turns off the operator's actions.
	NoOps bool
}

// Generate draws the schedule of seed.
func Generate(seed uint64, o Options) *Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x6578706c6f726521)) // "explore!"
	s := &Schedule{Seed: seed, Stream: o.Stream, Modes: map[string]Mode{}}
	s.FIFO = r.IntN(5) == 0
	s.MaxReceive = []int{3, 3, 3, 4, 5}[r.IntN(5)]
	s.Visibility = []time.Duration{2 * time.Second, 3 * time.Second}[r.IntN(2)]
	s.Policy = []worker.TerminalPolicy{worker.PolicyDLQ, worker.PolicyDLQ, worker.PolicyDLQ, worker.PolicyRedrive, worker.PolicyRedrive, worker.PolicyQuarantine}[r.IntN(6)]
	// Business attempts end before the redrive policy's last receive: a
	// budget at or above maxReceiveCount is a misconfiguration that
	// dead-letters healthy, flaky work.
	s.MaxAttempts = min(2+r.IntN(3), s.MaxReceive-1)
	s.Concurrency = []int{2, 4, 8}[r.IntN(3)]
	_ = r.IntN(3) // drawn for the fused read ahead, since removed: every seed keeps its schedule
	s.TypeAttr = []string{"eventType", "kind", "x-event-type", "zz.type"}[r.IntN(4)]
	s.ProviderLatency = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond}[r.IntN(4)]
	modes := []Mode{Gated, Fused, SingleWrite}
	singleHeavy := r.IntN(3) == 0
	for _, t := range Types() {
		switch {
		case t == TypeEffect:
			s.Modes[t] = Gated // the effect log fences on a PROCESSING record
		case singleHeavy:
			s.Modes[t] = SingleWrite
		default:
			s.Modes[t] = modes[r.IntN(len(modes))]
		}
	}
	s.Daemons = 1 + r.IntN(3)
	if r.IntN(3) == 0 {
		s.Lambdas = 1
		if r.IntN(3) == 0 {
			s.Daemons = 0
		}
		// The function's timeout is the queue's visibility (as an event
		// source mapping requires), and the work of an invocation ends
		// worker.LambdaSettleMargin (2s) before it.
		s.Visibility = []time.Duration{4 * time.Second, 5 * time.Second}[r.IntN(2)]
	}
	// Drawn from a stream of their own, so that adding a draw here leaves
	// every other seed's schedule as it was.
	h := rand.New(rand.NewPCG(seed, 0x6865616c7468)) // "health"
	s.Consecutive = []int{1, 2, 3}[h.IntN(3)]
	// So is the adopted variant (a quarter of the seeds).
	s.App = drawApp(rand.New(rand.NewPCG(seed, 0x61646f7074))) // "adopt"
	s.generateWork(r)
	if !o.NoFaults {
		s.generateFaults(r)
	}
	if !o.NoOps {
		s.generateOps(r)
	}
	return s
}

func (s *Schedule) generateWork(r *rand.Rand) {
	n := max(12, int(s.Stream/time.Second)*3)
	aggs := max(4, n/3)
	// The effect-log type and the attribute-routed type are drawn twice
	// as often: each meets a feature (a held lease, a DLQ copy's
	// attributes) the others do not.
	types := append(Types(), TypeEffect, TypeAttr)
	next := func() string { return fmt.Sprintf("w%04d", len(s.Works)) }
	version := map[string]int64{}
	add := func(w *Work) int {
		if w.WID == "" {
			w.WID = next()
		}
		s.Works = append(s.Works, w)
		return len(s.Works) - 1
	}
	newWork := func(typ string) *Work {
		agg := fmt.Sprintf("a%03d", r.IntN(aggs))
		version[agg] += 2
		w := &Work{Type: typ, Agg: agg, Version: version[agg], Kind: KindOK}
		w.WID = next()
		w.Key = "k-" + w.WID
		switch x := r.IntN(20); {
		case x < 2:
			w.Kind = KindPoison
		case x < 6:
			w.Kind = KindFlaky
			w.MaxAttempts = min(1+r.IntN(3), s.MaxReceive-1)
			w.Flaky = 1 + r.IntN(3)
		}
		if r.IntN(12) == 0 {
			w.NotBefore = time.Duration(1+r.IntN(3)) * time.Second
		}
		if !enveloped(typ) {
			// An adapted body has no attemptPolicy: the worker's
			// MaxAttempts applies, and it cannot be deferred.
			w.MaxAttempts, w.NotBefore = 0, 0
		}
		if typ == TypeAttr || r.IntN(4) == 0 {
			w.Attrs = r.IntN(10)
		}
		w.Pad = fmt.Sprintf("%x", r.Uint32())
		return w
	}
	var sends []Send
	for len(s.Works) < n {
		typ := types[r.IntN(len(types))]
		w := newWork(typ)
		i := add(w)
		// First sends in the order the versions were drawn (jittered):
		// only the deliberately out-of-order sends below arrive late.
		first := time.Duration(int64(s.Stream) * int64(i) / int64(n))
		first += time.Duration(r.Int64N(int64(200 * time.Millisecond)))
		sends = append(sends, Send{At: first, Work: i})
		switch x := r.IntN(10); {
		case x < 3: // a duplicate, later
			sends = append(sends, Send{At: first + time.Duration(r.Int64N(int64(3*time.Second))), Work: i})
		case x < 5: // a concurrent duplicate
			sends = append(sends, Send{At: first, Work: i, Burst: true})
		}
		switch x := r.IntN(12); {
		case x < 2 && typ != TypeEffect: // the same key under another type, same aggregate, newer version
			others := []string{TypeA, TypeB, TypeC, TypeOwn, TypeSNS, TypeEB, TypeAttr}
			other := others[r.IntN(len(others))]
			if other == typ {
				break
			}
			version[w.Agg] += 2
			p := &Work{Type: other, Agg: w.Agg, Version: version[w.Agg], Kind: KindOK, Key: w.Key, Pair: typ, Pad: fmt.Sprintf("%x", r.Uint32())}
			w.Pair = other
			if other == TypeAttr {
				p.Attrs = r.IntN(10)
			}
			j := add(p)
			sends = append(sends, Send{At: first + time.Duration(r.Int64N(int64(2*time.Second))), Work: j})
		case x < 3 && w.Kind == KindOK: // the key reused for another payload, same version
			w.Reuse = w.Key
			p := *w
			p.WID, p.Pad = next(), fmt.Sprintf("%x", r.Uint32())
			j := add(&p)
			sends = append(sends, Send{At: first + time.Duration(r.Int64N(int64(2*time.Second))), Work: j})
		case x < 5: // out of order: an older version of the aggregate, sent after
			o := newWork(types[r.IntN(len(types))])
			o.Agg, o.Version = w.Agg, w.Version-1
			if o.Version < 1 {
				break
			}
			j := add(o)
			sends = append(sends, Send{At: first + time.Duration(r.Int64N(int64(time.Second))), Work: j})
		}
	}
	slices.SortStableFunc(sends, func(a, b Send) int { return int(a.At - b.At) })
	s.Sends = sends
}

func (s *Schedule) generateFaults(r *rand.Rand) {
	window := func() (time.Duration, time.Duration) {
		at := time.Duration(r.Int64N(int64(max(s.Stream, time.Second))))
		return at, time.Duration(1+r.IntN(6)) * time.Second
	}
	rate := func() float64 { return []float64{0.05, 0.1, 0.2, 0.35}[r.IntN(4)] }
	n := 3 + r.IntN(5)
	for range n {
		at, span := window()
		var f Fault
		switch x := r.IntN(17); {
		case x < 4:
			f = Fault{Kind: FaultLost, Call: pick(r, append(slices.Clone(ddbCalls), sqsCalls...)), Rate: rate()}
		case x < 5:
			f = Fault{Kind: FaultThrottle, Call: pick(r, append([]string{""}, ddbCalls...)), Rate: rate()}
		case x < 6:
			f = Fault{Kind: FaultThrottleKey, HotAgg: s.Works[r.IntN(len(s.Works))].Agg, Rate: 0.5 + 0.5*r.Float64()}
		case x < 7:
			f = Fault{Kind: FaultServerError, Call: pick(r, append([]string{""}, ddbCalls...)), Rate: rate()}
		case x < 8:
			f = Fault{Kind: FaultHang, Call: pick(r, ddbCalls), Rate: rate(), Delay: s.Visibility}
		case x < 10:
			f = Fault{Kind: FaultSQSLatency, Rate: 0.5 + 0.5*r.Float64(), Delay: time.Duration(30+r.IntN(121)) * time.Millisecond}
			span = time.Duration(3+r.IntN(10)) * time.Second
		case x < 11:
			f = Fault{Kind: FaultSQSError, Call: pick(r, sqsCalls), Rate: rate()}
		case x < 14:
			// An outage of the database: longer than the lease, so a
			// parked delivery's held lease expires, and long enough that
			// messages reach their last receive.
			f = Fault{Kind: FaultOutage, Mode: pick(r, []string{"throttle", "5xx", "hang"})}
			span = s.Visibility + time.Duration(1+r.IntN(8))*time.Second
		case x < 15:
			f = Fault{Kind: FaultDeploy, Host: r.IntN(s.Hosts())}
			span = 0
		case x < 16:
			f = Fault{Kind: FaultCrash, Host: r.IntN(s.Hosts())}
			span = 0
		default:
			f = Fault{Kind: FaultFailpointKill, Failpoint: pick(r, []string{"after-gate", "after-commit", "before-delete", "mid-batch", "effect-before-call", "effect-after-call", "effect-before-commit"}), Rate: 0.2}
		}
		f.At, f.For = at, span
		s.Faults = append(s.Faults, f)
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	// Traffic meets the outages: effect-log work sent just before each
	// begins, so that a delivery holds its lease (its provider call in
	// flight) when the database goes away.
	for _, f := range s.Faults {
		if f.Kind != FaultOutage {
			continue
		}
		for range 2 {
			agg := fmt.Sprintf("o%03d", len(s.Works))
			w := &Work{WID: fmt.Sprintf("w%04d", len(s.Works)), Type: TypeEffect, Agg: agg, Version: 2, Kind: KindOK, Pad: fmt.Sprintf("%x", r.Uint32())}
			w.Key = "k-" + w.WID
			s.Works = append(s.Works, w)
			lead := time.Duration(r.Int64N(int64(300*time.Millisecond + s.ProviderLatency)))
			s.Sends = append(s.Sends, Send{At: max(0, f.At-lead), Work: len(s.Works) - 1})
		}
	}
	slices.SortStableFunc(s.Sends, func(a, b Send) int { return int(a.At - b.At) })
}

func (s *Schedule) generateOps(r *rand.Rand) {
	kinds := []OpKind{OpReopen, OpRedriveAll, OpRedriveFiltered, OpSQSRedrive, OpSQSRedrive, OpReopen, OpSweep}
	codes := []string{"MAX_ATTEMPTS_EXCEEDED", "POISON", "IDEMPOTENCY_HASH_MISMATCH", "(none: redrive policy)"}
	for range r.IntN(3) {
		o := Op{Kind: pick(r, kinds), At: s.Stream/2 + time.Duration(r.Int64N(int64(max(s.Stream, time.Second))))}
		if o.Kind == OpRedriveFiltered {
			o.Code = pick(r, codes)
		}
		s.Ops = append(s.Ops, o)
	}
	// The operator's round once the stream drained: most often "reopen
	// what was fixed, then redrive", sometimes SQS's own redrive.
	for range 1 + r.IntN(3) {
		o := Op{Kind: pick(r, kinds), Final: true}
		if o.Kind == OpRedriveFiltered {
			o.Code = pick(r, codes)
		}
		s.Ops = append(s.Ops, o)
	}
	slices.SortStableFunc(s.Ops, func(a, b Op) int {
		switch {
		case a.Final != b.Final:
			if a.Final {
				return 1
			}
			return -1
		}
		return int(a.At - b.At)
	})
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// Print writes the schedule.
func (s *Schedule) Print(w io.Writer) {
	q := "standard"
	if s.FIFO {
		q = "FIFO"
	}
	fmt.Fprintf(w, "seed %d: %s queue, maxReceiveCount %d, visibility %s, terminal policy %s, maxAttempts %d, concurrency %d\n",
		s.Seed, q, s.MaxReceive, s.Visibility, s.Policy, s.MaxAttempts, s.Concurrency)
	fmt.Fprintf(w, "  hosts: %d daemon, %d lambda; health gate trips after %d failed calls; type attribute %q; effect provider latency %s\n",
		s.Daemons, s.Lambdas, s.Consecutive, s.TypeAttr, s.ProviderLatency)
	var modes []string
	for _, t := range Types() {
		modes = append(modes, t+"="+string(s.Modes[t]))
	}
	fmt.Fprintf(w, "  routes: %s\n", strings.Join(modes, " "))
	if s.App != nil {
		fmt.Fprintf(w, "  table: %s\n", s.App)
	} else {
		fmt.Fprintf(w, "  table: a new ddbworker table (tables.Ensure)\n")
	}
	kinds := map[string]int{}
	for _, wk := range s.Works {
		kinds[string(wk.Kind)]++
		if wk.Reuse != "" {
			kinds["reuse"]++
		}
		if wk.Pair != "" {
			kinds["two-types"]++
		}
		if wk.NotBefore > 0 {
			kinds["deferred"]++
		}
	}
	fmt.Fprintf(w, "  work: %d items, %d messages over %s; %v\n", len(s.Works), len(s.Sends), s.Stream, kinds)
	for _, f := range s.Faults {
		fmt.Fprintf(w, "  fault %s\n", f)
	}
	for _, o := range s.Ops {
		fmt.Fprintf(w, "  op    %s\n", o)
	}
}

// CrossesSingleWritePair reports whether the schedule sends one key under
// two message types that both commit single-write.
func (s *Schedule) CrossesSingleWritePair() bool {
	for _, w := range s.Works {
		if w.Pair != "" && s.Modes[w.Type] == SingleWrite && s.Modes[w.Pair] == SingleWrite {
			return true
		}
	}
	return false
}
