package explore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/worker"
)

// errCrashed is what every call of a crashed instance fails with, before
// it is sent: the process is gone.
var errCrashed = errors.New("explore: this worker instance crashed (kill -9): nothing it sends leaves")

// switchOff fails every call once dead is set.
func switchOff(dead *atomic.Bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("explore.crashed",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if dead.Load() {
					return middleware.InitializeOutput{}, middleware.Metadata{}, errCrashed
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// host is one worker host: a daemon (worker.Run) or a Lambda function
// driven as an event source mapping drives it. Its instance is replaced
// on a deploy or a crash.
type host struct {
	x      *run
	idx    int
	lambda bool

	mu   sync.Mutex
	inst *instance
	gen  int
}

// instance is one process of a host.
type instance struct {
	h      *host
	gen    int
	dead   atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
	w      *worker.Worker
	ddb    *dynamodb.Client
	sqs    *sqs.Client
}

func (h *host) name() string {
	kind := "daemon"
	if h.lambda {
		kind = "lambda"
	}
	return fmt.Sprintf("%s-%d", kind, h.idx)
}

// start starts a new instance of h.
func (h *host) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.x.stopping.Load() {
		return nil
	}
	h.gen++
	in := &instance{h: h, gen: h.gen, done: make(chan struct{})}
	x := h.x
	in.ddb = dynamodb.NewFromConfig(x.awsCfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(x.proxy.URL())
		o.APIOptions = append(o.APIOptions, switchOff(&in.dead))
	}, x.inj.DynamoDB)
	in.sqs = sqs.NewFromConfig(x.awsCfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(x.sqsEndpoint)
		o.APIOptions = append(o.APIOptions, switchOff(&in.dead))
	}, x.inj.SQS)
	store := x.store
	elog, err := effects.New(in.ddb, effects.Config{Inbox: store, CallTimeout: time.Second, Skew: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	reg, err := x.domain.registry(x.s, elog)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if x.cfg.WorkerLogs != nil {
		logger = slog.New(slog.NewJSONHandler(x.cfg.WorkerLogs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("host", h.name(), "gen", in.gen)
	}
	in.w, err = worker.New(worker.Deps{DynamoDB: in.ddb, SQS: in.sqs, Handlers: reg, Logger: logger, OnEvent: x.event}, x.workerConfig(fmt.Sprintf("explore-%s-%d", h.name(), in.gen)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = hooks.With(ctx, hooks.Hooks{Failpoint: func(name string) { x.failpoint(in, name) }})
	in.cancel = cancel
	h.inst = in
	go func() {
		defer close(in.done)
		if h.lambda {
			in.mapping(ctx)
			return
		}
		if err := in.w.Run(ctx); err != nil && !in.dead.Load() {
			x.progress("%s gen %d: Run: %v", h.name(), in.gen, err)
		}
	}()
	return nil
}

// current is h's running instance.
func (h *host) current() *instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inst
}

// deploy stops h's instance as SIGTERM would (its drain), then starts a
// new one.
func (h *host) deploy() error {
	in := h.current()
	in.cancel()
	select {
	case <-in.done:
	case <-time.After(20 * time.Second):
		h.x.progress("%s gen %d did not stop within 20s of its SIGTERM; crashing it", h.name(), in.gen)
		in.dead.Store(true)
	}
	return h.start()
}

// crash kills in as kill -9 would — nothing it sends leaves any more, its
// memory is dropped — and starts a new instance unless in was replaced
// already. It returns whether in was the host's current instance.
func (h *host) crash(in *instance) bool {
	if in.dead.Swap(true) {
		return false
	}
	in.cancel()
	h.mu.Lock()
	current := h.inst == in
	h.mu.Unlock()
	if !current {
		return false
	}
	h.x.restarts.Add(1)
	go func() {
		time.Sleep(300 * time.Millisecond) // a supervisor's restart delay
		if h.x.stopping.Load() {
			return
		}
		if err := h.start(); err != nil {
			h.x.progress("%s: restart: %v", h.name(), err)
		}
	}()
	return true
}

// stop stops h's instance gracefully and waits for it.
func (h *host) stop() {
	h.x.stopping.Store(true)
	in := h.current()
	if in == nil {
		return
	}
	in.cancel()
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		in.dead.Store(true)
	}
}

// mapping plays an SQS event source mapping with
// ReportBatchItemFailures in front of the Lambda function in.w: receive
// with every attribute, build the event, invoke with a deadline of the
// function's timeout, delete what the response does not list.
func (in *instance) mapping(ctx context.Context) {
	x := in.h.x
	timeout := x.s.Visibility
	for ctx.Err() == nil && !in.dead.Load() {
		out, err := in.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(x.qs.URL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		// The mapping hands the received messages to the function as its
		// event's records.
		ev := out.Messages
		// The invocation is not cancelled by a deploy: the mapping waits
		// for it. A crash ends it through the switched-off clients.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		failures, _ := in.w.HandleSQSEvent(ictx, ev)
		cancel()
		x.invocations.Add(1)
		failed := map[string]bool{}
		for _, id := range failures {
			failed[id] = true
		}
		var entries []types.DeleteMessageBatchRequestEntry
		for i, r := range ev {
			if !failed[aws.ToString(r.MessageId)] {
				entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: r.ReceiptHandle})
			}
		}
		if len(entries) > 0 && !in.dead.Load() {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = in.sqs.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(x.qs.URL), Entries: entries})
			cancel()
		}
	}
}

// workerConfig is every host's configuration: short leases and backoffs,
// a small park visibility, re-sends of parked messages delayed 3s.
func (x *run) workerConfig(owner string) worker.Config {
	s := x.s
	return worker.Config{
		Store: x.store, QueueURL: x.qs.URL, DLQURL: x.qs.DLQURL,
		Concurrency: s.Concurrency, WaitTime: time.Second, VisibilityTimeout: s.Visibility, ClockSkew: 100 * time.Millisecond,
		MaxAttempts: s.MaxAttempts, MaxTakeovers: 20, TerminalPolicy: s.Policy,
		Backoff:             worker.Backoff{Base: 500 * time.Millisecond, Max: 3 * time.Second, Jitter: 0.5},
		DeleteFlushInterval: 20 * time.Millisecond, DrainTimeout: 5 * time.Second, Owner: owner,
		CallTimeout: time.Second, CallAttempts: 3,
		Health: worker.HealthConfig{ConsecutiveFailures: s.Consecutive, ProbeInterval: 300 * time.Millisecond, ProbeMaxInterval: time.Second,
			ParkVisibility: time.Second, ParkMaxVisibility: 3 * time.Second},
	}
}

// failpoint is every instance's failpoint hook: while a failpoint-kill
// window is open for name, it crashes the instance at its rate.
func (x *run) failpoint(in *instance, name string) {
	if in.dead.Load() {
		return
	}
	x.fpMu.Lock()
	rate, open := x.fpOpen[name]
	// At most three kills per failpoint a run: more would walk healthy
	// messages to the redrive policy's maxReceiveCount.
	fire := open && x.fpKills[name] < 3 && x.fpRand.Float64() < rate
	if fire {
		x.fpKills[name]++
	}
	x.fpMu.Unlock()
	if !fire {
		return
	}
	if in.h.crash(in) {
		x.kills.Add(1)
		x.count("failpoint-kill:" + name)
	}
}

// event counts the workers' final outcomes.
func (x *run) event(ev worker.Event) {
	x.evMu.Lock()
	defer x.evMu.Unlock()
	x.outcomes[strings.ToLower(ev.Outcome)]++
}
