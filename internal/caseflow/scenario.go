package caseflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/failure"
)

// ScenarioConfig shapes a stream of example messages.
type ScenarioConfig struct {
	// Messages is the number of SQS messages to produce. Default: 2000.
	Messages int
	// Cases is the number of seeded cases. Default: Messages/20, at least 5.
	Cases int
	// DuplicateRatio is the fraction of messages that re-send work already
	// in the stream (same key, new SQS message and messageId). Default: 0.3.
	DuplicateRatio float64
	// ConcurrentRatio is the fraction of duplicates sent right after their
	// original, so that both are likely in flight together. Default: 0.3.
	ConcurrentRatio float64
	// OutOfOrderRatio is the fraction of stage changes swapped with the
	// version before them. Default: 0.2.
	OutOfOrderRatio float64
	// Poison is the number of messages that must end terminal: invalid
	// envelopes of each kind, unknown message types, unknown cases and hash
	// mismatches. Default: Messages/100, at least 6. Negative: none.
	Poison int
	// Seed makes the stream reproducible. Default: 1.
	Seed uint64
	// StageMismatches makes half the hash-mismatch probes (rounded up)
	// reuse the key of a case's newest stage change, with another stage,
	// instead of a deadline request's: on the single-write route the
	// case item's fence, not an inbox record, must refuse them.
	StageMismatches bool
}

func (c *ScenarioConfig) defaults() error {
	if c.Messages == 0 {
		c.Messages = 2000
	}
	if c.Cases == 0 {
		c.Cases = max(5, c.Messages/20)
	}
	if c.DuplicateRatio == 0 {
		c.DuplicateRatio = 0.3
	}
	if c.ConcurrentRatio == 0 {
		c.ConcurrentRatio = 0.3
	}
	if c.OutOfOrderRatio == 0 {
		c.OutOfOrderRatio = 0.2
	}
	if c.Poison == 0 {
		c.Poison = max(6, c.Messages/100)
	}
	if c.Poison < 0 {
		c.Poison = 0
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	switch {
	case c.Messages < 1 || c.Cases < 1:
		return fmt.Errorf("caseflow: scenario needs at least one message and one case")
	case c.DuplicateRatio < 0 || c.DuplicateRatio >= 1, c.ConcurrentRatio < 0 || c.ConcurrentRatio > 1, c.OutOfOrderRatio < 0 || c.OutOfOrderRatio > 1:
		return fmt.Errorf("caseflow: scenario ratios must be within [0, 1) (duplicates) and [0, 1]")
	case c.Poison > c.Messages/2:
		return fmt.Errorf("caseflow: scenario poison %d must be at most half the messages", c.Poison)
	}
	return nil
}

// Expectation of a work item.
const (
	ExpectApplied      = "applied"            // applied exactly once
	ExpectMaySupersede = "applied|superseded" // an out-of-order version: applied or superseded, never rolled back
	ExpectCaseNotFound = "terminal:" + CodeCaseNotFound
)

// WorkItem is one unit of work (one idempotency key) of a plan.
type WorkItem struct {
	Key         string
	MessageType string
	CaseID      string
	Version     int64 // stage changes
	Stage       string
	AmountCents int64 // ledger entries
	Expect      string
	// Copies is how many SQS messages carry this work.
	Copies int
	// RequestHash of the work, and RequestHashV2 its v2 form: a worker
	// writes the version its table records (inbox.Store.RequestHashVersion).
	RequestHash, RequestHashV2 string
}

// Poison is a message that must end terminal with Code.
type Poison struct {
	Code string
	// Key is the idempotency key a hash-mismatch probe reuses ("" otherwise).
	Key string
}

// Message is one SQS message of a plan.
type Message struct {
	Body string
	// Work is the index of the work item it carries (-1 for poison).
	Work int
	// Poison is the index into Plan.Poison (-1 for work).
	Poison int
	// Phase 2 messages are sent after phase 1 drained (hash-mismatch probes:
	// they must come after the work whose key they reuse).
	Phase int
}

// Plan is a generated stream and what must come of it.
type Plan struct {
	CaseIDs    []string
	Work       []WorkItem
	PoisonList []Poison
	Messages   []Message
	Duplicates int
	OutOfOrder int
}

// Phase returns the messages of phase p (1 or 2), in send order.
func (p *Plan) Phase(n int) []Message {
	var out []Message
	for _, m := range p.Messages {
		if m.Phase == n {
			out = append(out, m)
		}
	}
	return out
}

// TerminalMessages is how many messages must end terminal (and, with the
// dlq policy, in the DLQ), by code.
func (p *Plan) TerminalMessages() map[string]int {
	out := map[string]int{}
	for _, m := range p.Messages {
		switch {
		case m.Poison >= 0:
			out[p.PoisonList[m.Poison].Code]++
		case p.Work[m.Work].Expect == ExpectCaseNotFound:
			out[CodeCaseNotFound]++
		}
	}
	return out
}

// GeneratePlan builds a reproducible stream: deadline requests, stage
// changes with increasing versions (some swapped), ledger entries,
// duplicates (some adjacent, some late) and poison.
func GeneratePlan(cfg ScenarioConfig) (*Plan, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xdd))
	p := &Plan{}
	for i := range cfg.Cases {
		p.CaseIDs = append(p.CaseIDs, fmt.Sprintf("case-%05d", i+1))
	}
	dups := int(float64(cfg.Messages) * cfg.DuplicateRatio)
	caseNotFound := 0
	if cfg.Poison > 0 {
		caseNotFound = max(1, cfg.Poison/6)
	}
	// Work items (first copies) include the CASE_NOT_FOUND ones, which are
	// also part of the poison count.
	unique := cfg.Messages - dups - (cfg.Poison - caseNotFound)
	mismatches := 0
	if cfg.Poison > 0 {
		mismatches = max(1, cfg.Poison/6)
	}
	if unique < caseNotFound+mismatches+1 {
		return nil, fmt.Errorf("caseflow: %d messages leave too little room for %d duplicates and %d poison", cfg.Messages, dups, cfg.Poison)
	}
	run := fmt.Sprintf("%x", rng.Uint64()&0xffffffff)
	base := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	versions := map[string]int64{}
	stageIdx := map[string][]int{} // case → indices of its stage changes, in version order

	var order []int // work indices in send order (first copies)
	for i := range unique - caseNotFound {
		c := p.CaseIDs[rng.IntN(len(p.CaseIDs))]
		key := fmt.Sprintf("%s-%06d", run, i)
		var w WorkItem
		switch r := rng.IntN(10); {
		case r < 4:
			stage := Stages()[rng.IntN(len(Stages()))]
			w = WorkItem{Key: "deadline-" + key, MessageType: TypeDeadline, CaseID: c, Stage: stage, Expect: ExpectApplied}
		case r < 7:
			versions[c]++
			w = WorkItem{Key: "stage-" + key, MessageType: TypeStageChanged, CaseID: c, Version: versions[c],
				Stage: Stages()[int(versions[c])%len(Stages())], Expect: ExpectApplied}
			stageIdx[c] = append(stageIdx[c], len(p.Work))
		default:
			w = WorkItem{Key: "ledger-" + key, MessageType: TypeLedger, CaseID: c, AmountCents: int64(100 + rng.IntN(9900)), Expect: ExpectApplied}
		}
		p.Work = append(p.Work, w)
		order = append(order, len(p.Work)-1)
	}
	for i := range caseNotFound {
		p.Work = append(p.Work, WorkItem{Key: fmt.Sprintf("deadline-%s-missing-%d", run, i), MessageType: TypeDeadline,
			CaseID: fmt.Sprintf("case-missing-%d", i), Stage: "intake", Expect: ExpectCaseNotFound})
		order = append(order, len(p.Work)-1)
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	// Stage changes go out in version order per case, except some swapped
	// pairs: the older version then arrives after the newer.
	pos := map[int]int{}
	for i, wi := range order {
		pos[wi] = i
	}
	for _, c := range slices.Sorted(maps.Keys(stageIdx)) { // sorted: the same seed gives the same plan
		idx := stageIdx[c]
		slots := make([]int, len(idx))
		for i, wi := range idx {
			slots[i] = pos[wi]
		}
		slices.Sort(slots)
		for i, wi := range idx {
			order[slots[i]] = wi
		}
		for i := 1; i < len(idx); i++ {
			if rng.Float64() < cfg.OutOfOrderRatio {
				a, b := idx[i-1], idx[i]
				ia, ib := slices.Index(order, a), slices.Index(order, b)
				order[ia], order[ib] = order[ib], order[ia]
				p.Work[a].Expect = ExpectMaySupersede
				p.OutOfOrder++
				i++
			}
		}
	}

	bodies := make([]*envelope.Envelope, len(p.Work))
	for i := range p.Work {
		env, err := p.Work[i].envelope(base.Add(time.Duration(i) * time.Minute))
		if err != nil {
			return nil, err
		}
		bodies[i] = env
		p.Work[i].RequestHash = env.RequestHash
		if p.Work[i].RequestHashV2, err = envelope.RequestHashVersion(env, envelope.HashV2); err != nil {
			return nil, err
		}
		p.Work[i].Copies = 1
	}
	encode := func(env *envelope.Envelope) (string, error) {
		b, err := envelope.Encode(env)
		return string(b), err
	}
	for _, wi := range order {
		body, err := encode(bodies[wi])
		if err != nil {
			return nil, err
		}
		p.Messages = append(p.Messages, Message{Body: body, Work: wi, Poison: -1, Phase: 1})
	}
	// Duplicates: some right after their original, the rest anywhere later.
	for range dups {
		wi := order[rng.IntN(len(order))]
		body, err := encode(Resend(bodies[wi]))
		if err != nil {
			return nil, err
		}
		at := indexOfWork(p.Messages, wi)
		if rng.Float64() < cfg.ConcurrentRatio {
			at++
		} else {
			at += 1 + rng.IntN(len(p.Messages)-at)
		}
		p.Messages = insert(p.Messages, at, Message{Body: body, Work: wi, Poison: -1, Phase: 1})
		p.Work[wi].Copies++
		p.Duplicates++
	}
	// Poison: invalid envelopes and unknown types anywhere; hash-mismatch
	// probes (an applied key re-sent with another payload) in phase 2.
	kinds := []string{string(envelope.CodeInvalidJSON), string(envelope.CodeMissingField), string(envelope.CodeUnknownSchemaVersion),
		string(envelope.CodeKeyTooLong), failure.CodeUnknownMessageType}
	// The newest stage change of each case, in case order: the work a stage
	// probe's key is taken from (the case item's version is its own when
	// phase 2 starts).
	var newestStage []int
	for _, c := range p.CaseIDs {
		if idx := stageIdx[c]; len(idx) > 0 {
			newestStage = append(newestStage, idx[len(idx)-1])
		}
	}
	stageProbes := 0
	if cfg.StageMismatches {
		stageProbes = min((mismatches+1)/2, len(newestStage))
	}
	for i := range cfg.Poison - caseNotFound {
		if i < stageProbes {
			wi := newestStage[rng.IntN(len(newestStage))]
			for slices.ContainsFunc(p.PoisonList, func(x Poison) bool { return x.Key == p.Work[wi].Key }) {
				wi = newestStage[rng.IntN(len(newestStage))]
			}
			probe := Resend(bodies[wi])
			stage := Stages()[(slices.Index(Stages(), p.Work[wi].Stage)+1)%len(Stages())]
			probe.Payload = json.RawMessage(fmt.Sprintf(`{"caseId":%q,"stage":%q}`, p.Work[wi].CaseID, stage))
			body, err := encode(probe)
			if err != nil {
				return nil, err
			}
			p.PoisonList = append(p.PoisonList, Poison{Code: failure.CodeHashMismatch, Key: p.Work[wi].Key})
			p.Messages = append(p.Messages, Message{Body: body, Work: -1, Poison: len(p.PoisonList) - 1, Phase: 2})
			continue
		}
		if i < mismatches {
			var wi int
			for {
				wi = order[rng.IntN(len(order))]
				if p.Work[wi].Expect == ExpectApplied && p.Work[wi].MessageType == TypeDeadline {
					break
				}
			}
			probe := Resend(bodies[wi])
			probe.Payload = json.RawMessage(fmt.Sprintf(`{"caseId":%q,"stage":"appeal","effectiveAt":"2027-01-01T00:00:00Z"}`, p.Work[wi].CaseID))
			body, err := encode(probe)
			if err != nil {
				return nil, err
			}
			p.PoisonList = append(p.PoisonList, Poison{Code: failure.CodeHashMismatch, Key: p.Work[wi].Key})
			p.Messages = append(p.Messages, Message{Body: body, Work: -1, Poison: len(p.PoisonList) - 1, Phase: 2})
			continue
		}
		code := kinds[i%len(kinds)]
		body := poisonBody(code, fmt.Sprintf("%s-poison-%d", run, i))
		p.PoisonList = append(p.PoisonList, Poison{Code: code})
		at := rng.IntN(len(p.Messages) + 1)
		p.Messages = insert(p.Messages, at, Message{Body: body, Work: -1, Poison: len(p.PoisonList) - 1, Phase: 1})
	}
	return p, nil
}

func (w *WorkItem) envelope(effective time.Time) (*envelope.Envelope, error) {
	switch w.MessageType {
	case TypeDeadline:
		return NewDeadlineRequest(w.Key, w.CaseID, w.Stage, effective)
	case TypeStageChanged:
		return NewStageChange(w.Key, w.CaseID, w.Stage, w.Version)
	default:
		return NewLedgerEntry(w.Key, w.CaseID, "src-"+w.Key, w.AmountCents)
	}
}

func poisonBody(code, key string) string {
	valid := func() map[string]any {
		return map[string]any{"messageId": NewID("m-"), "schemaVersion": 1, "messageType": TypeDeadline, "producer": Producer,
			"occurredAt": "2026-11-30T09:00:00Z", "idempotencyKey": key, "aggregateType": AggregateType, "aggregateId": "case-00001",
			"payload": map[string]any{"caseId": "case-00001", "stage": "intake", "effectiveAt": "2026-11-30T09:00:00Z"}}
	}
	m := valid()
	switch code {
	case string(envelope.CodeInvalidJSON):
		return `{"messageId": "` + key + `", "schemaVersion": 1, "payload": {` // truncated: not JSON
	case string(envelope.CodeMissingField):
		delete(m, "idempotencyKey")
	case string(envelope.CodeUnknownSchemaVersion):
		m["schemaVersion"] = 99
	case string(envelope.CodeKeyTooLong):
		m["idempotencyKey"] = key + "-" + strings.Repeat("x", envelope.DefaultMaxKeyBytes)
	case failure.CodeUnknownMessageType:
		m["messageType"] = "CaseArchived"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func insert(ms []Message, at int, m Message) []Message {
	at = min(at, len(ms))
	ms = append(ms, Message{})
	copy(ms[at+1:], ms[at:])
	ms[at] = m
	return ms
}

func indexOfWork(ms []Message, wi int) int {
	for i, m := range ms {
		if m.Work == wi {
			return i
		}
	}
	return len(ms) - 1
}

// HashIs reports whether stored, a record's or a fence's request hash, is
// the work's in either version a worker writes.
func (w WorkItem) HashIs(stored string) bool {
	return stored == w.RequestHash || stored == w.RequestHashV2
}
