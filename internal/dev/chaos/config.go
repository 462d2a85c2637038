package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbworker/ddbworker/internal/hooks"
)

// Faults are the fault rates passed to every worker process (run's hidden
// --fault-* flags). A rate is the probability per matching SDK call attempt.
type Faults struct {
	// Throttle fails DynamoDB calls with throttling.
	Throttle float64
	// Conflict cancels commits (TransactWriteItems) with TransactionConflict.
	Conflict float64
	// Timeout fails DynamoDB calls with a timeout before they are sent.
	Timeout float64
	// LostResponse applies DynamoDB writes (PutItem, UpdateItem,
	// TransactWriteItems) and then loses the response.
	LostResponse float64
	// SQSDelete fails DeleteMessageBatch calls.
	SQSDelete float64
	// Delay delays commits by DelayDuration before they are sent.
	Delay float64
	// DelayDuration of a delayed commit. Default: visibility timeout + 1s,
	// so the commit is sent after the message's visibility would have
	// ended without a heartbeat.
	DelayDuration time.Duration
}

// DefaultFaults are the rates of a default run: every fault fires hundreds
// of times over 10,000 messages, rarely often enough in a row to exhaust
// the SDK's own retries.
func DefaultFaults() Faults {
	return Faults{Throttle: 0.02, Conflict: 0.02, Timeout: 0.01, LostResponse: 0.02, SQSDelete: 0.02, Delay: 0.005}
}

// Failpoint names, in a stable order.
func Failpoints() []string {
	return hooks.Failpoints()
}

// DefaultFailpoints is a small kill rate at every failpoint.
const DefaultFailpoints = "after-gate=0.001,after-commit=0.001,before-delete=0.001,mid-batch=0.001"

// ParseFailpoints parses "name=rate,…" with known failpoint names and rates
// in [0, 1]. An empty string means none.
func ParseFailpoints(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, rate, ok := strings.Cut(strings.TrimSpace(part), "=")
		r, err := strconv.ParseFloat(strings.TrimSpace(rate), 64)
		if !ok || err != nil || !slices.Contains(Failpoints(), strings.TrimSpace(name)) || r < 0 || r > 1 {
			return nil, fmt.Errorf("chaos: failpoint %q: want name=rate with name one of %s and 0 <= rate <= 1", part, strings.Join(Failpoints(), ", "))
		}
		out[strings.TrimSpace(name)] = r
	}
	return out, nil
}

// formatFailpoints renders rates in run's --failpoint-kill form (only
// non-zero rates, sorted by name).
func formatFailpoints(rates map[string]float64) string {
	names := make([]string, 0, len(rates))
	for n, r := range rates {
		if r > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + strconv.FormatFloat(rates[n], 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Config shapes a chaos run.
type Config struct {
	// Binary is the ddbworker executable the worker processes run
	// (`<Binary> run …`). Required (the command passes os.Executable()).
	Binary string

	// DynamoDBEndpoint and SQSEndpoint point at running services. When
	// either is empty, Run starts the local emulators (from EmulatorsDir)
	// and stops them at the end.
	DynamoDBEndpoint string
	SQSEndpoint      string
	// EmulatorsDir is where the emulators' npm packages are installed
	// (emulators.Config.Dir). Default: $DDBWORKER_EMULATORS_DIR, else the
	// user cache.
	EmulatorsDir string
	// AWS is the SDK configuration (region, credentials) of the harness's
	// own clients; its credentials are passed to the workers as static
	// credentials. Default: the emulators' static credentials and region.
	AWS aws.Config

	// Count is the number of SQS messages of the plan. Default: 10000.
	Count int
	// DuplicateRatio of the plan (same key, new SQS message). Default: 0.3.
	DuplicateRatio float64
	// ConcurrentRatio is the fraction of duplicates sent right after their
	// original. Default: 0.4.
	ConcurrentRatio float64
	// Seed makes the plan and the fault seeds reproducible (the kill
	// schedule and failpoints depend on timing and are not). Default: 1.
	Seed uint64
	// SendRate caps phase 1's send rate in messages per second so the
	// stream flows while the killer works (0: as fast as SQS takes them).
	SendRate float64

	// Workers is the number of worker processes. Default: 4.
	Workers int
	// Concurrency of each worker process. Default: 8.
	Concurrency int
	// MaxAttempts (business attempts) of each worker. Default: 20: a work
	// item fails a business attempt only when a fault survives the SDK's
	// own retries, a commit is cancelled (TransactionConflict is not
	// retried by the SDK), or its lease is taken over after a kill or a
	// pause; with the default rates a handful of attempts is already rare,
	// so 20 means a MAX_ATTEMPTS_EXCEEDED in a chaos run is a finding, not
	// bad luck.
	MaxAttempts int
	// Fused runs the workers with the fused commit (run --fused): one
	// transaction writes the inbox record COMPLETED with the domain writes.
	Fused bool
	// SingleWrite runs CaseStageChanged on the single-write route (run
	// --single-write; the other types as Fused says): one conditional
	// update fenced in the case item, its application counter in the item
	// too. The plan then also sends hash-mismatch probes on stage changes,
	// and the verification judges stage changes by their fence, counters
	// and logged outcomes (caseflow.VerifyWith, SingleWriteStages).
	SingleWrite bool
	// Visibility is the queue's visibility timeout and the workers' lease.
	// Whole seconds. Default: 3s.
	Visibility time.Duration
	// MaxReceiveCount of the work queue's redrive policy. Default: 1000
	// (SQS's maximum): kills and pauses redeliver messages many times, and
	// the redrive policy must not dead-letter live work during chaos; every
	// DLQ copy must come from the worker's terminal policy. With outage
	// phases the default is OutageMaxReceiveCount (10, SQS's console
	// default): the run checks that an outage walks no healthy message to
	// the DLQ through the redrive policy.
	MaxReceiveCount int

	// Outage adds outage phases: windows in which every DynamoDB request
	// of the workers is throttled, answered 5xx or held unanswered (see
	// Outage). Zero: none, the kill-heavy run.
	Outage Outage

	// CallTimeout, HealthMinFailures, HealthWindow and ProbeMaxInterval
	// are passed to the workers as run's --call-timeout,
	// --health-min-failures, --health-window and --probe-max-interval
	// (0: the worker's defaults, 5s, 5, 10s and 15s).
	CallTimeout       time.Duration
	HealthMinFailures int
	HealthWindow      time.Duration
	ProbeMaxInterval  time.Duration

	// Faults injected in every worker. Default: DefaultFaults() when the
	// whole struct is zero; set NoFaults to run without any.
	Faults   Faults
	NoFaults bool
	// Failpoints is "name=rate,…" (see Failpoints). Default:
	// DefaultFailpoints, or none with outage phases (a process that kills
	// itself during a window or its recovery restarts with a fresh health
	// gate and leaves its parked messages hidden for a minute: the
	// recovery figures would measure the failpoint, not the gate); "none"
	// for none.
	Failpoints string

	// Kills is the least number of harness SIGKILLs. Default: 20.
	// Negative: none. With outage phases the killer acts only during the
	// warm-up, before the first window (see Outage).
	Kills int
	// Pauses is the number of SIGSTOP/SIGCONT pauses of visibility+2s.
	// Default: 3. Negative: none.
	Pauses int
	// KillEvery bounds the random wait between two harness actions.
	// Default: 500ms..3s.
	KillEveryMin, KillEveryMax time.Duration

	// Timeout bounds the run until verification. Default: 15m; with
	// outage phases 15m plus every window and its recovery bound.
	Timeout time.Duration
	// LogDir receives workers.log (every worker's log line, prefixed by
	// its process) and, on a violation, table.jsonl. Default: a new
	// directory under os.TempDir().
	LogDir string
	// Progress receives progress lines. Default: none.
	Progress io.Writer
}

func (c *Config) defaults() error {
	var errs []error
	if c.Binary == "" {
		errs = append(errs, errors.New("chaos: Config.Binary (the ddbworker executable) is required"))
	}
	if c.Count == 0 {
		c.Count = 10000
	}
	if c.DuplicateRatio == 0 {
		c.DuplicateRatio = 0.3
	}
	if c.ConcurrentRatio == 0 {
		c.ConcurrentRatio = 0.4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 20
	}
	outage := c.Outage.Enabled
	if outage {
		if c.Outage.Gap == 0 {
			c.Outage.Gap = cmp.Or(c.HealthWindow, DefaultOutageGap)
		}
		errs = append(errs, c.Outage.defaults()...)
	}
	if c.Visibility == 0 {
		c.Visibility = 3 * time.Second
		if outage {
			c.Visibility = OutageVisibility
		}
	}
	if c.MaxReceiveCount == 0 {
		c.MaxReceiveCount = 1000
		if outage {
			c.MaxReceiveCount = OutageMaxReceiveCount
		}
	}
	if c.Faults == (Faults{}) && !c.NoFaults {
		c.Faults = DefaultFaults()
	}
	if c.Faults.DelayDuration == 0 {
		c.Faults.DelayDuration = c.Visibility + time.Second
	}
	switch c.Failpoints {
	case "":
		c.Failpoints = DefaultFailpoints
		if outage {
			c.Failpoints = ""
		}
	case "none":
		c.Failpoints = ""
	}
	if _, err := ParseFailpoints(c.Failpoints); err != nil {
		errs = append(errs, err)
	}
	if c.Kills == 0 {
		c.Kills = 20
	}
	if c.Kills < 0 {
		c.Kills = 0
	}
	if c.Pauses == 0 {
		c.Pauses = 3
	}
	if c.Pauses < 0 {
		c.Pauses = 0
	}
	if c.KillEveryMin == 0 {
		c.KillEveryMin = 500 * time.Millisecond
	}
	if c.KillEveryMax == 0 {
		c.KillEveryMax = 3 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 15 * time.Minute
		if outage {
			for _, w := range c.Outage.windows() {
				c.Timeout += c.Outage.Gap + w.Duration + c.Outage.Recover
			}
		}
	}
	switch {
	case c.Count < 50:
		errs = append(errs, fmt.Errorf("chaos: Count %d: at least 50 messages", c.Count))
	case c.DuplicateRatio < 0.25 || c.DuplicateRatio >= 1:
		errs = append(errs, fmt.Errorf("chaos: DuplicateRatio %v must be within [0.25, 1)", c.DuplicateRatio))
	}
	if c.Workers < 2 {
		errs = append(errs, fmt.Errorf("chaos: Workers %d: at least 2 (a pause needs another worker to take over)", c.Workers))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("chaos: Concurrency %d must be at least 1", c.Concurrency))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("chaos: MaxAttempts %d must be within 1..100", c.MaxAttempts))
	}
	if c.Visibility < time.Second || c.Visibility%time.Second != 0 {
		errs = append(errs, fmt.Errorf("chaos: Visibility %s must be whole seconds, at least 1s", c.Visibility))
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		errs = append(errs, fmt.Errorf("chaos: MaxReceiveCount %d must be within 1..1000", c.MaxReceiveCount))
	}
	for name, r := range map[string]float64{"Throttle": c.Faults.Throttle, "Conflict": c.Faults.Conflict, "Timeout": c.Faults.Timeout,
		"LostResponse": c.Faults.LostResponse, "SQSDelete": c.Faults.SQSDelete, "Delay": c.Faults.Delay} {
		if r < 0 || r > 0.5 {
			errs = append(errs, fmt.Errorf("chaos: Faults.%s %v must be within [0, 0.5]", name, r))
		}
	}
	if c.KillEveryMin <= 0 || c.KillEveryMax < c.KillEveryMin {
		errs = append(errs, fmt.Errorf("chaos: KillEvery %s..%s must be a positive range", c.KillEveryMin, c.KillEveryMax))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("chaos: Timeout must be positive"))
	}
	if c.SendRate < 0 {
		errs = append(errs, errors.New("chaos: SendRate must not be negative"))
	}
	if c.CallTimeout < 0 || c.HealthMinFailures < 0 || c.HealthWindow < 0 || c.ProbeMaxInterval < 0 {
		errs = append(errs, errors.New("chaos: CallTimeout, HealthMinFailures, HealthWindow and ProbeMaxInterval must not be negative"))
	}
	if outage && c.Visibility < c.callTimeout() {
		errs = append(errs, fmt.Errorf("chaos: Visibility %s must be at least the workers' call timeout %s with outage phases: a gate call that outlives its message's visibility redelivers the message while the worker still waits on it",
			c.Visibility, c.callTimeout()))
	}
	if outage && len(errs) == 0 {
		// The plan holds a little fewer phase-1 messages than Count (phase
		// 2's hash-mismatch probes; see caseflow.GeneratePlan); Run checks
		// the exact figure.
		if need := c.Outage.windowMessages() + minWarmup; c.Count-c.Count/50 < need {
			errs = append(errs, fmt.Errorf("chaos: Count %d is too small for the outage windows: they send %d messages, and the warm-up needs at least %d more",
				c.Count, c.Outage.windowMessages(), minWarmup))
		}
	}
	return errors.Join(errs...)
}

// workerArgs are the arguments of one worker process start; seed is its
// distinct fault seed.
func (c *Config) workerArgs(seed uint64) []string {
	f := c.Faults
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	args := []string{"run",
		"--track-applications",
		"--visibility-timeout", c.Visibility.String(),
		"--clock-skew", "500ms",
		"--wait-time", "1s",
		"--metrics-addr=",
		"--depth-interval", "0",
		"--concurrency", strconv.Itoa(c.Concurrency),
		"--max-attempts", strconv.Itoa(c.MaxAttempts),
		"--drain-timeout", "10s",
		"--log-level", "info",
		"--fault-seed", strconv.FormatUint(seed, 10),
		"--fault-throttle", num(f.Throttle),
		"--fault-conflict", num(f.Conflict),
		"--fault-timeout", num(f.Timeout),
		"--fault-lost-response", num(f.LostResponse),
		"--fault-sqs-delete", num(f.SQSDelete),
		"--fault-delay", num(f.Delay),
		"--fault-delay-duration", f.DelayDuration.String(),
	}
	if c.Fused {
		args = append(args, "--fused")
	}
	if c.SingleWrite {
		args = append(args, "--single-write")
	}
	if c.CallTimeout > 0 {
		args = append(args, "--call-timeout", c.CallTimeout.String())
	}
	if c.HealthMinFailures > 0 {
		args = append(args, "--health-min-failures", strconv.Itoa(c.HealthMinFailures))
	}
	if c.HealthWindow > 0 {
		args = append(args, "--health-window", c.HealthWindow.String())
	}
	if c.ProbeMaxInterval > 0 {
		args = append(args, "--probe-max-interval", c.ProbeMaxInterval.String())
	}
	if c.Failpoints != "" {
		rates, _ := ParseFailpoints(c.Failpoints)
		if s := formatFailpoints(rates); s != "" {
			args = append(args, "--failpoint-kill", s)
		}
	}
	return args
}

// workerCallTimeout is run's --call-timeout default.
const workerCallTimeout = 5 * time.Second

// callTimeout is the workers' DynamoDB call timeout.
func (c *Config) callTimeout() time.Duration {
	if c.CallTimeout > 0 {
		return c.CallTimeout
	}
	return workerCallTimeout
}
