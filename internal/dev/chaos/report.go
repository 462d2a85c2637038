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
	SingleWrite bool          `json:"singleWrite"`
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
	// MaxReceiveCount is the work queue's redrive policy's; DeadLettered
	// the messages that must not end terminal and that it moved to the DLQ.
	MaxReceiveCount int `json:"maxReceiveCount"`
	DeadLettered    int `json:"healthyDeadLettered"`
	// Outage is what the outage phases measured (nil without them).
	Outage *OutageReport `json:"outage,omitempty"`
	// WorkStates are the work items' final inbox states (caseflow.Verify).
	WorkStates map[string]int `json:"workStates"`
	// SingleWriteStages are the single-write stage changes by state and inbox
	// record (caseflow.Report.SingleWrite).
	SingleWriteStages map[string]int `json:"singleWriteStageChanges,omitempty"`
	Rejections        map[string]int `json:"rejections"`
	QueueLeft         int            `json:"workQueueLeft"`
	Unsettled         []string       `json:"unsettled,omitempty"`

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
	if r.SingleWrite {
		mode += ", stage changes single-write"
	}
	row("worker processes", fmt.Sprintf("%d × concurrency %d, %s, visibility %s", r.Workers, r.Concurrency, mode, r.Visibility))
	row("worker processes started", r.ProcessesStarted)
	row("work queue maxReceiveCount (redrive policy)", r.MaxReceiveCount)
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
	for _, typ := range slices.Sorted(maps.Keys(r.Logs.Redelivered)) {
		sorted(r.Logs.Redelivered[typ], "redelivered "+typ+": ")
	}
	row("hash-mismatch alerts", r.Logs.Alerts)
	sorted(r.Logs.Events, "log: ")
	sorted(r.Logs.ErrorCodes, "error code ")
	row("log lines (unparsed)", fmt.Sprintf("%d (%d)", r.Logs.Lines, r.Logs.Unparsed))

	section("END STATE (read back from DynamoDB and SQS)")
	sorted(r.WorkStates, "work items ")
	sorted(r.SingleWriteStages, "stage changes (single-write) ")
	sorted(r.Rejections, "rejection records ")
	row("DLQ copies", r.DLQ.Copies)
	row("DLQ distinct sources (expected)", fmt.Sprintf("%d (%d)", r.DLQ.Sources, r.DLQ.Expected))
	row("DLQ extra copies (redelivered after its DLQ send)", r.DLQ.Extra)
	row("DLQ copies moved by the redrive policy", r.DLQ.Redriven)
	row("healthy messages dead-lettered (redrive policy)", r.DeadLettered)
	sorted(r.DLQ.ByCode, "DLQ ")
	row("work queue left", r.QueueLeft)
	row("phase 1 drained in", r.Phase1.Round(time.Millisecond))
	row("phase 2 drained in", r.Phase2.Round(time.Millisecond))
	row("total run time", r.Duration.Round(time.Millisecond))

	if r.Outage != nil {
		r.Outage.print(tw, section, row)
	}

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
	verdict := "exactly-once invariant under chaos"
	if r.Outage != nil {
		verdict = "exactly-once invariant and outage bounds under chaos"
	}
	fmt.Fprintf(tw, "\n%s\t%s\t\n", verdict, r.Verdict)
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

// print writes the outage section: one column per window.
func (o *OutageReport) print(tw io.Writer, section func(string), row func(string, any)) {
	section("OUTAGE PHASES (the workers reach DynamoDB through the fault proxy)")
	row("warm-up: messages sent (drained in)", fmt.Sprintf("%d (%s)", o.WarmupSent, o.WarmupDrained.Round(time.Millisecond)))
	row("traffic during each window (quiet before each)", fmt.Sprintf("%g messages/s (%s)", o.Rate, o.Gap))
	cols := func(name string, f func(w *WindowReport) string) {
		fmt.Fprintf(tw, "  %s\t", name)
		for i := range o.Windows {
			fmt.Fprintf(tw, "%s\t", f(&o.Windows[i]))
		}
		fmt.Fprintln(tw)
	}
	cols("window", func(w *WindowReport) string { return w.Name })
	cols("proxy answers", func(w *WindowReport) string { return w.Mode })
	cols("length", func(w *WindowReport) string { return w.Duration.Round(100 * time.Millisecond).String() })
	cols("messages sent during the window", func(w *WindowReport) string { return fmt.Sprint(w.Sent) })
	cols("DynamoDB requests during the window", func(w *WindowReport) string { return fmt.Sprint(w.Requests) })
	ops := map[string]bool{}
	for _, w := range o.Windows {
		for op := range w.RequestsByOp {
			ops[op] = true
		}
	}
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		cols("  "+op, func(w *WindowReport) string { return fmt.Sprint(w.RequestsByOp[op]) })
	}
	cols(fmt.Sprintf("requests/s per worker (bound %g)", o.MaxRequestRate), func(w *WindowReport) string { return fmt.Sprintf("%.2f", w.RequestRate) })
	cols("requests/s per worker, busiest 10 s", func(w *WindowReport) string { return fmt.Sprintf("%.2f", w.PeakRequestRate) })
	cols("health transitions unhealthy / healthy", func(w *WindowReport) string { return fmt.Sprintf("%d / %d", w.Unhealthy, w.Healthy) })
	cols("successors past their startup checks", func(w *WindowReport) string { return fmt.Sprint(w.Started) })
	cols("worker slots paused / serving again", func(w *WindowReport) string {
		return fmt.Sprintf("%d / %d", w.WorkersPaused, w.WorkersResumed)
	})
	cols("last pause after the window's start", func(w *WindowReport) string { return w.PausedAfter.Round(100 * time.Millisecond).String() })
	cols("last resume after the window's end", func(w *WindowReport) string { return w.ResumedAfter.Round(100 * time.Millisecond).String() })
	cols("workers replaced mid-window (deploy: SIGTERM, restart)", func(w *WindowReport) string { return fmt.Sprint(w.Deployed) })
	cols("deliveries parked / retried", func(w *WindowReport) string { return fmt.Sprintf("%d / %d", w.Parked, w.Retried) })
	cols(fmt.Sprintf("highest receive count logged (max %d)", o.MaxReceiveCount), func(w *WindowReport) string { return fmt.Sprint(w.MaxReceiveCount) })
	cols("healthy messages dead-lettered", func(w *WindowReport) string { return fmt.Sprint(w.DeadLettered) })
	cols("work items terminal for infrastructure", func(w *WindowReport) string { return fmt.Sprint(w.TerminalInfra) })
	cols(fmt.Sprintf("drained after the window's end (bound %s)", o.RecoverBound), func(w *WindowReport) string {
		return w.Recovered.Round(100 * time.Millisecond).String()
	})
	row("outside the windows: dead-lettered / terminal for infrastructure / health transitions",
		fmt.Sprintf("%d / %d / %d", o.DeadLetteredOutside, o.TerminalInfraOutside, o.TransitionsOutside))
}
