package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/stale"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// leasePolicy of the measured workers; also the queues' visibility timeout,
// which bounds how long a message of a broken-off receive stalls.
var leasePolicy = stale.Policy{Lease: 10 * time.Second}

// The defaults of Config (the throttled scenario's are in throttle.go),
// which the bench command's flags read.
const (
	DefaultMessages        = 2000
	DefaultDuplicateRatio  = 0.25
	DefaultLateRatio       = 0.1
	DefaultSizeConcurrency = 16
	DefaultNoteBytes       = 660
)

// Config shapes a benchmark.
type Config struct {
	// Messages per run (fresh + duplicates). Default: DefaultMessages.
	Messages int
	// Duplicates is the sweep of duplicate ratios: each run's share of
	// duplicates (earlier work re-sent in a new SQS message), each within
	// [0, 1). At every concurrency, every ratio runs every kind. Default:
	// DefaultDuplicateRatio alone.
	Duplicates []float64
	// Mix runs each measurement as one phase whose stream interleaves the
	// duplicates among the fresh messages, as production does: each is sent
	// MixDistanceMin to MixDistanceMax fresh messages after its original
	// (drawn uniformly; at the end of a stream too short for that), so most
	// arrive after their original committed and a few while it is in
	// flight. The per-message figures are then over all messages (Result's
	// All). Default (false): two phases per measurement, each through a
	// consumer of its own on a queue of its own — every fresh message, then
	// every duplicate — so that their costs are counted apart (Result's
	// Fresh and Duplicate); the fused read ahead, which runs only while
	// duplicates arrive, sees 0 % of them, then 100 %.
	Mix bool
	// LateRatio is the share of each run's fresh messages that are late: a
	// case's note sent after its next one (NoteInOrder supersedes it; the
	// other handlers apply every note). Within [0, 0.5]; negative: none.
	// Default: DefaultLateRatio.
	LateRatio float64
	// Concurrency sweep. Default: 1, 4, 16, 64.
	Concurrency []int
	// Sizes sweep (messages per run, default worker, SizeConcurrency), on
	// one table so the inbox grows run after run. Default: none.
	Sizes []int
	// SizeConcurrency of the size sweep. Default: DefaultSizeConcurrency.
	SizeConcurrency int
	// BatchSize per receive. Default: the worker's (min(10, concurrency)).
	BatchSize int
	// Kinds to run. Default: naive, default, fused, single, single-skip.
	Kinds []Kind
	// NoteBytes is the note that makes the case item about 1 KB — the
	// single-write fence and note version included. Default: DefaultNoteBytes.
	NoteBytes int
	// KeyBytes is the length of every idempotency key (padded). Default:
	// 0, the keys as generated (about 30 bytes).
	KeyBytes int
	// SkipConcurrency skips the concurrency sweep (and its warm-up).
	SkipConcurrency bool
	// Throttle are the throttle fractions of the throttled scenario, each
	// in (0, 1]: the default worker, gated and ungated, against DynamoDB
	// Local behind a proxy that throttles that share of the requests at
	// random. An unthrottled baseline row comes first. Default: none (the
	// scenario is skipped).
	Throttle []float64
	// ThrottleMessages per run of the throttled scenario (fresh messages).
	// Default: DefaultThrottleMessages.
	ThrottleMessages int
	// ThrottleConcurrency of the throttled scenario's worker (its
	// Config.Concurrency: the adaptive limit's ceiling). Default:
	// DefaultThrottleConcurrency.
	ThrottleConcurrency int
	// ThrottleTimeout bounds each run of the throttled scenario; a run
	// stopped by it is reported as timed out. Default:
	// DefaultThrottleTimeout.
	ThrottleTimeout time.Duration
	// ThrottleSeed seeds the proxy's throttling draws; every run starts
	// from it. Default: DefaultThrottleSeed.
	ThrottleSeed uint64
	// Progress receives one line per finished measurement. Default: none.
	Progress io.Writer

	// mixDistance overrides MixDistanceMin and MixDistanceMax: the package's
	// test mixes a few dozen messages.
	mixDistance [2]int
	// throttleWaitTime is the long-poll wait of the throttled scenario's
	// worker. Default (zero): the worker's, 20s, so SQS calls per message
	// are a deployed worker's; but a worker's shutdown waits for its poll
	// in flight, so the package's test shortens it.
	throttleWaitTime time.Duration
}

func (c *Config) defaults() error {
	if c.Messages == 0 {
		c.Messages = DefaultMessages
	}
	if len(c.Duplicates) == 0 {
		c.Duplicates = []float64{DefaultDuplicateRatio}
	}
	if c.mixDistance == [2]int{} {
		c.mixDistance = [2]int{MixDistanceMin, MixDistanceMax}
	}
	if c.LateRatio == 0 {
		c.LateRatio = DefaultLateRatio
	}
	c.LateRatio = max(0, c.LateRatio)
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 4, 16, 64}
	}
	if c.SizeConcurrency == 0 {
		c.SizeConcurrency = DefaultSizeConcurrency
	}
	if len(c.Kinds) == 0 {
		c.Kinds = slices.Clone(kindOrder)
	}
	if c.NoteBytes == 0 {
		c.NoteBytes = DefaultNoteBytes
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.ThrottleMessages == 0 {
		c.ThrottleMessages = DefaultThrottleMessages
	}
	if c.ThrottleConcurrency == 0 {
		c.ThrottleConcurrency = DefaultThrottleConcurrency
	}
	if c.ThrottleTimeout == 0 {
		c.ThrottleTimeout = DefaultThrottleTimeout
	}
	if c.ThrottleSeed == 0 {
		c.ThrottleSeed = DefaultThrottleSeed
	}
	if c.Messages < 10 || c.LateRatio > 0.5 {
		return errors.New("bench: need at least 10 messages and a late ratio in [0, 0.5]")
	}
	for _, r := range c.Duplicates {
		if !(r >= 0 && r < 1) {
			return fmt.Errorf("bench: duplicate ratio %v must be within [0, 1)", r)
		}
	}
	if c.mixDistance[0] < 1 || c.mixDistance[1] < c.mixDistance[0] {
		return fmt.Errorf("bench: mix distance %v: need 1 <= min <= max", c.mixDistance)
	}
	if c.KeyBytes < 0 || c.KeyBytes > envelope.DefaultMaxKeyBytes {
		return fmt.Errorf("bench: KeyBytes %d must be within 0..%d", c.KeyBytes, envelope.DefaultMaxKeyBytes)
	}
	for _, f := range c.Throttle {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("bench: throttle fraction %v must be within (0, 1]", f)
		}
	}
	if c.ThrottleMessages < 10 || c.ThrottleConcurrency < 1 || c.ThrottleTimeout < 0 || c.throttleWaitTime < 0 || c.throttleWaitTime > 20*time.Second {
		return errors.New("bench: the throttled scenario needs at least 10 messages, a concurrency of at least 1, a timeout that is not negative and a long-poll wait within 0..20s")
	}
	for _, k := range c.Kinds {
		if _, err := kindOf(k); err != nil {
			return err
		}
	}
	return nil
}

// The distance, in fresh messages, from a duplicate to its original in a
// mixed stream (Config.Mix): drawn uniformly within these bounds.
const (
	MixDistanceMin = 50
	MixDistanceMax = 500
)

// shape is what a run's messages look like, at the duplicate ratio dups.
func (c *Config) shape(dups float64) shape {
	sh := shape{dupRatio: dups, lateRatio: c.LateRatio, noteBytes: c.NoteBytes, keyBytes: c.KeyBytes}
	if c.Mix {
		sh.mixNear, sh.mixFar = c.mixDistance[0], c.mixDistance[1]
	}
	return sh
}

// Env says where to run.
type Env struct {
	AWS      aws.Config
	DynamoDB []func(*dynamodb.Options)
	SQS      []func(*sqs.Options)
	// Table is created (tables.Ensure) if missing and shared by all runs.
	Table string
	// DynamoDBEndpoint is the URL the DynamoDB options point at (DynamoDB
	// Local): the throttled scenario puts its proxy in front of it.
	// Required for that scenario.
	DynamoDBEndpoint string
}

// Phase is the measurement of one message set through one consumer.
type Phase struct {
	Messages int `json:"messages"`
	// Work counts the messages that carried work no earlier message of
	// the run did: every one of a fresh phase, none of a duplicate phase,
	// the fresh ones of a mixed phase.
	Work          int             `json:"workItems"`
	Elapsed       time.Duration   `json:"elapsedNs"`
	DynamoDBCalls int             `json:"dynamodbCalls"`
	SQSCalls      int             `json:"sqsCalls"`
	LocalCapacity float64         `json:"localCapacityUnits"`
	CPU           time.Duration   `json:"cpuNs"`
	PeakRSS       int64           `json:"peakRssBytes"`
	Latencies     []time.Duration `json:"-"`
	Calls         map[string]int  `json:"calls"`
	// LostReceives counts receive attempts whose response broke off (the
	// SDK retried them); their messages stalled for a visibility timeout.
	LostReceives int `json:"lostReceives"`
	// ReadKeys counts the keys BatchGetItem read (the fused read ahead).
	ReadKeys int `json:"readKeys"`
	// Outcomes are the worker's final outcomes by label (none for the
	// bare loops).
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// Kept are the outcomes of the worker's deliveries that kept their
	// message for a later receive, by label: in_flight and lease_lost
	// (another delivery of the same work held it: a duplicate that arrived
	// while its original was in flight), retry (a transaction conflict,
	// say).
	Kept map[string]int `json:"keptOutcomes,omitempty"`
	// superseded are the keys of the work the worker superseded: a
	// delivery superseded, none applied.
	superseded map[string]bool
}

// Measure is a consumer's phases together: the fresh and the duplicate
// phase, or the one mixed phase (Config.Mix); the other's are zero and
// left out of the JSON.
type Measure struct {
	Fresh     Phase `json:"fresh,omitzero"`
	Duplicate Phase `json:"duplicate,omitzero"`
	// Mixed is the one phase of a mixed run: the fresh messages with the
	// duplicates interleaved.
	Mixed      Phase         `json:"mixed,omitzero"`
	Throughput float64       `json:"messagesPerSecond"`
	P50        time.Duration `json:"p50Ns"`
	P99        time.Duration `json:"p99Ns"`
}

// phases are m's phases that ran: the mixed one, or fresh and duplicate.
func (m *Measure) phases() []*Phase {
	if m.Mixed.Messages > 0 {
		return []*Phase{&m.Mixed}
	}
	return []*Phase{&m.Fresh, &m.Duplicate}
}

// superseded is the work the worker superseded: the fresh phase's, or
// the mixed phase's (a duplicate superseded after its original applied —
// the case moved on — is not).
func (m *Measure) superseded() map[string]bool {
	if m.Mixed.Messages > 0 {
		return m.Mixed.superseded
	}
	return m.Fresh.superseded
}

// Cost is what a message costs on average over a class of messages: the
// fresh ones, the duplicates, or all of a mixed run.
type Cost struct {
	DynamoDBCalls float64 `json:"dynamodbCalls"`
	SQSCalls      float64 `json:"sqsCalls"`
	// LocalWCU is the write capacity DynamoDB Local reported.
	LocalWCU float64 `json:"localWcu"`
	// AWSWCU and AWSRCU are the write and read units in AWS terms (units).
	AWSWCU float64 `json:"awsWcu"`
	AWSRCU float64 `json:"awsRcu"`
}

// Result is one worker at one concurrency and duplicate ratio.
type Result struct {
	Kind        Kind `json:"kind"`
	Concurrency int  `json:"concurrency"`
	Messages    int  `json:"messages"`
	Duplicates  int  `json:"duplicates"`
	// DuplicateRatio is the ratio the run was made with (Config.Duplicates).
	DuplicateRatio float64 `json:"duplicateRatio"`
	// Mixed says the duplicates were interleaved among the fresh messages
	// in one phase (Config.Mix): the per-message figures are All's.
	Mixed       bool    `json:"mixed"`
	InboxBefore int     `json:"inboxRecordsBefore"`
	Worker      Measure `json:"worker"`
	Ceiling     Measure `json:"ceiling"`
	Efficiency  float64 `json:"efficiency"`
	VsNaive     float64 `json:"throughputVsNaive"`
	// Per message: per fresh message and per duplicate in a two-phase run
	// (Duplicate nil when the run had none), All nil; per message of a
	// mixed run, fresh and duplicates together, in All, the other two nil.
	Fresh     *Cost `json:"perFresh,omitempty"`
	Duplicate *Cost `json:"perDuplicate,omitempty"`
	All       *Cost `json:"perMessage,omitempty"`
	// CPUPerMessage is over all messages, in either mode.
	CPUPerMessage time.Duration `json:"cpuPerMessageNs"`
	PeakRSS       int64         `json:"peakRssBytes"`
	// Kept counts the worker's deliveries that kept their message for a
	// later receive (Phase.Kept), InFlight those of them kept because
	// another delivery of the same work held it (in_flight, lease_lost).
	Kept     int `json:"kept"`
	InFlight int `json:"inFlight"`
	// ItemBytes is the case item's size as a run left it (DynamoDB's
	// rules), RecordBytes the COMPLETED inbox record's (0: none).
	ItemBytes   int `json:"caseItemBytes"`
	RecordBytes int `json:"inboxRecordBytes"`
	// Late counts the fresh messages sent after their case's next note;
	// Superseded those the worker superseded (NoteInOrder: every late one).
	Late       int `json:"late"`
	Superseded int `json:"superseded"`
	// DoubleApplies counts applications beyond one per work item, read
	// back from the case items (only the naive worker has any: it applies
	// every duplicate again).
	DoubleApplies int `json:"doubleApplies"`
	// Lost counts work items neither applied nor superseded (read back
	// likewise; in order, a case not left at its newest note counts too).
	Lost int `json:"lost"`
	// Redone counts measurements repeated after a lost receive response.
	Redone int `json:"redone"`
}

// Report is a whole benchmark.
type Report struct {
	Config      Config   `json:"-"`
	Concurrency []Result `json:"concurrencySweep"`
	Sizes       []Result `json:"sizeSweep"`
	// Throttled are the throttled scenario's rows: per fraction (the
	// unthrottled baseline first), the gated variant, then the ungated one.
	Throttled []ThrottledResult `json:"throttled"`
}

// Run runs the concurrency sweep — at each concurrency, each duplicate
// ratio, every kind — then the size sweep, then the throttled scenario.
func Run(ctx context.Context, env Env, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	setup := dynamodb.NewFromConfig(env.AWS, env.DynamoDB...)
	if err := tables.Ensure(ctx, setup, tables.Config{Name: env.Table}); err != nil {
		return nil, err
	}
	r := &Report{Config: cfg}
	sweeps := !cfg.SkipConcurrency || len(cfg.Sizes) > 0
	inboxRecords := 0
	if sweeps {
		// Warm DynamoDB Local's JIT up before anything is measured.
		fmt.Fprintln(cfg.Progress, "[bench] warming up the emulators …")
		warm, err := runOne(ctx, env, cfg, KindDefault, 16, min(cfg.Messages, 500), cfg.Duplicates[0], 0)
		if err != nil {
			return nil, fmt.Errorf("bench: warm-up: %w", err)
		}
		inboxRecords = inboxWrites(warm)
	}
	concurrency := cfg.Concurrency
	if cfg.SkipConcurrency {
		concurrency = nil
	}
	for _, conc := range concurrency {
		for _, dups := range cfg.Duplicates {
			var naive float64
			for _, kind := range cfg.Kinds {
				res, err := runOne(ctx, env, cfg, kind, conc, cfg.Messages, dups, inboxRecords)
				if err != nil {
					return nil, err
				}
				inboxRecords += inboxWrites(res)
				if kind == KindNaive {
					naive = res.Worker.Throughput
				}
				if naive > 0 {
					res.VsNaive = res.Worker.Throughput / naive
				}
				fmt.Fprintf(cfg.Progress, "[bench] %-11s c=%-3d dups %3.0f%% %s %6.0f msg/s  ceiling %6.0f  efficiency %.2f\n",
					kind, conc, 100*dups, mode(cfg.Mix), res.Worker.Throughput, res.Ceiling.Throughput, res.Efficiency)
				r.Concurrency = append(r.Concurrency, *res)
			}
		}
	}
	for _, n := range cfg.Sizes {
		res, err := runOne(ctx, env, cfg, KindDefault, cfg.SizeConcurrency, n, cfg.Duplicates[0], inboxRecords)
		if err != nil {
			return nil, err
		}
		inboxRecords += inboxWrites(res)
		fmt.Fprintf(cfg.Progress, "[bench] size %-6d inbox before %-7d %6.0f msg/s  efficiency %.2f\n", n, res.InboxBefore, res.Worker.Throughput, res.Efficiency)
		r.Sizes = append(r.Sizes, *res)
	}
	if len(cfg.Throttle) > 0 {
		var err error
		if r.Throttled, err = runThrottled(ctx, env, cfg, !sweeps); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// mode names a run's mode in progress lines.
func mode(mix bool) string {
	if mix {
		return "mixed"
	}
	return "2-phase"
}

// inboxWrites is how many inbox records a result's runs left in the table:
// its kind's per work item, for the worker's and the ceiling's runs alike.
func inboxWrites(r *Result) int {
	return kinds[r.Kind].records * 2 * (r.Messages - r.Duplicates) // the ceiling ran as many as the worker
}

// shape is what a run's messages look like (Config's fields of the same
// names).
type shape struct {
	dupRatio, lateRatio float64
	noteBytes, keyBytes int
	// mixNear and mixFar bound the distance, in fresh messages, from a
	// duplicate to its original in the mixed stream; zero: no mixed stream
	// (two-phase).
	mixNear, mixFar int
}

// notesPerCase is how many fresh notes a case receives in a run (of up to
// 4,000 fresh messages): the versions late notes are made of.
const notesPerCase = 4

// messageSet is one run's messages.
type messageSet struct {
	fresh, dups []string
	// mixed is the mixed stream (shape.mixNear > 0): fresh and dups, each
	// duplicate some fresh messages after its original.
	mixed []string
	envs  map[string]*envelope.Envelope // by body
	cases []string
	// late counts the fresh messages sent after their case's next note.
	late int
}

// makeMessages builds a run's messages: fresh notes, version after version
// per case, a share of them late (sent after the case's next note, many
// messages later), then the duplicates (earlier work in a new SQS message),
// and, for a mixed run, the stream with the duplicates among the fresh
// notes (interleave). The same arguments make the same messages but for
// their message IDs.
func makeMessages(kind Kind, run string, n int, sh shape) (*messageSet, error) {
	rng := rand.New(rand.NewPCG(uint64(len(run)), uint64(n)))
	nDup := int(float64(n) * sh.dupRatio)
	nFresh := n - nDup
	cases := max(1, min(1000, nFresh/notesPerCase))
	ms := &messageSet{envs: map[string]*envelope.Envelope{}}
	for i := range cases {
		ms.cases = append(ms.cases, fmt.Sprintf("%s-case-%05d", run, i))
	}
	note := strings.Repeat("case note text ", sh.noteBytes/15+1)[:sh.noteBytes]
	// Note i is version i/cases+1 of case i%cases, so a case's notes go
	// out a case count apart. A late note is an odd version swapped with
	// the next: it arrives long after that one applied.
	order := make([]int, nFresh)
	for i := range order {
		order[i] = i
	}
	for i := range nFresh {
		if (i/cases)%2 == 0 && i+cases < nFresh && rng.Float64() < 2*sh.lateRatio {
			order[i], order[i+cases] = order[i+cases], order[i]
			ms.late++
		}
	}
	var originals []*envelope.Envelope
	for _, i := range order {
		key := fmt.Sprintf("%s-%s-%06d", kind, run, i)
		if sh.keyBytes > 0 {
			if len(key) >= sh.keyBytes {
				return nil, fmt.Errorf("bench: keys of %d bytes: the generated key %q is as long already", sh.keyBytes, key)
			}
			key += "-" + strings.Repeat("k", sh.keyBytes-len(key)-1)
		}
		env, err := caseflow.NewNote(key, ms.cases[i%cases], note, int64(i/cases+1))
		if err != nil {
			return nil, err
		}
		originals = append(originals, env)
		body, err := envelope.Encode(env)
		if err != nil {
			return nil, err
		}
		ms.fresh = append(ms.fresh, string(body))
		ms.envs[string(body)] = env
	}
	origins := make([]int, nDup) // the fresh position of each duplicate's original
	for k := range nDup {
		origins[k] = rng.IntN(len(originals))
		env := caseflow.Resend(originals[origins[k]])
		body, err := envelope.Encode(env)
		if err != nil {
			return nil, err
		}
		ms.dups = append(ms.dups, string(body))
		ms.envs[string(body)] = env
	}
	if sh.mixNear > 0 {
		ms.mixed = interleave(rng, ms.fresh, ms.dups, origins, sh.mixNear, sh.mixFar)
	}
	return ms, nil
}

// interleave is the mixed stream: the fresh messages in order, duplicate k
// sent right after the fresh message near to far (drawn uniformly)
// positions after its original, fresh[origins[k]] — after the last one
// when the stream ends sooner. Every duplicate comes after its original.
func interleave(rng *rand.Rand, fresh, dups []string, origins []int, near, far int) []string {
	after := make([][]string, len(fresh)) // the duplicates sent right after fresh[i]
	for k, body := range dups {
		at := min(origins[k]+near+rng.IntN(far-near+1), len(fresh)-1)
		after[at] = append(after[at], body)
	}
	stream := make([]string, 0, len(fresh)+len(dups))
	for i, body := range fresh {
		stream = append(stream, body)
		stream = append(stream, after[i]...)
	}
	return stream
}

// runOne measures kind at concurrency conc on runs of n messages, a share
// dups of them duplicates: the worker and its ceiling, twice each.
func runOne(ctx context.Context, env Env, cfg Config, kind Kind, conc, n int, dups float64, inboxBefore int) (*Result, error) {
	sp, err := kindOf(kind)
	if err != nil {
		return nil, err
	}
	res := &Result{Kind: kind, Concurrency: conc, Messages: n, DuplicateRatio: dups, Mixed: cfg.Mix, InboxBefore: inboxBefore}
	// ABBA order: worker, ceiling, ceiling, worker — drift in the emulators
	// (JIT, table growth, a busy neighbour) hits both sides alike.
	var workerRuns, ceilingRuns []*Measure
	var written sizes // the items the last worker run left
	for _, ceiling := range []bool{false, true, true, false} {
		var ms *messageSet
		var m *Measure
		setup := dynamodb.NewFromConfig(env.AWS, env.DynamoDB...)
		// A measurement in which a receive response broke off (an emulator
		// transport hiccup: its messages stall for a visibility timeout) is
		// redone with new messages, at most twice; the report counts them.
		for try := 0; ; try++ {
			var err error
			ms, err = makeMessages(kind, caseflow.NewID("")[:10], n, cfg.shape(dups))
			if err != nil {
				return nil, err
			}
			if err := caseflow.SeedCases(ctx, setup, env.Table, ms.cases); err != nil {
				return nil, err
			}
			if m, err = measure(ctx, env, cfg, sp, kind, conc, ms, ceiling); err != nil {
				return nil, err
			}
			lost := 0
			for _, p := range m.phases() {
				lost += p.LostReceives
			}
			if lost == 0 || try == 2 {
				break
			}
			res.Redone++
		}
		res.Duplicates = len(ms.dups)
		if ceiling {
			ceilingRuns = append(ceilingRuns, m)
			continue
		}
		workerRuns = append(workerRuns, m)
		res.Late += ms.late
		res.Superseded += len(m.superseded())
		rb, err := readBack(ctx, setup, env.Table, ms, m.superseded(), sp.inOrder)
		if err != nil {
			return nil, err
		}
		res.DoubleApplies += rb.twice
		res.Lost += rb.lost
		s, err := readSizes(ctx, setup, env.Table, sp, ms)
		if err != nil {
			return nil, err
		}
		res.ItemBytes, res.RecordBytes = s.Domain, s.Completed
		written = s
	}
	res.Worker, res.Ceiling = combine(workerRuns), combine(ceilingRuns)
	res.Messages *= len(workerRuns)
	res.Duplicates *= len(workerRuns)
	w := res.Worker
	res.Efficiency = w.Throughput / res.Ceiling.Throughput
	if cfg.Mix {
		res.All = costOf(sp, written, w.Mixed)
	} else {
		res.Fresh, res.Duplicate = costOf(sp, written, w.Fresh), costOf(sp, written, w.Duplicate)
	}
	var cpu time.Duration
	messages := 0
	for _, p := range w.phases() {
		cpu += p.CPU
		messages += p.Messages
		res.PeakRSS = max(res.PeakRSS, p.PeakRSS)
		for outcome, k := range p.Kept {
			res.Kept += k
			if outcome == worker.OutcomeInFlight || outcome == worker.OutcomeLeaseLost {
				res.InFlight += k
			}
		}
	}
	res.CPUPerMessage = cpu / time.Duration(max(1, messages))
	return res, nil
}

// costOf is what a message of phase p cost on average (nil: p had none),
// its AWS units by sp's rules from the items the run wrote (s) and what
// the phase sent.
func costOf(sp spec, s sizes, p Phase) *Cost {
	if p.Messages == 0 {
		return nil
	}
	n := float64(p.Messages)
	u := sp.units(s, usageOf(p))
	return &Cost{DynamoDBCalls: float64(p.DynamoDBCalls) / n, SQSCalls: float64(p.SQSCalls) / n, LocalWCU: p.LocalCapacity / n,
		AWSWCU: u.Write, AWSRCU: u.Read}
}

// measure runs the fresh messages, then the duplicates, each through a
// consumer started for that phase on a queue of its own; or, mixed
// (Config.Mix), the mixed stream through one.
func measure(ctx context.Context, env Env, cfg Config, sp spec, kind Kind, conc int, ms *messageSet, ceiling bool) (*Measure, error) {
	var preps map[string]*prepared
	if ceiling {
		preps = map[string]*prepared{}
		byKey := map[string]*prepared{}
		for body, e := range ms.envs {
			if p, ok := byKey[e.IdempotencyKey]; ok {
				preps[body] = p // a duplicate sends its original's calls
				continue
			}
			p, err := sp.prepare(env.Table, e)
			if err != nil {
				return nil, err
			}
			byKey[e.IdempotencyKey], preps[body] = p, p
		}
	}
	m := &Measure{}
	type run struct {
		into   *Phase
		bodies []string
		work   int // how many of bodies carry new work
	}
	runs := []run{{&m.Fresh, ms.fresh, len(ms.fresh)}, {&m.Duplicate, ms.dups, 0}}
	if cfg.Mix {
		runs = []run{{&m.Mixed, ms.mixed, len(ms.fresh)}}
	}
	for _, r := range runs {
		ph, err := phase(ctx, env, cfg, sp, kind, conc, r.bodies, preps)
		if err != nil {
			return nil, err
		}
		ph.Work = r.work
		*r.into = *ph
	}
	c := combine([]*Measure{m})
	c.Fresh.superseded, c.Duplicate.superseded, c.Mixed.superseded = m.Fresh.superseded, m.Duplicate.superseded, m.Mixed.superseded
	return &c, nil
}

// combine adds measurements of the same consumer up, phase by phase (all
// of one mode): messages, time, calls and CPU add; latencies pool; peak
// memory is the highest.
func combine(ms []*Measure) Measure {
	var out Measure
	add := func(into *Phase, p Phase) {
		into.Messages += p.Messages
		into.Work += p.Work
		into.Elapsed += p.Elapsed
		into.DynamoDBCalls += p.DynamoDBCalls
		into.SQSCalls += p.SQSCalls
		into.LocalCapacity += p.LocalCapacity
		into.CPU += p.CPU
		into.PeakRSS = max(into.PeakRSS, p.PeakRSS)
		into.Latencies = append(into.Latencies, p.Latencies...)
		into.LostReceives += p.LostReceives
		into.ReadKeys += p.ReadKeys
		if into.Calls == nil {
			into.Calls = map[string]int{}
		}
		for k, v := range p.Calls {
			into.Calls[k] += v
		}
		for k, v := range p.Outcomes {
			if into.Outcomes == nil {
				into.Outcomes = map[string]int{}
			}
			into.Outcomes[k] += v
		}
		for k, v := range p.Kept {
			if into.Kept == nil {
				into.Kept = map[string]int{}
			}
			into.Kept[k] += v
		}
	}
	for _, m := range ms {
		if m.Mixed.Messages > 0 {
			add(&out.Mixed, m.Mixed)
			continue
		}
		add(&out.Fresh, m.Fresh)
		add(&out.Duplicate, m.Duplicate)
	}
	messages, elapsed := 0, time.Duration(0)
	var all []time.Duration
	for _, p := range out.phases() {
		messages += p.Messages
		elapsed += p.Elapsed
		all = append(all, p.Latencies...)
	}
	out.Throughput = float64(messages) / elapsed.Seconds()
	slices.Sort(all)
	if len(all) > 0 {
		out.P50, out.P99 = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
	}
	return out
}

func phase(ctx context.Context, env Env, cfg Config, sp spec, kind Kind, conc int, bodies []string, preps map[string]*prepared) (*Phase, error) {
	ph := &Phase{Messages: len(bodies)}
	if len(bodies) == 0 {
		return ph, nil
	}
	plainSQS := sqs.NewFromConfig(env.AWS, env.SQS...)
	q, err := worker.CreateQueues(ctx, plainSQS, worker.QueueConfig{Name: "bench-" + caseflow.NewID("")[:10], VisibilityTimeout: leasePolicy.Lease})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, u := range []string{q.URL, q.DLQURL} {
			_, _ = plainSQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()
	if err := send(ctx, plainSQS, q.URL, bodies); err != nil {
		return nil, err
	}
	met := newMeter()
	ddb := dynamodb.NewFromConfig(env.AWS, append(slices.Clone(env.DynamoDB), met.dynamodb)...)
	sq := sqs.NewFromConfig(env.AWS, append(slices.Clone(env.SQS), met.sqs)...)

	var mu sync.Mutex
	applied := map[string]bool{} // the keys a delivery of the worker applied
	lat := make([]time.Duration, 0, len(bodies))
	done := make(chan struct{})
	var last time.Time
	settled := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		lat = append(lat, d)
		if len(lat) == len(bodies) {
			last = time.Now()
			close(done)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	batch := cfg.BatchSize
	if batch == 0 {
		batch = min(10, conc)
	}
	resetPeakRSS()
	cpu0 := cpuTime()
	start := time.Now()
	finished := make(chan error, 1)
	if preps != nil || sp.route == nil {
		// The ceiling sends the prepared calls; a kind without a worker
		// prepares each message's as it comes.
		l := &loop{sqs: sq, queueURL: q.URL, concurrency: conc, batch: batch, visibility: int32(leasePolicy.Lease / time.Second),
			batchDelete: sp.route != nil, settled: settled}
		l.handle = func(ctx context.Context, m types.Message) bool {
			if preps != nil {
				return sp.bare(ctx, ddb, preps[aws.ToString(m.Body)])
			}
			var e envelope.Envelope
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
				return false
			}
			p, err := sp.prepare(env.Table, &e)
			return err == nil && sp.bare(ctx, ddb, p)
		}
		go func() { l.run(runCtx); finished <- nil }()
	} else {
		reg := ddbworker.NewRegistry()
		if err := sp.route(reg, env.Table); err != nil {
			return nil, err
		}
		ph.Outcomes, ph.Kept, ph.superseded = map[string]int{}, map[string]int{}, map[string]bool{}
		// The bench's table is this release's own: its workers write v3,
		// the hash its checks compute.
		wcfg := worker.Config{Store: inbox.Store{Table: env.Table, RequestHashVersion: 3}, QueueURL: q.URL, DLQURL: q.DLQURL, Concurrency: conc, BatchSize: cfg.BatchSize,
			VisibilityTimeout: leasePolicy.Lease, WaitTime: time.Second}
		if sp.config != nil {
			sp.config(&wcfg)
		}
		w, err := worker.New(worker.Deps{DynamoDB: ddb, SQS: sq, Handlers: reg, Logger: slog.New(slog.DiscardHandler),
			OnEvent: func(ev worker.Event) {
				mu.Lock()
				if !ev.Final {
					ph.Kept[ev.Outcome]++
					mu.Unlock()
					return
				}
				ph.Outcomes[ev.Outcome]++
				switch ev.Outcome {
				case worker.OutcomeSuperseded:
					ph.superseded[ev.IdempotencyKey] = true
				case worker.OutcomeApplied:
					applied[ev.IdempotencyKey] = true
				}
				mu.Unlock()
				settled(ev.Duration)
			}}, wcfg)
		if err != nil {
			return nil, err
		}
		go func() { finished <- w.Run(runCtx) }()
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		stop()
		<-finished
		return nil, fmt.Errorf("bench: %s c=%d: only %d of %d messages settled in 10 minutes", kind, conc, len(lat), len(bodies))
	}
	stop()
	if err := <-finished; err != nil {
		return nil, err
	}
	ph.Elapsed = last.Sub(start)
	ph.CPU = cpuTime() - cpu0
	ph.PeakRSS = peakRSS()
	r := met.read()
	ph.DynamoDBCalls, ph.SQSCalls, ph.LocalCapacity, ph.Calls, ph.LostReceives, ph.ReadKeys = r.DynamoDB, r.SQS, r.Capacity, r.Calls, r.LostReceives, r.ReadKeys
	ph.Latencies = lat
	// Work superseded is work no delivery applied: in a mixed run, a
	// duplicate superseded because its case moved on after its original
	// applied is not.
	for k := range applied {
		delete(ph.superseded, k)
	}
	return ph, nil
}

func send(ctx context.Context, q *sqs.Client, url string, bodies []string) error {
	for start := 0; start < len(bodies); start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
		}
		out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("bench: send: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("bench: send: %d refused", len(out.Failed))
		}
	}
	return nil
}

// readBack reads the run's case items and checks them against its fresh
// messages: every applied note added one to its case's noteCount, so a
// case counting more than its notes that were not superseded applied one
// twice, fewer lost one. In order (NoteInOrder), a case must also be left
// at its newest note: its noteVersion, and its fence when it has one (the
// single-write route's), that note's key and request hash.
func readBack(ctx context.Context, ddb *dynamodb.Client, table string, ms *messageSet, superseded map[string]bool, inOrder bool) (applications, error) {
	want := map[string]int{}
	newest := map[string]*envelope.Envelope{}
	for _, body := range ms.fresh {
		e := ms.envs[body]
		var p caseflow.NoteRecorded
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return applications{}, err
		}
		if !superseded[e.IdempotencyKey] {
			want[p.CaseID]++
		}
		if n := newest[p.CaseID]; n == nil || *e.AggregateVersion > *n.AggregateVersion {
			newest[p.CaseID] = e
		}
	}
	keys := make([]map[string]ddbtypes.AttributeValue, len(ms.cases))
	for i, c := range ms.cases {
		keys[i] = caseflow.CaseKey(c)
	}
	items, err := batchGet(ctx, ddb, table, keys)
	if err != nil {
		return applications{}, err
	}
	byCase := map[string]map[string]ddbtypes.AttributeValue{}
	for _, it := range items {
		if id, ok := it[caseflow.AttrCaseID].(*ddbtypes.AttributeValueMemberS); ok {
			byCase[id.Value] = it
		}
	}
	var a applications
	for _, c := range ms.cases {
		it := byCase[c]
		got := int(number(it, caseflow.AttrNoteCount))
		a.applied += min(got, want[c])
		a.twice += max(0, got-want[c])
		missing := max(0, want[c]-got)
		if n := newest[c]; inOrder && n != nil {
			key, _ := it[ddbworker.FenceKeyAttr(caseflow.AttrNoteVersion)].(*ddbtypes.AttributeValueMemberS)
			hash, _ := it[ddbworker.FenceHashAttr(caseflow.AttrNoteVersion)].(*ddbtypes.AttributeValueMemberS)
			fenced := key == nil && hash == nil || key != nil && hash != nil && key.Value == n.IdempotencyKey && hash.Value == n.RequestHash
			if number(it, caseflow.AttrNoteVersion) != *n.AggregateVersion || !fenced {
				missing = max(1, missing) // the newest note is not in place
			}
		}
		a.lost += missing
	}
	return a, nil
}

// applications is what readBack found: work applied, applications beyond
// one per work item, and work lost.
type applications struct{ applied, twice, lost int }

// number is a number attribute of item (0: absent).
func number(item map[string]ddbtypes.AttributeValue, attr string) int64 {
	v, ok := item[attr].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

// readSizes reads back what the run's first fresh message wrote: its case
// item and, for a kind that keeps inbox records, its COMPLETED record.
func readSizes(ctx context.Context, ddb *dynamodb.Client, table string, sp spec, ms *messageSet) (sizes, error) {
	e := ms.envs[ms.fresh[0]]
	var p caseflow.NoteRecorded
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return sizes{}, err
	}
	get := func(key map[string]ddbtypes.AttributeValue) (map[string]ddbtypes.AttributeValue, error) {
		out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		return out.Item, nil
	}
	caseItem, err := get(caseflow.CaseKey(p.CaseID))
	if err != nil {
		return sizes{}, err
	}
	s := sizes{Domain: itemSize(caseItem)}
	if sp.records == 0 {
		return s, nil
	}
	completed, err := get((inbox.Store{}).Key(e.IdempotencyKey, e.MessageType))
	if err != nil {
		return sizes{}, err
	}
	if len(completed) == 0 {
		return sizes{}, fmt.Errorf("bench: no inbox record for %s", e.IdempotencyKey)
	}
	l := tables.DefaultLayout()
	s.Completed = itemSize(completed)
	s.Index = indexEntrySize(completed, l.PartitionKey, l.SortKey, l.AggregatePK, l.AggregateSK)
	s.Processing = processingSize(completed)
	return s, nil
}

// processingSize is the PROCESSING record the gate wrote, from the
// COMPLETED one: without the completion attributes, with the lease expiry.
func processingSize(completed map[string]ddbtypes.AttributeValue) int {
	n := 0
	for k, v := range completed {
		switch k {
		case attr.CompletedAt, attr.Outcome:
		default:
			n += len(k) + valueSize(v)
		}
	}
	return n + len(attr.LeaseExpiresAt) + 8
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's high-water mark of this process's RSS.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS reads the RSS high-water mark (VmHWM) in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kbs, _ := strconv.ParseInt(f[0], 10, 64)
				return kbs * 1024
			}
		}
	}
	return 0
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func isConditionFailed(err error) bool {
	var ccf *ddbtypes.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func isCancelled(err error) bool {
	var tce *ddbtypes.TransactionCanceledException
	return errors.As(err, &tce)
}
