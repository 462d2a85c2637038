package devcmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

type demoFlags struct {
	scenario    caseflow.ScenarioConfig
	concurrency int
	visibility  time.Duration
	fused       bool
	timeout     time.Duration
	dir         string
}

func newDemoCmd(g daemonext.Globals) *cobra.Command {
	f := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the example end to end on local emulators and check the exactly-once invariant against DynamoDB",
		Long: `demo starts DynamoDB Local and an SQS emulator on 127.0.0.1 (unless
--dynamodb-endpoint and --sqs-endpoint point elsewhere), creates a table and
queues, sends example case traffic with duplicates, out-of-order versions and
poison messages, runs the worker with a live progress line, prints what
happened, and checks against DynamoDB itself that every work item was applied
exactly once and every poison message is accounted for. It exits non-zero
when an invariant does not hold.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.scenario.Messages, "count", 2000, "SQS messages to send")
	fl.Float64Var(&f.scenario.DuplicateRatio, "duplicates", 0.3, "fraction of messages that are duplicates")
	fl.IntVar(&f.scenario.Poison, "poison", 0, "poison messages (default count/100)")
	fl.Uint64Var(&f.scenario.Seed, "seed", 7, "random seed of the message stream")
	fl.IntVar(&f.concurrency, "concurrency", 16, "worker concurrency")
	fl.DurationVar(&f.visibility, "visibility-timeout", 5*time.Second, "visibility timeout and lease")
	fl.BoolVar(&f.fused, "fused", false, "use the fused commit")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up when the queue has not drained by then")
	fl.StringVar(&f.dir, "emulators-dir", "", "where the emulators' npm packages are installed, on first use (default: $DDBWORKER_EMULATORS_DIR, else the user cache)")
	return cmd
}

// demoTally counts the worker's events.
type demoTally struct {
	mu       sync.Mutex
	outcomes map[string]int // every delivery's outcome
	settled  map[string]int // the outcome of each delivery that settled its message (Final)
	terminal map[string]int
	final    map[string]bool
	changed  chan struct{}
}

func (t *demoTally) on(ev worker.Event) {
	t.mu.Lock()
	t.outcomes[ev.Outcome]++
	if ev.Outcome == worker.OutcomeTerminal {
		t.terminal[ev.Code]++
	}
	if ev.Final {
		t.final[ev.SQSMessageID] = true
		t.settled[ev.Outcome]++
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *demoTally) snapshot() (final int, outcomes map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	outcomes = make(map[string]int, len(t.outcomes))
	for k, v := range t.outcomes {
		outcomes[k] = v
	}
	return len(t.final), outcomes
}

func runDemo(ctx context.Context, g daemonext.Globals, f *demoFlags, out, errw io.Writer) error {
	started := time.Now()
	at, stop, err := localOrGiven(ctx, g, f.dir, errw, "demo")
	if err != nil {
		return err
	}
	defer stop()
	counter := faults.New(1) // counts calls only: no rules
	ddb, q := at.clients([]func(*dynamodb.Options){counter.DynamoDB}, []func(*sqs.Options){counter.SQS})

	table := "ddbworker-demo-" + caseflow.NewID("")[:8]
	if err := tables.Ensure(ctx, ddb, tables.Config{Name: table}); err != nil {
		return err
	}
	queues, err := worker.CreateQueues(ctx, q, worker.QueueConfig{Name: table, VisibilityTimeout: f.visibility})
	if err != nil {
		return err
	}
	plan, err := caseflow.GeneratePlan(f.scenario)
	if err != nil {
		return err
	}
	if err := caseflow.SeedCases(ctx, ddb, table, plan.CaseIDs); err != nil {
		return err
	}
	fmt.Fprintf(errw, "[demo] table %s, queue %s, %d cases seeded\n", table, queues.URL, len(plan.CaseIDs))

	tally := &demoTally{outcomes: map[string]int{}, settled: map[string]int{}, terminal: map[string]int{}, final: map[string]bool{}, changed: make(chan struct{}, 1)}
	handlers := ddbworker.NewRegistry()
	var opts []ddbworker.RouteOption
	if f.fused {
		opts = append(opts, ddbworker.Fused())
	}
	if err := (&caseflow.Handlers{Table: table, TrackApplications: true}).Register(handlers, opts...); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(errw, &slog.HandlerOptions{Level: slog.LevelError + 4})) // the demo prints tables, not log lines
	w, err := worker.New(worker.Deps{DynamoDB: ddb, SQS: q, Handlers: handlers, Logger: log, OnEvent: tally.on}, worker.Config{
		Store: inbox.Store{Table: table}, QueueURL: queues.URL, DLQURL: queues.DLQURL, Concurrency: f.concurrency,
		VisibilityTimeout: f.visibility, WaitTime: 2 * time.Second, ClockSkew: 500 * time.Millisecond,
		Backoff: worker.Backoff{Base: time.Second, Max: 10 * time.Second},
	})
	if err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()

	deadline := time.Now().Add(f.timeout)
	p := newProgress(errw, "demo")
	processStart := time.Now()
	sent := 0
	for phase := 1; phase <= 2; phase++ {
		msgs := plan.Phase(phase)
		bodies := make([]string, len(msgs))
		for i, m := range msgs {
			bodies[i] = m.Body
		}
		if err := sendBodies(ctx, q, queues.URL, bodies, 4, func(int) {}); err != nil {
			return err
		}
		sent += len(bodies)
		if err := waitDrained(ctx, tally, sent, deadline, p, processStart); err != nil {
			return err
		}
	}
	elapsed := time.Since(processStart)
	stopWorker()
	if err := <-runDone; err != nil {
		return err
	}
	final, outcomes := tally.snapshot()
	p.done("%d/%d messages settled in %s (%.0f msg/s)", final, sent, elapsed.Round(time.Millisecond), float64(final)/elapsed.Seconds())

	callsAtEnd := counter.Calls()
	dlqCodes, err := drainDLQ(ctx, q, queues.DLQURL)
	if err != nil {
		return err
	}
	left, err := queueLeft(ctx, q, queues.URL)
	if err != nil {
		return err
	}
	report, err := caseflow.Verify(ctx, ddb, table, plan, dlqCodes)
	if err != nil {
		return err
	}
	if left != 0 {
		report.Checks = append(report.Checks, fmt.Sprintf("work queue empty: FAILED (%d left)", left))
		report.Violations = append(report.Violations, fmt.Sprintf("%d messages left in the work queue", left))
	} else {
		report.Checks = append(report.Checks, "work queue empty: ok")
	}
	printDemo(out, plan, outcomes, tally, report, callsAtEnd, sent, elapsed)
	fmt.Fprintf(errw, "[demo] done in %s\n", time.Since(started).Round(time.Millisecond))
	if !report.OK() {
		for _, v := range report.Violations {
			fmt.Fprintln(out, "VIOLATION:", v)
		}
		return &daemonext.ExitError{Code: 1, Msg: "invariant violated"}
	}
	return nil
}

func waitDrained(ctx context.Context, tally *demoTally, want int, deadline time.Time, p *progress, start time.Time) error {
	for {
		final, o := tally.snapshot()
		rate := float64(final) / max(time.Since(start).Seconds(), 0.001)
		p.update("%d/%d settled | %.0f msg/s | applied %d  duplicate %d  superseded %d  terminal %d  retry %d  in-flight %d",
			final, want, rate, o[worker.OutcomeApplied], o[worker.OutcomeDuplicate], o[worker.OutcomeSuperseded],
			o[worker.OutcomeTerminal], o[worker.OutcomeRetry], o[worker.OutcomeInFlight])
		if final >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(deadline)):
			return fmt.Errorf("demo: only %d of %d messages settled before the timeout", final, want)
		case <-tally.changed:
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// drainDLQ returns the failure code of every DLQ message ("(none)" for a
// message without one).
func drainDLQ(ctx context.Context, q *sqs.Client, url string) ([]string, error) {
	reader, err := dlq.New(q, dlq.Config{DLQURL: url})
	if err != nil {
		return nil, err
	}
	msgs, err := reader.Peek(ctx, 0)
	if err != nil {
		return nil, err
	}
	codes := make([]string, len(msgs))
	for i, m := range msgs {
		codes[i] = orNone(m.FailureCode)
	}
	return codes, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// queueLeft reports how many messages the work queue still holds.
func queueLeft(ctx context.Context, q *sqs.Client, url string) (int, error) {
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		return 0, err
	}
	left := len(out.Messages)
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	for _, v := range attrs.Attributes {
		var n int
		_, _ = fmt.Sscan(v, &n)
		left += n
	}
	return left, nil
}

func printDemo(out io.Writer, plan *caseflow.Plan, outcomes map[string]int, tally *demoTally, r *caseflow.Report, calls map[string]int, sent int, elapsed time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	section := func(title string) { fmt.Fprintf(tw, "\n%s\t\t\n", title) }
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\t\n", k, v) }

	section("STREAM")
	row("messages sent", sent)
	row("work items (idempotency keys)", len(plan.Work))
	row("duplicates (same key, new SQS message)", fmt.Sprintf("%d (%.0f%%)", plan.Duplicates, 100*float64(plan.Duplicates)/float64(sent)))
	row("stage changes sent out of order", plan.OutOfOrder)
	row("poison messages", len(plan.PoisonList))

	// Each message settles once (its final outcome); a delivery whose
	// message comes back (in_flight: its work was running elsewhere; retry,
	// lease_lost, released) is not an outcome of the message, and is
	// counted apart, so the outcomes add up to the messages sent.
	tally.mu.Lock()
	deliveries, settledTotal := 0, 0
	for _, n := range outcomes {
		deliveries += n
	}
	for _, n := range tally.settled {
		settledTotal += n
	}
	section("DELIVERIES (worker outcomes)")
	row("messages settled (each once)", settledTotal)
	for _, k := range slices.Sorted(maps.Keys(tally.settled)) {
		row("  "+k, tally.settled[k])
	}
	for _, code := range slices.Sorted(maps.Keys(tally.terminal)) {
		row("  terminal "+code, tally.terminal[code])
	}
	for _, k := range slices.Sorted(maps.Keys(outcomes)) {
		if again := outcomes[k] - tally.settled[k]; again > 0 {
			row("delivered again, not an outcome: "+k, again)
		}
	}
	row("deliveries in all", deliveries)
	// How the stream's totals become the settled ones.
	failedWork := 0
	for k, n := range r.WorkStates {
		if strings.HasPrefix(k, "FAILED") {
			failedWork += n
		}
	}
	dupElse := plan.Duplicates - tally.settled[worker.OutcomeDuplicate]
	tally.mu.Unlock()
	row("throughput", fmt.Sprintf("%.0f msg/s over %s", float64(sent)/elapsed.Seconds(), elapsed.Round(time.Millisecond)))
	_ = tw.Flush()
	fmt.Fprintf(out, "  the stream settles as: %d work items → %d applied, %d superseded, %d failed;\n", len(plan.Work),
		r.WorkStates["APPLIED"], r.WorkStates["SUPERSEDED"], failedWork)
	fmt.Fprintf(out, "  %d duplicates → %d duplicate, %d with their work's failure (terminal); %d poison → terminal\n",
		plan.Duplicates, tally.settled[worker.OutcomeDuplicate], dupElse, len(plan.PoisonList))
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)

	section("WORK ITEMS (read back from DynamoDB)")
	for _, k := range slices.Sorted(maps.Keys(r.WorkStates)) {
		row(k, r.WorkStates[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Rejections)) {
		row("rejected "+k, r.Rejections[k])
	}
	dlq := 0
	for _, k := range slices.Sorted(maps.Keys(r.DLQ)) {
		row("in DLQ "+k, r.DLQ[k])
		dlq += r.DLQ[k]
	}
	row("in DLQ (total)", dlq)

	section("CALLS BY THE WORKER")
	ddbOps := []string{"DynamoDB.PutItem", "DynamoDB.TransactWriteItems", "DynamoDB.UpdateItem"}
	sqsOps := []string{"SQS.ReceiveMessage", "SQS.DeleteMessageBatch", "SQS.ChangeMessageVisibility", "SQS.SendMessage"}
	perMessage := func(ops []string) string {
		n := 0
		for _, op := range ops {
			n += calls[op]
			row(op, calls[op])
		}
		return fmt.Sprintf("%.2f", float64(n)/float64(sent))
	}
	row("DynamoDB calls per message", perMessage(ddbOps))
	row("SQS calls per message", perMessage(sqsOps))

	section("INVARIANT CHECKS")
	for _, c := range r.Checks {
		name, status, _ := strings.Cut(c, ": ")
		row(name, status)
	}
	verdict := "HOLDS"
	if !r.OK() {
		verdict = "VIOLATED"
	}
	fmt.Fprintf(tw, "\nexactly-once invariant\t%s\t\n", verdict)
	_ = tw.Flush()
}
