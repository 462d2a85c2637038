package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Check is one invariant check and its result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Report is what a chaos run saw and found.
type Report struct {
	Table    string `json:"table"`
	QueueURL string `json:"queueUrl"`
	DLQURL   string `json:"dlqUrl"`
	LogDir   string `json:"logDir"`

	Seed        uint64        `json:"seed"`
	Workers     int           `json:"workers"`
	Concurrency int           `json:"concurrency"`
	Visibility  string        `json:"visibilityTimeout"`
	Fused       bool          `json:"fused"`
	Faults      Faults        `json:"faultRates"`
	Failpoints  string        `json:"failpointRates"`
	Duration    time.Duration `json:"durationNs"`
	TimedOut    bool          `json:"timedOut"`
	Phase1      time.Duration `json:"phase1Ns"`
	Phase2      time.Duration `json:"phase2Ns"`

	Sent       int `json:"messagesSent"`
	SentPhase1 int `json:"messagesSentPhase1"`
	SentPhase2 int `json:"messagesSentPhase2"`
	WorkItems  int `json:"workItems"`
	Duplicates int `json:"duplicates"`
	OutOfOrder int `json:"outOfOrder"`
	Poison     int `json:"poison"`
	Cases      int `json:"cases"`

	ProcessesStarted int      `json:"processesStarted"`
	HarnessKills     int      `json:"harnessKills"`
	Pauses           int      `json:"pauses"`
	UnexpectedExits  []string `json:"unexpectedExits,omitempty"`
	StopProblems     []string `json:"stopProblems,omitempty"`

	Logs Snapshot `json:"logs"`
	DLQ  DLQStats `json:"dlq"`
	// WorkStates are the work items' final inbox states (caseflow.Verify).
	WorkStates map[string]int `json:"workStates"`
	Rejections map[string]int `json:"rejections"`
	QueueLeft  int            `json:"workQueueLeft"`
	Unsettled  []string       `json:"unsettled,omitempty"`

	Checks     []Check  `json:"checks"`
	Violations []string `json:"violations"`
	// Warnings are findings that break no invariant: requests the services
	// refused as malformed, a worker that did not stop cleanly.
	Warnings []string `json:"warnings,omitempty"`
	Verdict  string   `json:"verdict"`
}

// OK reports whether every check held.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Violations) == 0 && !r.TimedOut
}

func (r *Report) check(name string, violations []string) {
	c := Check{Name: name, OK: len(violations) == 0}
	if !c.OK {
		c.Detail = fmt.Sprintf("%d", len(violations))
		if len(violations) > 20 {
			violations = append(violations[:20:20], fmt.Sprintf("… and %d more", len(violations)-20))
		}
		r.Violations = append(r.Violations, violations...)
	}
	r.Checks = append(r.Checks, c)
}

func (r *Report) finish() {
	r.Verdict = "HOLDS"
	if !r.OK() {
		r.Verdict = "VIOLATED"
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Print writes the report as a table.
func (r *Report) Print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	section := func(title string) { fmt.Fprintf(tw, "\n%s\t\t\n", title) }
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\t\n", k, v) }
	sorted := func(m map[string]int, prefix string) int {
		n := 0
		for _, k := range slices.Sorted(maps.Keys(m)) {
			name := k
			if name == "" {
				name = "(none)"
			}
			row(prefix+name, m[k])
			n += m[k]
		}
		return n
	}

	section("STREAM")
	row("messages sent (phase 1 + phase 2)", fmt.Sprintf("%d (%d + %d)", r.Sent, r.SentPhase1, r.SentPhase2))
	row("work items (idempotency keys)", r.WorkItems)
	pct := 0.0
	if r.Sent > 0 {
		pct = 100 * float64(r.Duplicates) / float64(r.Sent)
	}
	row("duplicates (same key, new SQS message)", fmt.Sprintf("%d (%.0f%%)", r.Duplicates, pct))
	row("stage changes sent out of order", r.OutOfOrder)
	row("poison messages", r.Poison)
	row("cases", r.Cases)

	section("CHAOS")
	mode := "gate + commit"
	if r.Fused {
		mode = "fused commit"
	}
	row("worker processes", fmt.Sprintf("%d × concurrency %d, %s, visibility %s", r.Workers, r.Concurrency, mode, r.Visibility))
	row("worker processes started", r.ProcessesStarted)
	row("harness kills (SIGKILL)", r.HarnessKills)
	for _, name := range Failpoints() {
		row("failpoint kills "+name, r.Logs.FailpointKills[name])
	}
	row("pauses (SIGSTOP visibility+2s)", r.Pauses)
	row("unexpected worker exits", len(r.UnexpectedExits))
	for _, k := range []string{"throttle", "transaction_conflict", "timeout", "lost_response", "sqs_error", "delay"} {
		row("faults injected "+k, r.Logs.Faults[k])
	}
	for k, v := range r.Logs.Faults {
		if !slices.Contains([]string{"throttle", "transaction_conflict", "timeout", "lost_response", "sqs_error", "delay"}, k) {
			row("faults injected "+k, v)
		}
	}
	row("faults injected (total)", r.Logs.FaultTotal())

	section("DELIVERIES (outcomes logged by the workers)")
	sorted(r.Logs.Outcomes, "")
	sorted(r.Logs.Terminal, "terminal ")
	sorted(r.Logs.Retries, "retry ")
	sorted(r.Logs.Late, "longer than a lease: ")
	row("hash-mismatch alerts", r.Logs.Alerts)
	sorted(r.Logs.Events, "log: ")
	sorted(r.Logs.ErrorCodes, "error code ")
	row("log lines (unparsed)", fmt.Sprintf("%d (%d)", r.Logs.Lines, r.Logs.Unparsed))

	section("END STATE (read back from DynamoDB and SQS)")
	sorted(r.WorkStates, "work items ")
	sorted(r.Rejections, "rejection records ")
	row("DLQ copies", r.DLQ.Copies)
	row("DLQ distinct sources (expected)", fmt.Sprintf("%d (%d)", r.DLQ.Sources, r.DLQ.Expected))
	row("DLQ extra copies (redelivered after its DLQ send)", r.DLQ.Extra)
	sorted(r.DLQ.ByCode, "DLQ ")
	row("work queue left", r.QueueLeft)
	row("phase 1 drained in", r.Phase1.Round(time.Millisecond))
	row("phase 2 drained in", r.Phase2.Round(time.Millisecond))
	row("total run time", r.Duration.Round(time.Millisecond))

	section("INVARIANT CHECKS")
	for _, c := range r.Checks {
		status := "ok"
		if !c.OK {
			status = "FAILED (" + c.Detail + ")"
		}
		row(c.Name, status)
	}
	if r.TimedOut {
		row("finished before the timeout", "FAILED")
	}
	fmt.Fprintf(tw, "\nexactly-once invariant under chaos\t%s\t\n", r.Verdict)
	_ = tw.Flush()
	for _, v := range r.Violations {
		fmt.Fprintln(out, "VIOLATION:", v)
	}
	for _, u := range r.UnexpectedExits {
		fmt.Fprintln(out, "UNEXPECTED EXIT:", u)
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(out, "WARNING:", w)
	}
	if r.LogDir != "" {
		fmt.Fprintf(out, "\nworker logs: %s\n", strings.TrimRight(r.LogDir, "/")+"/workers.log")
	}
}
