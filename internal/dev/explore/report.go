package explore

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// SeedReport is one seed's figures and violations.
type SeedReport struct {
	Seed        uint64          `json:"seed"`
	Hosts       string          `json:"hosts"`
	Works       int             `json:"works"`
	Messages    int             `json:"messages"`
	Faults      map[string]int  `json:"faults"`
	Kills       int             `json:"kills"`
	Restarts    int             `json:"restarts"`
	Deploys     int             `json:"deploys"`
	Outages     int             `json:"outages"`
	Invocations int             `json:"lambdaInvocations"`
	Ops         map[string]int  `json:"operatorActions"`
	Outcomes    map[string]int  `json:"outcomes"`
	Drains      []time.Duration `json:"drainsNs"`
	State       Figures         `json:"state"`
	Violations  []Violation     `json:"violations"`
	Duration    time.Duration   `json:"durationNs"`
	Replay      string          `json:"replay"`
	// Adopted is what adopting the application's table did, "" for a
	// table of ddbworker's own.
	Adopted string `json:"adopted,omitempty"`
}

// Print writes the seed's figures and violations.
func (r *SeedReport) Print(w io.Writer) {
	verdict := "OK"
	if len(r.Violations) > 0 {
		verdict = fmt.Sprintf("%d VIOLATIONS", len(r.Violations))
	}
	fmt.Fprintf(w, "seed %d: %s in %s — %d work items, %d messages, hosts %s\n", r.Seed, verdict, r.Duration.Round(100*time.Millisecond), r.Works, r.Messages, r.Hosts)
	if r.Adopted != "" {
		fmt.Fprintf(w, "  adopted: %s\n", r.Adopted)
	}
	fmt.Fprintf(w, "  faults injected: %s\n", counts(r.Faults))
	fmt.Fprintf(w, "  kills %d, restarts %d, deploys %d, outages %d, lambda invocations %d\n", r.Kills, r.Restarts, r.Deploys, r.Outages, r.Invocations)
	fmt.Fprintf(w, "  operator: %s\n", counts(r.Ops))
	fmt.Fprintf(w, "  outcomes: %s\n", counts(r.Outcomes))
	fmt.Fprintf(w, "  end state: %d applied, %d superseded, %d terminal records, %d DLQ messages; drains %v\n",
		r.State.Applied, r.State.Superseded, r.State.Terminal, r.State.DLQ, rounded(r.Drains))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  VIOLATION %s\n", v)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "  replay: %s\n", r.Replay)
	}
}

func rounded(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond).String()
	}
	return out
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// Report is an exploration's figures over its seeds.
type Report struct {
	First    uint64         `json:"firstSeed"`
	Stream   time.Duration  `json:"streamNs"`
	Seeds    []*SeedReport  `json:"seeds"`
	Works    int            `json:"works"`
	Messages int            `json:"messages"`
	Faults   map[string]int `json:"faults"`
	Kills    int            `json:"kills"`
	Restarts int            `json:"restarts"`
	Deploys  int            `json:"deploys"`
	Outages  int            `json:"outages"`
	Ops      map[string]int `json:"operatorActions"`
	// ByInvariant counts violations; FirstSeed is the first seed that
	// found each invariant's violation, FirstAt how long the exploration
	// had run when it did.
	ByInvariant map[Invariant]int           `json:"byInvariant"`
	FirstSeed   map[Invariant]uint64        `json:"firstSeedByInvariant"`
	FirstAt     map[Invariant]time.Duration `json:"firstAtNs"`
	Duration    time.Duration               `json:"durationNs"`
}

func (r *Report) add(s *SeedReport) {
	if r.Faults == nil {
		r.Faults, r.Ops = map[string]int{}, map[string]int{}
		r.ByInvariant, r.FirstSeed, r.FirstAt = map[Invariant]int{}, map[Invariant]uint64{}, map[Invariant]time.Duration{}
	}
	r.Seeds = append(r.Seeds, s)
	r.Works += s.Works
	r.Messages += s.Messages
	for k, v := range s.Faults {
		r.Faults[k] += v
	}
	for k, v := range s.Ops {
		r.Ops[k] += v
	}
	r.Kills += s.Kills
	r.Restarts += s.Restarts
	r.Deploys += s.Deploys
	r.Outages += s.Outages
	elapsed := time.Duration(0)
	for _, p := range r.Seeds {
		elapsed += p.Duration
	}
	for _, v := range s.Violations {
		if r.ByInvariant[v.Invariant] == 0 {
			r.FirstSeed[v.Invariant], r.FirstAt[v.Invariant] = s.Seed, elapsed
		}
		r.ByInvariant[v.Invariant]++
	}
}

// Violations is the number of violations over every seed.
func (r *Report) Violations() int {
	n := 0
	for _, s := range r.Seeds {
		n += len(s.Violations)
	}
	return n
}

// Failing lists the seeds that found a violation.
func (r *Report) Failing() []*SeedReport {
	var out []*SeedReport
	for _, s := range r.Seeds {
		if len(s.Violations) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Print writes the totals and the replay command of every failing seed.
func (r *Report) Print(w io.Writer) {
	faults := 0
	for _, v := range r.Faults {
		faults += v
	}
	fmt.Fprintf(w, "explore: %d seeds from %d in %s: %d work items, %d messages, %d faults injected, %d kills, %d restarts, %d deploys, %d outages; %d violations in %d seeds\n",
		len(r.Seeds), r.First, r.Duration.Round(time.Second), r.Works, r.Messages, faults, r.Kills, r.Restarts, r.Deploys, r.Outages, r.Violations(), len(r.Failing()))
	fmt.Fprintf(w, "  faults: %s\n", counts(r.Faults))
	fmt.Fprintf(w, "  operator: %s\n", counts(r.Ops))
	for _, inv := range slices.Sorted(maps.Keys(r.ByInvariant)) {
		fmt.Fprintf(w, "  %-34s %3d violations; first at seed %d after %s\n", inv, r.ByInvariant[inv], r.FirstSeed[inv], r.FirstAt[inv].Round(time.Second))
	}
	for _, s := range r.Failing() {
		fmt.Fprintf(w, "  seed %d (%d violations): %s\n", s.Seed, len(s.Violations), s.Replay)
	}
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
