package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// verifyTimeout bounds stopping the workers and the checks after the run.
const verifyTimeout = 5 * time.Minute

// run is the state of one chaos run.
type run struct {
	cfg   Config
	out   io.Writer // progress (serialised by outMu)
	outMu sync.Mutex
	ddb   *dynamodb.Client
	q     *sqs.Client
	plan  *caseflow.Plan
	qs    worker.Queues
	table string
	tally *Tally
	sup   *supervisor
	// proxy stands between the workers and DynamoDB in an outage run (nil
	// otherwise).
	proxy *ddbproxy.Proxy
	// chaosDone closes when the killer met its targets.
	chaosDone chan struct{}

	mu      sync.Mutex
	sent    map[string]int    // SQS id → plan index
	segment map[string]string // SQS id → the part of the run that sent it
	// redriven are messages found in the DLQ, moved there by the redrive
	// policy while the run waited for them to settle.
	redriven map[string]bool
}

// Run performs a chaos run and returns its report. The error is for runs
// that could not be carried out (emulators, table, a worker that cannot
// start); a run that finds a violation or times out returns a report whose
// Verdict is VIOLATED and a nil error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	started := time.Now()
	r := &run{cfg: cfg, out: cfg.Progress, tally: NewTally(cfg.Visibility), sent: map[string]int{}, segment: map[string]string{},
		redriven: map[string]bool{}, chaosDone: make(chan struct{})}
	if r.out == nil {
		r.out = io.Discard
	}
	awsCfg := cfg.AWS
	if awsCfg.Credentials == nil {
		awsCfg = emulators.Endpoints{}.AWSConfig()
	}
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		r.progress("starting DynamoDB Local and the SQS emulator on 127.0.0.1 …")
		env, err := emulators.Start(ctx, emulators.Config{Dir: cfg.EmulatorsDir})
		if err != nil {
			return nil, err
		}
		defer func() {
			_ = env.Stop()
			r.progress("emulators stopped")
		}()
		cfg.DynamoDBEndpoint, cfg.SQSEndpoint = env.Endpoints.DynamoDB, env.Endpoints.SQS
		awsCfg = env.AWSConfig()
		r.cfg = cfg
	}
	if awsCfg.Region == "" {
		awsCfg.Region = emulators.Region
	}
	r.ddb = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint) })
	r.q = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) })
	creds, err := awsCfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: credentials for the workers: %w", err)
	}

	r.table = "ddbworker-chaos-" + caseflow.NewID("")[:8]
	if err := tables.Ensure(ctx, r.ddb, tables.Config{Name: r.table}); err != nil {
		return nil, err
	}
	if r.qs, err = worker.CreateQueues(ctx, r.q, worker.QueueConfig{Name: r.table, VisibilityTimeout: cfg.Visibility,
		MaxReceiveCount: cfg.MaxReceiveCount}); err != nil {
		return nil, err
	}
	if r.plan, err = caseflow.GeneratePlan(caseflow.ScenarioConfig{Messages: cfg.Count, DuplicateRatio: cfg.DuplicateRatio,
		ConcurrentRatio: cfg.ConcurrentRatio, Seed: cfg.Seed, StageMismatches: cfg.SingleWrite}); err != nil {
		return nil, err
	}
	if err := caseflow.SeedCases(ctx, r.ddb, r.table, r.plan.CaseIDs); err != nil {
		return nil, err
	}
	if cfg.LogDir == "" {
		if cfg.LogDir, err = os.MkdirTemp("", "ddbworker-chaos-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, err
	}
	r.cfg.LogDir = cfg.LogDir
	logFile, err := os.Create(filepath.Join(cfg.LogDir, "workers.log"))
	if err != nil {
		return nil, err
	}
	logw := bufio.NewWriterSize(logFile, 256*1024)
	defer func() { _ = logw.Flush(); _ = logFile.Close() }()
	r.progress("table %s, queue %s, %d cases seeded; %d workers × %d; logs in %s", r.table, r.qs.URL, len(r.plan.CaseIDs),
		cfg.Workers, cfg.Concurrency, cfg.LogDir)

	workerDDB := cfg.DynamoDBEndpoint
	if cfg.Outage.Enabled {
		// The workers reach DynamoDB only through the proxy; the harness's
		// own clients (seeding, verification) go to DynamoDB Local.
		if r.proxy, err = ddbproxy.Start(ddbproxy.Config{Target: cfg.DynamoDBEndpoint}); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		defer func() { _ = r.proxy.Close() }()
		workerDDB = r.proxy.URL()
		r.progress("the workers reach DynamoDB through the fault proxy %s", workerDDB)
	}

	rep := &Report{Table: r.table, QueueURL: r.qs.URL, DLQURL: r.qs.DLQURL, LogDir: cfg.LogDir, Seed: cfg.Seed, Workers: cfg.Workers,
		Concurrency: cfg.Concurrency, Visibility: cfg.Visibility.String(), Fused: cfg.Fused, SingleWrite: cfg.SingleWrite, Faults: cfg.Faults, Failpoints: cfg.Failpoints,
		WorkItems: len(r.plan.Work), Duplicates: r.plan.Duplicates, OutOfOrder: r.plan.OutOfOrder, Poison: len(r.plan.PoisonList),
		Cases: len(r.plan.CaseIDs), MaxReceiveCount: cfg.MaxReceiveCount}

	r.sup = newSupervisor(&r.cfg, workerEnv(cfg, workerDDB, r.table, r.qs, awsCfg.Region, creds), r.tally, logw)
	runCtx, cancelRun := context.WithTimeout(ctx, cfg.Timeout)
	defer cancelRun()
	stopped := false
	stopWorkers := func() {
		if !stopped {
			stopped = true
			r.progress("stopping the workers (SIGTERM)")
			rep.StopProblems = r.sup.stop(30 * time.Second)
		}
	}
	defer stopWorkers()
	if err := r.sup.startAll(); err != nil {
		return nil, err
	}
	chaosDone := r.chaosDone
	go func() { defer close(chaosDone); r.sup.chaos(runCtx) }()
	stopProgress := r.watch(runCtx)

	runErr := r.drive(runCtx, rep)
	if runErr == nil {
		// The stream drained; the chaos targets may not be met yet (a short
		// stream): wait for them, then for the queue to be empty again.
		r.progress("waiting for the chaos targets (%d kills, %d pauses)", cfg.Kills, cfg.Pauses)
		select {
		case <-chaosDone:
			_, runErr = r.waitDrained(runCtx, "final", r.sentIDs())
		case <-runCtx.Done():
			runErr = runCtx.Err()
		}
	}
	stopProgress()
	cancelRun()
	<-chaosDone
	if runErr != nil {
		if errors.Is(runErr, context.DeadlineExceeded) && ctx.Err() == nil {
			rep.TimedOut = true
			r.progress("TIMEOUT after %s: %v", cfg.Timeout, runErr)
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: interrupted: %w", ctx.Err())
		} else {
			return nil, runErr
		}
	}
	if err := r.sup.err(); err != nil {
		return nil, err
	}

	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	defer cancel()
	stopWorkers()
	rep.ProcessesStarted, rep.HarnessKills, rep.Pauses, rep.UnexpectedExits = r.sup.counts()
	rep.Logs = r.tally.Snapshot()
	if err := r.verify(vctx, rep); err != nil {
		return nil, err
	}
	rep.Duration = time.Since(started)
	rep.finish()
	if !rep.OK() {
		if err := r.dumpTable(vctx, filepath.Join(cfg.LogDir, "table.jsonl")); err != nil {
			r.progress("table dump failed: %v", err)
		}
	}
	return rep, nil
}

// drive sends phase 1, waits for it to drain, then phase 2.
func (r *run) drive(ctx context.Context, rep *Report) error {
	for phase := 1; phase <= 2; phase++ {
		start := time.Now()
		var idx []int
		for i, m := range r.plan.Messages {
			if m.Phase == phase {
				idx = append(idx, i)
			}
		}
		rate := 0.0
		if phase == 1 {
			rate = r.cfg.SendRate
		}
		var ids []string
		var err error
		if phase == 1 && r.cfg.Outage.Enabled {
			ids, err = r.driveOutage(ctx, rep, idx, r.chaosDone)
		} else {
			r.progress("phase %d: sending %d messages", phase, len(idx))
			ids, err = r.send(ctx, idx, rate)
			r.mark(ids, fmt.Sprintf("phase %d", phase))
			if err == nil {
				_, err = r.waitDrained(ctx, fmt.Sprintf("phase %d", phase), ids)
			}
		}
		if phase == 1 {
			rep.SentPhase1 = len(ids)
		} else {
			rep.SentPhase2 = len(ids)
		}
		rep.Sent += len(ids)
		if err != nil {
			return err
		}
		if phase == 1 {
			rep.Phase1 = time.Since(start)
		} else {
			rep.Phase2 = time.Since(start)
		}
		r.progress("phase %d drained in %s", phase, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// mark records which part of the run sent ids.
func (r *run) mark(ids []string, segment string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.segment[id] = segment
	}
}

// send sends plan messages idx in batches of 10 (4 concurrent batches), or
// paced at rate messages/s in batches of about one second's worth (1..10),
// and records each SQS MessageId.
func (r *run) send(ctx context.Context, idx []int, rate float64) ([]string, error) {
	batches := make(chan []int)
	var mu sync.Mutex
	var ids []string
	var firstErr error
	var wg sync.WaitGroup
	senders := 4
	for range senders {
		wg.Go(func() {
			for b := range batches {
				got, err := r.sendBatch(ctx, b)
				mu.Lock()
				ids = append(ids, got...)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	size := 10
	if rate > 0 {
		size = min(10, max(1, int(rate)))
	}
	start := time.Now()
	for at := 0; at < len(idx); at += size {
		if rate > 0 {
			due := start.Add(time.Duration(float64(at) / rate * float64(time.Second)))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(due)):
			}
		}
		if ctx.Err() != nil {
			break
		}
		batches <- idx[at:min(at+size, len(idx))]
	}
	close(batches)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return ids, firstErr
}

// sendBatch sends one batch; entries SQS refuses are retried a few times
// (never a whole batch that may have been accepted: a second copy of a
// poison message would be a second rejection the plan does not expect).
func (r *run) sendBatch(ctx context.Context, batch []int) ([]string, error) {
	var ids []string
	pending := batch
	for try := 0; len(pending) > 0; try++ {
		if try == 5 {
			return ids, fmt.Errorf("chaos: %d messages refused by SQS after %d tries", len(pending), try)
		}
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(pending))
		for i, mi := range pending {
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(mi)), MessageBody: aws.String(r.plan.Messages[mi].Body)}
		}
		out, err := r.q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.qs.URL), Entries: entries})
		if err != nil {
			return ids, fmt.Errorf("chaos: send: %w", err)
		}
		r.mu.Lock()
		for _, ok := range out.Successful {
			mi, _ := strconv.Atoi(aws.ToString(ok.Id))
			id := aws.ToString(ok.MessageId)
			r.sent[id] = mi
			ids = append(ids, id)
		}
		r.mu.Unlock()
		pending = pending[:0:0]
		for _, f := range out.Failed {
			mi, _ := strconv.Atoi(aws.ToString(f.Id))
			pending = append(pending, mi)
		}
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return ids, nil
}

func (r *run) sentIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.sent))
	for id := range r.sent {
		ids = append(ids, id)
	}
	return ids
}

// waitDrained returns once every id reached a final outcome in some log
// (or was moved to the DLQ by the redrive policy) and the queue held
// nothing visible, in flight or delayed at two polls in a row, one second
// apart; drained is the first of those two polls.
func (r *run) waitDrained(ctx context.Context, what string, ids []string) (drained time.Time, err error) {
	empty := 0
	var lastPeek, missingSince time.Time
	for {
		now := time.Now()
		settled := r.settled(ids)
		depth, derr := queueDepth(ctx, r.q, r.qs.URL)
		if derr != nil || depth != 0 || settled == len(ids) {
			missingSince = time.Time{}
		}
		switch {
		case derr != nil || depth != 0:
			empty = 0
		case settled == len(ids):
			if empty == 0 {
				drained = now
			}
			empty++
			if empty >= 2 {
				return drained, nil
			}
		default:
			// The queue is empty, yet messages have no final outcome: logs
			// a moment behind, or the redrive policy moved them to the DLQ.
			empty = 0
			if missingSince.IsZero() {
				missingSince = now
			}
			if now.Sub(missingSince) >= 3*time.Second && now.Sub(lastPeek) >= 5*time.Second {
				lastPeek = now
				if err := r.peekRedriven(ctx); err != nil {
					r.progress("%s: could not read the DLQ: %v", what, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: %d of %d messages settled: %w", what, settled, len(ids), ctx.Err())
		case <-r.sup.fatal:
			return time.Time{}, r.sup.err()
		case <-time.After(time.Second):
		}
	}
}

// settled counts the ids that reached a final outcome in some log or were
// moved to the DLQ by the redrive policy.
func (r *run) settled(ids []string) int {
	r.mu.Lock()
	redriven := maps.Clone(r.redriven)
	r.mu.Unlock()
	n := r.tally.Settled(ids)
	for _, id := range ids {
		if redriven[id] && !r.tally.IsSettled(id) {
			n++
		}
	}
	return n
}

// peekRedriven reads the DLQ (deleting nothing) and records the messages
// the redrive policy moved there.
func (r *run) peekRedriven(ctx context.Context) error {
	copies, err := drainDLQ(ctx, r.q, r.qs.DLQURL)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range copies {
		if c.Redrive && !r.redriven[c.SourceID] {
			r.redriven[c.SourceID] = true
			r.progress("message %s was moved to the DLQ by the redrive policy (maxReceiveCount %d)", c.SourceID, r.cfg.MaxReceiveCount)
		}
	}
	return nil
}

// queueDepth is visible + in flight + delayed (SQS's approximate counters).
func queueDepth(ctx context.Context, q *sqs.Client, url string) (int, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, v := range out.Attributes {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("chaos: queue attribute %q: %w", v, err)
		}
		total += n
	}
	return total, nil
}

// queueLeft is what the work queue still holds once the workers stopped:
// one receive (which also refreshes the emulator's counters) plus the
// counters.
func queueLeft(ctx context.Context, q *sqs.Client, url string) (int, error) {
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		return 0, err
	}
	n, err := queueDepth(ctx, q, url)
	if err != nil {
		return 0, err
	}
	// The received messages are now in flight and counted by NotVisible.
	return max(n, len(out.Messages)), nil
}

// verify reads the end state and runs the checks.
func (r *run) verify(ctx context.Context, rep *Report) error {
	r.progress("verifying: DLQ, work queue, and the whole table")
	copies, err := drainDLQ(ctx, r.q, r.qs.DLQURL)
	if err != nil {
		return err
	}
	left, err := queueLeft(ctx, r.q, r.qs.URL)
	if err != nil {
		return fmt.Errorf("chaos: read the work queue: %w", err)
	}
	rep.QueueLeft = left
	vr, err := caseflow.VerifyWith(ctx, r.ddb, r.table, r.plan, caseflow.VerifyOptions{SingleWriteStages: r.cfg.SingleWrite,
		Outcomes: r.tally.KeyOutcomes()})
	if err != nil {
		return err
	}
	rep.WorkStates, rep.Rejections = vr.WorkStates, vr.Rejections
	if r.cfg.SingleWrite {
		rep.SingleWriteStages = vr.SingleWrite
	}
	// caseflow.Verify's checks, as they are.
	for _, c := range vr.Checks {
		name, status, _ := strings.Cut(c, ": ")
		ch := Check{Name: name, OK: status == "ok"}
		if !ch.OK {
			ch.Detail = strings.TrimSuffix(strings.TrimPrefix(status, "FAILED ("), ")")
		}
		rep.Checks = append(rep.Checks, ch)
	}
	rep.Violations = append(rep.Violations, vr.Violations...)

	r.mu.Lock()
	sent := make(map[string]int, len(r.sent))
	for k, v := range r.sent {
		sent[k] = v
	}
	r.mu.Unlock()
	st, missing, unexpected := CheckDLQ(r.plan, sent, copies)
	rep.DLQ = st
	rep.check("every terminal message has a DLQ copy with its code (by source id)", missing)
	rep.check("no DLQ copy of a message that must not end terminal", unexpected)
	dead := DeadLettered(r.plan, sent, copies)
	rep.DeadLettered = len(dead)
	var deadV []string
	r.mu.Lock()
	for _, id := range dead {
		i := sent[id]
		deadV = append(deadV, fmt.Sprintf("message %s (plan #%d, %s), sent in the %s, was dead-lettered by the redrive policy (maxReceiveCount %d)",
			id, i, describe(r.plan, i), r.segment[id], r.cfg.MaxReceiveCount))
	}
	r.mu.Unlock()
	rep.check(fmt.Sprintf("no healthy message dead-lettered by the redrive policy (maxReceiveCount %d)", r.cfg.MaxReceiveCount), deadV)
	if err := r.verifyOutage(ctx, rep, dead, r.sup.transitions()); err != nil {
		return err
	}

	// A message the redrive policy moved never reaches a final outcome in
	// a log; the DLQ checks above account for it.
	redriven := map[string]bool{}
	for _, c := range copies {
		if c.Redrive {
			redriven[c.SourceID] = true
		}
	}
	var unsettled []string
	for id, i := range sent {
		if !r.tally.IsSettled(id) && !redriven[id] {
			unsettled = append(unsettled, fmt.Sprintf("message %s (plan #%d, %s) never reached a final outcome in any log", id, i, describe(r.plan, i)))
		}
	}
	rep.Unsettled = unsettled
	rep.check("every sent message reached a final outcome (worker logs)", unsettled)
	var notAll []string
	if want := len(r.plan.Messages); rep.Sent != want {
		notAll = append(notAll, fmt.Sprintf("%d of the plan's %d messages were sent", rep.Sent, want))
	}
	rep.check("every plan message was sent", notAll)
	var leftV []string
	if left != 0 {
		leftV = append(leftV, fmt.Sprintf("%d messages left in the work queue", left))
	}
	rep.check("work queue empty", leftV)
	var exits []string
	for _, u := range rep.UnexpectedExits {
		exits = append(exits, "worker "+u)
	}
	rep.check("no worker exited on its own except at a failpoint", exits)
	rep.Warnings = warnings(rep)
	return nil
}

// warnings are findings that break no invariant but are bugs or need a
// look: requests refused as malformed, workers that did not stop cleanly.
func warnings(rep *Report) []string {
	var out []string
	for _, code := range slices.Sorted(maps.Keys(rep.Logs.ErrorCodes)) {
		if IsMalformed(code) {
			out = append(out, fmt.Sprintf("the workers logged %d failures with %s: they sent requests the service refuses as malformed (a client bug, not a transient fault)",
				rep.Logs.ErrorCodes[code], code))
		}
	}
	if n := rep.Logs.Events["delete gave up; the redelivery will be a duplicate"]; n > 0 && n*10 > rep.Sent {
		out = append(out, fmt.Sprintf("%d deletes were abandoned for %d messages sent: redeliveries cost far more than the injected SQS faults explain", n, rep.Sent))
	}
	for _, p := range rep.StopProblems {
		out = append(out, "stop: "+p)
	}
	return out
}

// dumpTable writes every item of the table, one JSON object a line, for
// the investigation of a violation.
func (r *run) dumpTable(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	in := &dynamodb.ScanInput{TableName: aws.String(r.table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := r.ddb.Scan(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range out.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				return err
			}
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			_, _ = w.Write(append(b, '\n'))
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	r.progress("table dumped to %s", path)
	return w.Flush()
}

// watch prints a progress line every few seconds until the returned stop
// is called.
func (r *run) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r.sup.flushLog()
			ids := r.sentIDs()
			s := r.tally.Snapshot()
			started, kills, pauses, unexpected := r.sup.counts()
			r.progress("settled %d/%d sent | applied %d dup %d superseded %d terminal %d retry %d in-flight %d lease-lost %d | kills %d+%d failpoint | pauses %d | faults %d | starts %d | odd exits %d",
				r.tally.Settled(ids), len(ids), s.Outcomes[worker.OutcomeApplied], s.Outcomes[worker.OutcomeDuplicate],
				s.Outcomes[worker.OutcomeSuperseded], s.Outcomes[worker.OutcomeTerminal], s.Outcomes[worker.OutcomeRetry],
				s.Outcomes[worker.OutcomeInFlight], s.Outcomes[worker.OutcomeLeaseLost], kills, s.FailpointKillTotal(), pauses,
				s.FaultTotal(), started, len(unexpected))
		}
	}()
	return func() { cancel(); <-done }
}

func (r *run) progress(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.out, "[chaos %s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// workerEnv is the environment of every worker process: the harness's own
// minus DDBWORKER_* and AWS_* variables, plus the table, queues, endpoints
// and static credentials.
func workerEnv(cfg Config, ddbEndpoint, table string, qs worker.Queues, region string, creds aws.Credentials) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DDBWORKER_") || strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	if region == "" {
		region = emulators.Region
	}
	env = append(env,
		"DDBWORKER_TABLE="+table,
		"DDBWORKER_QUEUE_URL="+qs.URL,
		"DDBWORKER_DLQ_URL="+qs.DLQURL,
		"DDBWORKER_DYNAMODB_ENDPOINT="+ddbEndpoint,
		"DDBWORKER_SQS_ENDPOINT="+cfg.SQSEndpoint,
		"DDBWORKER_REGION="+region,
		"AWS_REGION="+region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true",
	)
	if creds.SessionToken != "" {
		env = append(env, "AWS_SESSION_TOKEN="+creds.SessionToken)
	}
	return env
}
