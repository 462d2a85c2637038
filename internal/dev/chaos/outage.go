package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Outage window names, in the order a run opens them.
const (
	WindowThrottle    = "throttle"
	WindowServerError = "5xx"
	WindowHang        = "hang"
)

// Outage defaults.
const (
	// OutageMaxReceiveCount is the work queue's maxReceiveCount in an
	// outage run: the value the SQS console proposes, and the one most
	// queues run with.
	OutageMaxReceiveCount = 10
	// OutageVisibility is the visibility timeout (and lease) of an outage
	// run: longer than the workers' 5 s call timeout, so a gate call that
	// hangs until the timeout does not outlive its message's visibility.
	OutageVisibility = 10 * time.Second
	// DefaultOutageThrottle, DefaultOutageServerError and DefaultOutageHang
	// are the windows' lengths.
	DefaultOutageThrottle    = 150 * time.Second
	DefaultOutageServerError = 90 * time.Second
	DefaultOutageHang        = 60 * time.Second
	// DefaultOutageRecover bounds the drain after each window.
	DefaultOutageRecover = 2 * time.Minute
	// DefaultOutageRate is the traffic during a window, in messages per
	// second for all workers together.
	DefaultOutageRate = 1.0
	// DefaultOutageMaxRequestRate bounds the DynamoDB requests per second
	// per worker process during a window.
	DefaultOutageMaxRequestRate = 5.0
	// DefaultOutageGap is the quiet time before each window: the workers'
	// default --health-window.
	DefaultOutageGap = 10 * time.Second
	// minWarmup is the fewest messages the warm-up sends.
	minWarmup = 50
)

// Outage shapes the outage phases of a run. With Enabled, the workers reach
// DynamoDB only through a fault proxy (internal/ddbproxy) that the harness
// starts in front of DynamoDB Local; the harness's own clients go to
// DynamoDB Local directly. The run then goes:
//
//  1. warm-up: the plan's phase-1 messages not kept for the windows are
//     sent (at Config.SendRate) while the killer makes its kills and
//     pauses; the warm-up drains;
//  2. each window (throttle, 5xx, hang), Gap after the drain before it:
//     the proxy answers every request of the workers in that mode for the
//     window's length while traffic keeps arriving at Rate; then the proxy
//     passes again and the run waits until every message sent so far
//     settled and the queue is empty;
//  3. phase 2 (the hash-mismatch probes), as in every run.
//
// The killer and the pauses act only during the warm-up: a kill raises the
// receive count of every message the process held, and a restarted process
// has to learn the outage again by failing calls, each costing a receive;
// with maxReceiveCount 10 the run would then measure the kills, not the
// health gate. The SDK fault rates stay on throughout (they are per call
// attempt and rarely exhaust a call's three attempts); the failpoints are
// off by default (see Config.Failpoints).
type Outage struct {
	// Enabled turns the outage phases on.
	Enabled bool
	// Throttle, ServerError and Hang are the windows' lengths: every
	// request answered 400 ProvisionedThroughputExceededException, 500/503
	// in turn, or held unanswered until the client gives up. Defaults:
	// DefaultOutageThrottle, DefaultOutageServerError, DefaultOutageHang;
	// negative skips a window.
	Throttle, ServerError, Hang time.Duration
	// Recover bounds the drain after each window: from the window's end
	// until every message sent so far reached a final outcome and the
	// queue shows nothing visible or in flight. Default:
	// DefaultOutageRecover.
	Recover time.Duration
	// Rate is the messages per second sent during each window, all
	// workers together. Default: DefaultOutageRate.
	Rate float64
	// MaxRequestRate bounds the DynamoDB requests per second per worker
	// process during each window. Default: DefaultOutageMaxRequestRate.
	MaxRequestRate float64
	// SkipDeploy leaves the workers alone during the windows. By default
	// each window replaces every worker in its middle, as a rolling deploy
	// does (SIGTERM, drain, a new process), so the run also shows that a
	// deploy during an outage costs no healthy message and no business
	// attempt.
	SkipDeploy bool
	// Gap is the quiet time (no traffic) between a drain and the next
	// window. The workers' health detector judges the calls of its last
	// --health-window, at least half of which must fail: a window opened
	// right after a drain's burst of successful calls would measure how
	// long those take to age out, and the detection would depend on how
	// fast the previous window drained. Default: the workers' health
	// window (DefaultOutageGap unless Config.HealthWindow is set);
	// negative: none.
	Gap time.Duration
}

// window is one outage window of a run.
type window struct {
	Name     string
	Mode     ddbproxy.Mode
	Duration time.Duration
}

// messages is how many messages the window sends at rate.
func (w window) messages(rate float64) int {
	return int(math.Ceil(w.Duration.Seconds() * rate))
}

func (o *Outage) defaults() []error {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&o.Throttle, DefaultOutageThrottle)
	set(&o.ServerError, DefaultOutageServerError)
	set(&o.Hang, DefaultOutageHang)
	set(&o.Recover, DefaultOutageRecover)
	if o.Rate == 0 {
		o.Rate = DefaultOutageRate
	}
	if o.MaxRequestRate == 0 {
		o.MaxRequestRate = DefaultOutageMaxRequestRate
	}
	var errs []error
	if len(o.windows()) == 0 {
		errs = append(errs, errors.New("chaos: Outage: every window is skipped"))
	}
	for _, w := range o.windows() {
		if w.Duration < time.Second {
			errs = append(errs, fmt.Errorf("chaos: Outage: the %s window %s must be at least 1s", w.Name, w.Duration))
		}
	}
	if o.Recover <= 0 {
		errs = append(errs, fmt.Errorf("chaos: Outage.Recover %s must be positive", o.Recover))
	}
	if o.Rate <= 0 || o.Rate > 100 {
		errs = append(errs, fmt.Errorf("chaos: Outage.Rate %v must be within (0, 100] messages/s", o.Rate))
	}
	if o.Gap < 0 {
		o.Gap = 0
	}
	if o.MaxRequestRate <= 0 {
		errs = append(errs, fmt.Errorf("chaos: Outage.MaxRequestRate %v must be positive", o.MaxRequestRate))
	}
	return errs
}

// windows are the windows not skipped, in run order.
func (o *Outage) windows() []window {
	var out []window
	for _, w := range []window{{WindowThrottle, ddbproxy.Throttle, o.Throttle}, {WindowServerError, ddbproxy.ServerError, o.ServerError},
		{WindowHang, ddbproxy.Hang, o.Hang}} {
		if w.Duration > 0 {
			out = append(out, w)
		}
	}
	return out
}

// windowMessages is how many messages all windows send together.
func (o *Outage) windowMessages() int {
	n := 0
	for _, w := range o.windows() {
		n += w.messages(o.Rate)
	}
	return n
}

// OutageReport is what the outage phases measured.
type OutageReport struct {
	MaxReceiveCount int            `json:"maxReceiveCount"`
	Rate            float64        `json:"messagesPerSecondDuringWindows"`
	RecoverBound    time.Duration  `json:"recoverBoundNs"`
	MaxRequestRate  float64        `json:"maxRequestsPerSecondPerWorker"`
	Gap             time.Duration  `json:"quietBeforeEachWindowNs"`
	WarmupSent      int            `json:"warmupMessagesSent"`
	WarmupDrained   time.Duration  `json:"warmupDrainedNs"`
	Windows         []WindowReport `json:"windows"`
	// Outside the windows (the warm-up and phase 2): healthy messages
	// dead-lettered by the redrive policy, work items terminal for
	// infrastructure reasons, and health transitions the workers logged.
	DeadLetteredOutside  int `json:"deadLetteredOutsideWindows"`
	TerminalInfraOutside int `json:"terminalInfraOutsideWindows"`
	TransitionsOutside   int `json:"healthTransitionsOutsideWindows"`
}

// WindowReport is one outage window, from its start until the queue drained
// after it.
type WindowReport struct {
	Name     string        `json:"name"`
	Mode     string        `json:"proxyMode"`
	Duration time.Duration `json:"durationNs"`
	Sent     int           `json:"messagesSent"`

	// Requests are the workers' DynamoDB requests that reached the proxy
	// during the window (all answered in its mode, or held), by operation.
	Requests     int            `json:"requests"`
	RequestsByOp map[string]int `json:"requestsByOperation"`
	// RequestRate is Requests per second of the window per worker
	// process; PeakRequestRate the same over its busiest 10 seconds.
	RequestRate     float64 `json:"requestsPerSecondPerWorker"`
	PeakRequestRate float64 `json:"peakRequestsPerSecondPerWorker"`

	// Health transitions the workers logged from the window's start until
	// the queue drained after it, and the successors (started by the
	// window's deploy) that passed their startup checks in that span.
	Unhealthy int `json:"unhealthyTransitions"`
	Healthy   int `json:"healthyTransitions"`
	Started   int `json:"successorsStarted"`
	// WorkersPaused counts the worker slots whose process paused;
	// WorkersResumed those serving again: a process of the slot logged
	// "database healthy", or a successor in it passed its startup checks
	// (a process the deploy replaced while paused never resumes itself).
	WorkersPaused  int `json:"workersPaused"`
	WorkersResumed int `json:"workersResumed"`
	// PausedAfter is from the window's start to the last worker's
	// "database unhealthy" line; ResumedAfter from the window's end to the
	// last worker's "database healthy" or successor's "worker started"
	// line.
	PausedAfter  time.Duration `json:"lastPausedAfterNs"`
	ResumedAfter time.Duration `json:"lastResumedAfterNs"`

	// Deployed counts the workers replaced (SIGTERM, restart) in the
	// window's middle.
	Deployed int `json:"workersDeployed"`
	// Parked and Retried are the deliveries the workers logged with these
	// outcomes from the window's start until the queue drained.
	Parked  int `json:"deliveriesParked"`
	Retried int `json:"deliveriesRetried"`
	// MaxReceiveCount is the highest receive count a worker logged for a
	// message sent during the window.
	MaxReceiveCount int `json:"highestReceiveCount"`

	// DeadLettered are healthy messages sent during the window that SQS's
	// redrive policy moved to the DLQ.
	DeadLettered int `json:"healthyDeadLettered"`
	// TerminalInfra are work items that ended FAILED_TERMINAL for an
	// infrastructure reason during the window or its drain.
	TerminalInfra int `json:"terminalForInfrastructure"`

	// Recovered is from the window's end until every message sent so far
	// settled and the queue showed nothing visible or in flight.
	Recovered time.Duration `json:"drainedAfterNs"`

	start, end, drained time.Time
	ids                 []string
}

// contains reports whether t lies within the window or its drain.
func (w *WindowReport) contains(t time.Time) bool {
	return !t.Before(w.start) && !t.After(w.drained)
}

// transition is one health transition a worker process logged.
type transition struct {
	proc    string
	slot    int
	healthy bool // "database healthy"; neither: "database unhealthy"
	started bool // "worker started": past the startup checks
	at      time.Time
}

// driveOutage runs phase 1 of an outage run: the warm-up with the killer,
// then each window and its drain. It returns the ids it sent.
func (r *run) driveOutage(ctx context.Context, rep *Report, idx []int, chaosDone <-chan struct{}) ([]string, error) {
	o := r.cfg.Outage
	wins := o.windows()
	need := o.windowMessages()
	if len(idx) < need+minWarmup {
		return nil, fmt.Errorf("chaos: the plan has %d phase-1 messages; the outage windows send %d and the warm-up needs at least %d: raise Count",
			len(idx), need, minWarmup)
	}
	out := &OutageReport{MaxReceiveCount: r.cfg.MaxReceiveCount, Rate: o.Rate, RecoverBound: o.Recover, MaxRequestRate: o.MaxRequestRate, Gap: o.Gap}
	rep.Outage = out
	warm, rest := idx[:len(idx)-need], idx[len(idx)-need:]

	start := time.Now()
	r.progress("warm-up: sending %d messages while the killer works (%d kills, %d pauses)", len(warm), r.cfg.Kills, r.cfg.Pauses)
	all, err := r.send(ctx, warm, r.cfg.SendRate)
	r.mark(all, "warm-up")
	out.WarmupSent = len(all)
	if err != nil {
		return all, err
	}
	select {
	case <-chaosDone:
	case <-ctx.Done():
		return all, ctx.Err()
	}
	if _, err := r.waitDrained(ctx, "warm-up", all); err != nil {
		return all, err
	}
	out.WarmupDrained = time.Since(start)
	r.progress("warm-up drained in %s; the killer is done", out.WarmupDrained.Round(time.Millisecond))

	for _, w := range wins {
		if o.Gap > 0 {
			// A timer for the planned quiet time, not a wait for
			// asynchronous work.
			select {
			case <-ctx.Done():
				return all, ctx.Err()
			case <-time.After(o.Gap):
			}
		}
		n := w.messages(o.Rate)
		wr, err := r.window(ctx, w, rest[:n])
		rest = rest[n:]
		all = append(all, wr.ids...)
		out.Windows = append(out.Windows, *wr)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// window opens one outage window: the proxy answers in w's mode for its
// length while idx are sent at the outage rate; then it passes again and
// the run waits for the queue to drain.
func (r *run) window(ctx context.Context, w window, idx []int) (*WindowReport, error) {
	wr := &WindowReport{Name: w.Name, Mode: w.Mode.String(), RequestsByOp: map[string]int{}}
	before := r.tally.Snapshot()
	stats0 := r.proxy.Stats()
	r.proxy.SetMode(w.Mode)
	wr.start = time.Now()
	r.progress("window %s: every DynamoDB request of the workers answered %s for %s; %d messages arrive meanwhile",
		w.Name, w.Mode, w.Duration, len(idx))

	// One sample of the window's requests a second, for the busiest 10 s.
	samples := []int{0}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	var sampleMu sync.Mutex
	sampling.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
			n := r.proxy.Stats().ByMode[w.Mode] - stats0.ByMode[w.Mode]
			sampleMu.Lock()
			samples = append(samples, n)
			sampleMu.Unlock()
		}
	})

	// The deploy in the window's middle, while traffic keeps arriving.
	deployed := make(chan int, 1)
	if r.cfg.Outage.SkipDeploy {
		deployed <- 0
	} else {
		go func() {
			select {
			case <-ctx.Done():
				deployed <- 0
				return
			case <-time.After(w.Duration / 2): // a timer for the planned moment, not a wait for async work
			}
			r.progress("window %s: deploying (every worker SIGTERMed and replaced, one at a time)", w.Name)
			deployed <- r.sup.deploy(ctx)
		}()
	}
	ids, sendErr := r.send(ctx, idx, r.cfg.Outage.Rate)
	r.mark(ids, w.Name+" window")
	wr.ids, wr.Sent = ids, len(ids)
	if sendErr == nil {
		// The rest of the window's planned length: a timer, not a wait for
		// asynchronous work.
		select {
		case <-ctx.Done():
			sendErr = ctx.Err()
		case <-time.After(time.Until(wr.start.Add(w.Duration))):
		}
	}
	wr.Deployed = <-deployed
	stats1 := r.proxy.Stats()
	r.proxy.SetMode(ddbproxy.Pass)
	wr.end = time.Now()
	stopSampling()
	sampling.Wait()
	wr.Duration = wr.end.Sub(wr.start)

	wr.Requests = stats1.ByMode[w.Mode] - stats0.ByMode[w.Mode]
	for op, n := range stats1.Requests {
		if d := n - stats0.Requests[op]; d > 0 {
			if op == "" {
				op = "(none)"
			}
			wr.RequestsByOp[op] = d
		}
	}
	samples = append(samples, wr.Requests)
	workers := float64(r.cfg.Workers)
	wr.RequestRate = float64(wr.Requests) / wr.Duration.Seconds() / workers
	wr.PeakRequestRate = peakRate(samples, 10) / workers
	if sendErr != nil {
		return wr, sendErr
	}
	r.progress("window %s over: %d DynamoDB requests (%.2f/s per worker); waiting for the queue to drain (bound %s)",
		w.Name, wr.Requests, wr.RequestRate, r.cfg.Outage.Recover)

	drained, err := r.waitDrained(ctx, "after the "+w.Name+" window", r.sentIDs())
	if err != nil {
		wr.drained = time.Now()
		return wr, err
	}
	wr.drained = drained
	wr.Recovered = drained.Sub(wr.end)
	after := r.tally.Snapshot()
	wr.Parked = after.Outcomes[worker.OutcomeParked] - before.Outcomes[worker.OutcomeParked]
	wr.Retried = after.Outcomes[worker.OutcomeRetry] - before.Outcomes[worker.OutcomeRetry]
	wr.MaxReceiveCount = r.tally.MaxReceiveCount(wr.ids)
	r.progress("window %s: drained %s after its end", w.Name, wr.Recovered.Round(time.Millisecond))
	return wr, nil
}

// peakRate is the highest count per second over span consecutive seconds
// of cumulative per-second samples (the whole run when shorter).
func peakRate(samples []int, span int) float64 {
	if len(samples) < 2 {
		return 0
	}
	if len(samples)-1 <= span {
		return float64(samples[len(samples)-1]-samples[0]) / float64(len(samples)-1)
	}
	peak := 0
	for i := span; i < len(samples); i++ {
		peak = max(peak, samples[i]-samples[i-span])
	}
	return float64(peak) / float64(span)
}

// infraCodes are the failure codes of infrastructure trouble
// (failure.Error.Infrastructure), and HOT_KEY_THROTTLED: the bound on a
// hot key's throttling ends work for the database's reasons too.
var infraCodes = []string{failure.CodeThrottled, failure.CodeServiceUnavailable, failure.CodeTimeout, failure.CodeTransactionConflict,
	failure.CodeShutdown, failure.CodeReplicatedWriteConflict, failure.CodeHotKeyParked, failure.CodeHotKeyThrottled}

// lastFailure reads the last failure's code quoted in the message of a
// MAX_ATTEMPTS_EXCEEDED or RETRY_WINDOW_EXPIRED record (failure.Policy.Before).
var lastFailure = regexp.MustCompile(`last failure ([A-Z][A-Z_]*):`)

// InfraTerminal reports whether a FAILED_TERMINAL record with this code and
// message ended for an infrastructure reason: its code is one, or its
// attempts ran out (or its retry window passed) and the last failure was
// one.
func InfraTerminal(code, message string) bool {
	if slices.Contains(infraCodes, code) {
		return true
	}
	if code != failure.CodeMaxAttempts && code != failure.CodeRetryWindowExpired {
		return false
	}
	m := lastFailure.FindStringSubmatch(message)
	return m != nil && slices.Contains(infraCodes, m[1])
}

// infraTerminal is one record terminal for infrastructure reasons.
type infraTerminal struct {
	key, messageType, code, message string
	failedAt                        time.Time
}

// scanInfraTerminal reads every FAILED_TERMINAL inbox record of the table
// and returns those that ended for infrastructure reasons.
func scanInfraTerminal(ctx context.Context, api *dynamodb.Client, table string) ([]infraTerminal, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("#s = :t"),
		ExpressionAttributeNames:  map[string]string{"#s": attr.Status},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":t": &ddbtypes.AttributeValueMemberS{Value: string(inbox.StatusFailedTerminal)}}}
	var out []infraTerminal
	for {
		page, err := api.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("chaos: scan for terminal records: %w", err)
		}
		for _, it := range page.Items {
			pk, _ := it[tables.DefaultLayout().PartitionKey].(*ddbtypes.AttributeValueMemberS)
			if pk == nil || !(strings.HasPrefix(pk.Value, "IDEMP#") || strings.HasPrefix(pk.Value, "REJECT#")) {
				continue
			}
			rec, err := (inbox.Store{}).Decode(it)
			if err != nil {
				return nil, fmt.Errorf("chaos: %w", err)
			}
			if !InfraTerminal(rec.FailureCode, rec.FailureMessage) {
				continue
			}
			at, _ := time.Parse(inbox.TimeLayout, rec.FailedAt)
			out = append(out, infraTerminal{key: rec.Key, messageType: rec.MessageType, code: rec.FailureCode, message: rec.FailureMessage, failedAt: at})
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// verifyOutage attributes what the end state shows to the windows (dead
// are the healthy messages the redrive policy dead-lettered; verify checks
// them) and adds the outage checks: no work item terminal for
// infrastructure reasons, the request rate during each window and the
// drain after it within their bounds.
func (r *run) verifyOutage(ctx context.Context, rep *Report, dead []string, transitions []transition) error {
	out := rep.Outage
	if out == nil {
		return nil
	}
	windows := out.Windows
	windowOf := map[string]int{}
	for i := range windows {
		for _, id := range windows[i].ids {
			windowOf[id] = i
		}
	}

	for _, id := range dead {
		if wi, ok := windowOf[id]; ok {
			windows[wi].DeadLettered++
		} else {
			out.DeadLetteredOutside++
		}
	}

	terminal, err := scanInfraTerminal(ctx, r.ddb, r.table)
	if err != nil {
		return err
	}
	var infra []string
	for _, t := range terminal {
		where := "outside the windows"
		if i := slices.IndexFunc(windows, func(w WindowReport) bool { return w.contains(t.failedAt) }); i >= 0 {
			windows[i].TerminalInfra++
			where = "during the " + windows[i].Name + " window or its drain"
		} else {
			out.TerminalInfraOutside++
		}
		infra = append(infra, fmt.Sprintf("%s %s ended FAILED_TERMINAL %s at %s, %s: %s", t.key, t.messageType, t.code,
			inbox.FormatTime(t.failedAt), where, truncate(t.message, 200)))
	}

	for i := range windows {
		w := &windows[i]
		paused, resumed := map[int]bool{}, map[int]bool{}
		for _, tr := range transitions {
			if !w.contains(tr.at) {
				continue
			}
			if tr.healthy || tr.started {
				if tr.healthy {
					w.Healthy++
				} else {
					w.Started++
				}
				resumed[tr.slot] = true
				if tr.at.After(w.end) {
					w.ResumedAfter = max(w.ResumedAfter, tr.at.Sub(w.end))
				}
			} else {
				w.Unhealthy++
				paused[tr.slot] = true
				w.PausedAfter = max(w.PausedAfter, tr.at.Sub(w.start))
			}
		}
		w.WorkersPaused, w.WorkersResumed = len(paused), len(resumed)
	}
	for _, tr := range transitions {
		if tr.started {
			continue
		}
		if !slices.ContainsFunc(windows, func(w WindowReport) bool { return w.contains(tr.at) }) {
			out.TransitionsOutside++
		}
	}

	var rate, drain []string
	for _, w := range windows {
		if w.RequestRate > out.MaxRequestRate {
			rate = append(rate, fmt.Sprintf("%s window: %d DynamoDB requests in %s = %.2f per second per worker, bound %.0f",
				w.Name, w.Requests, w.Duration.Round(time.Millisecond), w.RequestRate, out.MaxRequestRate))
		}
		if w.drained.IsZero() || w.Recovered > out.RecoverBound {
			drain = append(drain, fmt.Sprintf("%s window: the queue drained %s after the window's end, bound %s",
				w.Name, w.Recovered.Round(time.Millisecond), out.RecoverBound))
		}
	}
	var undeployed []string
	if !r.cfg.Outage.SkipDeploy {
		for _, w := range windows {
			if w.Deployed == 0 {
				undeployed = append(undeployed, fmt.Sprintf("%s window: no worker was replaced in its middle", w.Name))
			}
		}
		rep.check("a deploy replaced the workers in the middle of each window", undeployed)
	}
	rep.check("no work item terminal for infrastructure reasons", infra)
	rep.check(fmt.Sprintf("DynamoDB requests during each window ≤ %.0f per second per worker", out.MaxRequestRate), rate)
	rep.check(fmt.Sprintf("queue drained within %s after each window", out.RecoverBound), drain)
	return nil
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
