package devcmd

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/internal/hooks"
)

// faultFlags are run's and relay's hidden chaos switches: SDK-middleware
// faults and failpoints that SIGKILL the process at a named line. Off by
// default; the chaos harness and the kill -9 tests turn them on in the
// processes they start. They exist only in binaries built with this
// package's Extension (bin/ddbworker-dev): the production binary has no
// such flags, and no environment variable can turn them on there.
type faultFlags struct {
	seed          uint64
	throttle      float64
	conflict      float64
	timeout       float64
	lostResponse  float64
	sqsDelete     float64
	delay         float64
	delayDuration time.Duration
	kill          string
}

// registerFaults registers the fault flags on fl and returns what applies
// them.
func registerFaults(fl *pflag.FlagSet) daemonext.Inject {
	f := &faultFlags{}
	fl.Uint64Var(&f.seed, "fault-seed", 1, "seed of the fault injector")
	fl.Float64Var(&f.throttle, "fault-throttle", 0, "rate of DynamoDB calls failed with throttling")
	fl.Float64Var(&f.conflict, "fault-conflict", 0, "rate of commits cancelled with TransactionConflict")
	fl.Float64Var(&f.timeout, "fault-timeout", 0, "rate of DynamoDB calls that time out before they are sent")
	fl.Float64Var(&f.lostResponse, "fault-lost-response", 0, "rate of DynamoDB writes applied whose response is lost")
	fl.Float64Var(&f.sqsDelete, "fault-sqs-delete", 0, "rate of DeleteMessageBatch calls that fail")
	fl.Float64Var(&f.delay, "fault-delay", 0, "rate of commits delayed by --fault-delay-duration")
	fl.DurationVar(&f.delayDuration, "fault-delay-duration", 0, "delay of a delayed commit (longer than the visibility timeout pushes work past it)")
	fl.StringVar(&f.kill, "failpoint-kill", "", "SIGKILL this process at failpoints: name=rate,… (after-gate, after-commit, before-delete, mid-batch; relay-*; effect-before-call, effect-after-call, effect-before-commit)")
	for _, n := range []string{"fault-seed", "fault-throttle", "fault-conflict", "fault-timeout", "fault-lost-response",
		"fault-sqs-delete", "fault-delay", "fault-delay-duration", "failpoint-kill"} {
		_ = fl.MarkHidden(n)
	}
	return f.apply
}

// injector returns the configured injector (nil when no fault is on); each
// injected fault is logged as one JSON line, so a harness can count faults
// even of processes that were killed.
func (f *faultFlags) injector(log *slog.Logger) *faults.Injector {
	if f.throttle+f.conflict+f.timeout+f.lostResponse+f.sqsDelete+f.delay == 0 {
		return nil
	}
	inj := faults.New(f.seed)
	inj.OnFire = func(k faults.Kind, service, op string) {
		log.Warn("fault injected", "fault", string(k), "service", service, "operation", op)
	}
	add := func(r faults.Rule) {
		if r.Rate > 0 {
			inj.Add(r)
		}
	}
	for _, op := range []string{"PutItem", "UpdateItem", "TransactWriteItems"} {
		add(faults.Rule{Service: "DynamoDB", Operation: op, Kind: faults.KindLostResponse, Rate: f.lostResponse})
	}
	add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindConflict, Rate: f.conflict})
	add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.KindDelay, Rate: f.delay, Delay: f.delayDuration})
	add(faults.Rule{Service: "DynamoDB", Kind: faults.KindThrottle, Rate: f.throttle})
	add(faults.Rule{Service: "DynamoDB", Kind: faults.KindTimeout, Rate: f.timeout})
	add(faults.Rule{Service: "SQS", Operation: "DeleteMessageBatch", Kind: faults.KindSQSError, Rate: f.sqsDelete})
	return inj
}

// failpoint returns the worker's failpoint hook: at a named point, with its
// rate, the process logs the kill and SIGKILLs itself — no deferred code,
// no flush, exactly a crash at that line.
func (f *faultFlags) failpoint(log *slog.Logger) (func(string), error) {
	if f.kill == "" {
		return nil, nil
	}
	rates := map[string]float64{}
	known := map[string]bool{}
	for _, n := range slices.Concat(hooks.Failpoints(), hooks.RelayFailpoints(), hooks.EffectFailpoints()) {
		known[n] = true
	}
	for _, part := range strings.Split(f.kill, ",") {
		name, rate, ok := strings.Cut(strings.TrimSpace(part), "=")
		r, err := strconv.ParseFloat(rate, 64)
		if !ok || err != nil || !known[name] || r < 0 || r > 1 {
			return nil, fmt.Errorf("--failpoint-kill %q: want name=rate with a known failpoint and 0 <= rate <= 1", part)
		}
		rates[name] = r
	}
	rng := rand.New(rand.NewPCG(f.seed, uint64(os.Getpid())))
	var mu sync.Mutex
	return func(name string) {
		r := rates[name]
		if r == 0 {
			return
		}
		mu.Lock()
		hit := rng.Float64() < r
		mu.Unlock()
		if hit {
			log.Warn("failpoint kill", "failpoint", name, "pid", os.Getpid())
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the signal is on its way
		}
	}, nil
}

// apply installs the configured faults: SDK middleware on the clients and
// the failpoint hook in the context the worker (or relay) runs with.
func (f *faultFlags) apply(ctx context.Context, log *slog.Logger) (context.Context, daemonext.ClientOptions, error) {
	var opts daemonext.ClientOptions
	if inj := f.injector(log); inj != nil {
		opts.DynamoDB, opts.SQS = append(opts.DynamoDB, inj.DynamoDB), append(opts.SQS, inj.SQS)
	}
	fp, err := f.failpoint(log)
	if err != nil {
		return ctx, daemonext.ClientOptions{}, err
	}
	if fp != nil {
		ctx = hooks.With(ctx, hooks.Hooks{Failpoint: fp})
	}
	return ctx, opts, nil
}
