package explore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/faults"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// Plants: a violation the run makes on purpose, to show the checker finds
// it (the self-test).
const (
	// PlantLost deletes one healthy work item's only message before any
	// worker sees it: a message deleted without its work applied.
	PlantLost = "lost"
	// PlantDouble applies one applied work item a second time, behind the
	// workers' back.
	PlantDouble = "double"
)

// The defaults of Config.
const (
	DefaultStream  = 20 * time.Second
	DefaultRecover = 90 * time.Second
	DefaultSeeds   = 1
)

// Config configures an exploration.
type Config struct {
	// Seed is the first seed; Seeds how many consecutive seeds run.
	Seed  uint64
	Seeds int
	// Budget stops starting new seeds once this much time has passed (0:
	// run all Seeds).
	Budget time.Duration
	// Stream is how long each seed's messages keep arriving. Default:
	// DefaultStream.
	Stream time.Duration
	// Recover bounds each drain: the backlog must be empty this long
	// after the last fault ended. Default: DefaultRecover.
	Recover time.Duration
	// NoFaults and NoOps turn off faults and operator actions.
	NoFaults, NoOps bool
	// Plant makes one violation on purpose (PlantLost, PlantDouble).
	Plant string
	// StopOnViolation stops at the first seed that finds one.
	StopOnViolation bool
	// DynamoDBEndpoint and SQSEndpoint are the emulators to use; both
	// empty: Run starts its own (EmulatorsDir).
	DynamoDBEndpoint, SQSEndpoint string
	AWS                           aws.Config
	EmulatorsDir                  string
	// Progress receives the schedule and progress lines. Optional.
	Progress io.Writer
	// WorkerLogs receives the workers' JSON logs. Optional.
	WorkerLogs io.Writer
	// Command is the replay command's prefix. Default:
	// "bin/ddbworker-dev explore".
	Command string
}

func (c *Config) defaults() {
	if c.Stream <= 0 {
		c.Stream = DefaultStream
	}
	if c.Recover <= 0 {
		c.Recover = DefaultRecover
	}
	if c.Seeds <= 0 {
		c.Seeds = DefaultSeeds
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Command == "" {
		c.Command = "bin/ddbworker-dev explore"
	}
}

// Replay is the command that replays seed with c's options.
func (c *Config) Replay(seed uint64) string {
	s := fmt.Sprintf("%s --seed %d --seeds 1 --stream %s", c.Command, seed, c.Stream)
	if c.NoFaults {
		s += " --no-faults"
	}
	if c.NoOps {
		s += " --no-ops"
	}
	if c.Plant != "" {
		s += " --plant " + c.Plant
	}
	return s
}

// Run explores Seeds seeds from Seed and returns the report. The error is
// for a run that could not be carried out (emulators, a table); found
// violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	awsCfg := cfg.AWS
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		fmt.Fprintln(cfg.Progress, "[explore] starting DynamoDB Local and the SQS emulator on 127.0.0.1 …")
		env, err := emulators.Start(ctx, emulators.Config{Dir: cfg.EmulatorsDir})
		if err != nil {
			return nil, err
		}
		defer func() { _ = env.Stop() }()
		cfg.DynamoDBEndpoint, cfg.SQSEndpoint = env.Endpoints.DynamoDB, env.Endpoints.SQS
		awsCfg = env.AWSConfig()
	}
	if awsCfg.Credentials == nil {
		awsCfg = emulators.Endpoints{DynamoDB: cfg.DynamoDBEndpoint, SQS: cfg.SQSEndpoint}.AWSConfig()
	}
	if awsCfg.Region == "" {
		awsCfg.Region = emulators.Region
	}
	rep := &Report{First: cfg.Seed, Stream: cfg.Stream}
	started := time.Now()
	for i := range cfg.Seeds {
		if cfg.Budget > 0 && i > 0 && time.Since(started) > cfg.Budget {
			break
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		sr, err := runSeed(ctx, cfg, awsCfg, cfg.Seed+uint64(i))
		if err != nil {
			return rep, fmt.Errorf("explore: seed %d: %w", cfg.Seed+uint64(i), err)
		}
		rep.add(sr)
		sr.Print(cfg.Progress)
		if cfg.StopOnViolation && len(sr.Violations) > 0 {
			break
		}
	}
	rep.Duration = time.Since(started)
	return rep, nil
}

// run is the state of one seed's run.
type run struct {
	cfg         Config
	s           *Schedule
	awsCfg      aws.Config
	sqsEndpoint string
	admin       *dynamodb.Client
	adminSQS    *sqs.Client
	proxy       *ddbproxy.Proxy
	inj         *faults.Injector
	table       string
	// store is every host's, operator's and the checker's inbox store: the
	// table and, on an adopted table, the layout it records.
	store inbox.Store
	// app is the application's side of the adopted variant (nil: a table
	// of ddbworker's own).
	app     *appState
	qs      worker.Queues
	domain  *domain
	hosts   []*host
	started time.Time

	restarts, kills, deploys, invocations atomic.Int64
	// stopping: the run is over; no instance starts any more.
	stopping atomic.Bool

	fpMu      sync.Mutex
	fpOpen    map[string]float64
	fpKills   map[string]int
	fpRand    *rand.Rand
	faultRand *rand.Rand

	evMu     sync.Mutex
	outcomes map[string]int
	counts   map[string]int
	ops      map[string]int
	outages  int
	planted  string // the work id of the plant
}

func (x *run) progress(format string, args ...any) {
	fmt.Fprintf(x.cfg.Progress, "[explore %d %6s] %s\n", x.s.Seed, time.Since(x.started).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

// count adds one to a figure of the report.
func (x *run) count(label string) {
	x.evMu.Lock()
	defer x.evMu.Unlock()
	x.counts[label]++
}

func runSeed(ctx context.Context, cfg Config, awsCfg aws.Config, seed uint64) (*SeedReport, error) {
	s := Generate(seed, Options{Stream: cfg.Stream, NoFaults: cfg.NoFaults, NoOps: cfg.NoOps})
	s.Print(cfg.Progress)
	x := &run{cfg: cfg, s: s, awsCfg: awsCfg, sqsEndpoint: cfg.SQSEndpoint, started: time.Now(),
		fpOpen: map[string]float64{}, fpKills: map[string]int{}, outcomes: map[string]int{}, counts: map[string]int{}, ops: map[string]int{},
		fpRand:    rand.New(rand.NewPCG(seed, 0x6670)),
		faultRand: rand.New(rand.NewPCG(seed, 0x6661756c74))}
	x.admin = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint) })
	x.adminSQS = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) })
	x.table = fmt.Sprintf("explore-%d-%x", seed, rand.Uint32())
	defer func() {
		_, _ = x.admin.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(x.table)})
	}()
	switch {
	case cfg.Plant == PlantAppItem || cfg.Plant == PlantAppIndex:
		if s.App == nil {
			return nil, fmt.Errorf("plant %s needs a seed whose table is an adopted application's", cfg.Plant)
		}
	}
	if s.App != nil {
		if err := x.createApp(ctx); err != nil {
			return nil, err
		}
		store, err := x.adoptApp(ctx)
		if err != nil {
			return nil, err
		}
		x.store = store
		x.progress("adopted: %s", x.app.adopted)
	} else {
		if err := tables.Ensure(ctx, x.admin, tables.Config{Name: x.table}); err != nil {
			return nil, err
		}
		x.store = inbox.Store{Table: x.table}
	}
	name := x.table
	if s.FIFO {
		name += ".fifo"
	}
	var err error
	if x.qs, err = worker.CreateQueues(ctx, x.adminSQS, worker.QueueConfig{Name: name, FIFO: s.FIFO, VisibilityTimeout: s.Visibility,
		MaxReceiveCount: s.MaxReceive}); err != nil {
		return nil, err
	}
	defer func() {
		for _, u := range []string{x.qs.URL, x.qs.DLQURL} {
			_, _ = x.adminSQS.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()
	if x.proxy, err = ddbproxy.Start(ddbproxy.Config{Target: cfg.DynamoDBEndpoint}); err != nil {
		return nil, err
	}
	defer func() { _ = x.proxy.Close() }()
	x.inj = faults.New(seed)
	x.domain = newDomain(x.table)

	if cfg.Plant == PlantLost {
		if err := x.plantLost(ctx); err != nil {
			return nil, err
		}
	}
	for i := range s.Hosts() {
		h := &host{x: x, idx: i, lambda: i >= s.Daemons}
		if err := h.start(); err != nil {
			return nil, err
		}
		x.hosts = append(x.hosts, h)
	}
	stopped := false
	stopHosts := func() {
		if stopped {
			return
		}
		stopped = true
		var wg sync.WaitGroup
		for _, h := range x.hosts {
			wg.Go(h.stop)
		}
		wg.Wait()
	}
	defer stopHosts()

	x.started = time.Now()
	// The timeline's events end with the seed's run.
	ctx, cancelTimeline := context.WithCancel(ctx)
	defer cancelTimeline()
	end, timelineDone := x.timeline(ctx)
	// The application writes its own items while the stream runs.
	stopApp := func() {}
	if x.app != nil {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); x.appTraffic(stop) }()
		stopApp = sync.OnceFunc(func() { close(stop); <-done })
	}
	defer stopApp()
	if err := x.stream(ctx); err != nil {
		return nil, err
	}
	// The faults' and mid-stream operations' timeline ends, the last
	// operation too.
	if wait := time.Until(x.started.Add(end)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	timelineDone()
	stopApp()
	var drains []time.Duration
	backlog := 0
	d, left := x.drain(ctx)
	drains = append(drains, d)
	backlog = left
	for _, o := range s.Ops {
		if !o.Final {
			continue
		}
		x.op(ctx, o)
		d, left = x.drain(ctx)
		drains = append(drains, d)
		backlog = max(backlog, left)
	}
	x.progress("stopping the hosts")
	stopHosts()
	if cfg.Plant == PlantDouble {
		if err := x.plantDouble(ctx); err != nil {
			return nil, err
		}
	}
	adopted := ""
	if x.app != nil {
		if err := x.plantApp(ctx); err != nil {
			return nil, err
		}
	}
	vs, st, err := x.check(ctx, backlog)
	if err != nil {
		return nil, err
	}
	if x.app != nil {
		avs, err := x.checkApp(ctx)
		if err != nil {
			return nil, err
		}
		vs = merged(append(vs, avs...))
		adopted = fmt.Sprintf("%s; %d application writes; %d inbox records in %s", x.app.adopted, x.app.writes, x.app.inAggregate, x.app.layout.AggregateIndex)
	}
	sr := &SeedReport{Seed: seed, Works: len(s.Works), Messages: len(s.Sends), Faults: x.counts, Ops: x.ops, Outcomes: x.outcomes,
		Kills: int(x.kills.Load()), Restarts: int(x.restarts.Load()), Deploys: int(x.deploys.Load()), Outages: x.outages,
		Invocations: int(x.invocations.Load()), Drains: drains, Violations: vs, State: st, Duration: time.Since(x.started),
		Replay: cfg.Replay(seed), Adopted: adopted, Hosts: fmt.Sprintf("%d daemon, %d lambda", s.Daemons, s.Lambdas)}
	return sr, nil
}

// stream sends the schedule's messages at their times.
func (x *run) stream(ctx context.Context) error {
	copies := map[int]int{}
	for _, snd := range x.s.Sends {
		if wait := time.Until(x.started.Add(snd.At)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		copies[snd.Work]++
		if err := x.send(ctx, x.s.Works[snd.Work], copies[snd.Work]); err != nil {
			return err
		}
	}
	x.progress("stream sent: %d messages", len(x.s.Sends))
	return nil
}

// send sends copy n of w's message (the producer's client: no faults).
func (x *run) send(ctx context.Context, w *Work, n int) error {
	m, err := encode(x.s, w, time.Now(), n)
	if err != nil {
		return err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(x.qs.URL), MessageBody: aws.String(m.body)}
	if len(m.attrs) > 0 {
		in.MessageAttributes = m.attrs
	}
	if x.s.FIFO {
		in.MessageGroupId = aws.String(w.Agg)
		in.MessageDeduplicationId = aws.String(w.WID + "-" + strconv.Itoa(n))
	}
	_, err = x.adminSQS.SendMessage(ctx, in)
	return err
}

// timeline runs the faults and the mid-stream operations at their times,
// in the background, and returns when the last one starts, and a wait that
// returns once every one has ended: an operation still running (a redrive
// moving messages) must not overlap the final drain and the hosts' stop,
// or what it moves meets no host and the check reads a queue in motion.
func (x *run) timeline(ctx context.Context) (time.Duration, func()) {
	end := x.s.Stream
	var events sync.WaitGroup
	at := func(d time.Duration, fn func()) {
		events.Go(func() {
			select {
			case <-time.After(time.Until(x.started.Add(d))):
				fn()
			case <-ctx.Done():
			}
		})
	}
	var outageMu sync.Mutex
	outages := 0
	for _, f := range x.s.Faults {
		end = max(end, f.At+f.For)
		switch f.Kind {
		case FaultOutage:
			mode := map[string]ddbproxy.Mode{"throttle": ddbproxy.Throttle, "5xx": ddbproxy.ServerError, "hang": ddbproxy.Hang}[f.Mode]
			at(f.At, func() {
				outageMu.Lock()
				outages++
				x.outages++
				x.proxy.SetMode(mode)
				outageMu.Unlock()
				x.progress("outage: %s for %s", f.Mode, f.For)
			})
			at(f.At+f.For, func() {
				outageMu.Lock()
				outages--
				if outages == 0 {
					x.proxy.SetMode(ddbproxy.Pass)
					x.progress("outage over")
				}
				outageMu.Unlock()
			})
		case FaultDeploy:
			at(f.At, func() {
				h := x.hosts[f.Host]
				x.progress("deploy: %s (SIGTERM, then a new instance)", h.name())
				x.deploys.Add(1)
				if err := h.deploy(); err != nil {
					x.progress("deploy %s: %v", h.name(), err)
				}
			})
		case FaultCrash:
			at(f.At, func() {
				h := x.hosts[f.Host]
				x.progress("crash: %s (kill -9)", h.name())
				if h.crash(h.current()) {
					x.kills.Add(1)
				}
			})
		case FaultFailpointKill:
			at(f.At, func() {
				x.fpMu.Lock()
				x.fpOpen[f.Failpoint] = f.Rate
				x.fpMu.Unlock()
			})
			at(f.At+f.For, func() {
				x.fpMu.Lock()
				delete(x.fpOpen, f.Failpoint)
				x.fpMu.Unlock()
			})
		default:
			w := x.install(f)
			if w == nil {
				continue
			}
			at(f.At, func() { w.open.Store(true) })
			at(f.At+f.For, func() { w.open.Store(false) })
		}
	}
	for _, o := range x.s.Ops {
		if o.Final {
			continue
		}
		end = max(end, o.At)
		at(o.At, func() { x.op(ctx, o) })
	}
	return end, events.Wait
}

// drain waits until the work queue is empty (twice in a row, 500ms
// apart) or Recover passes; it returns how long it took and what was left.
func (x *run) drain(ctx context.Context) (time.Duration, int) {
	start := time.Now()
	ep := emulators.Endpoints{SQS: x.sqsEndpoint}
	empty := 0
	left := -1
	for time.Since(start) < x.cfg.Recover && ctx.Err() == nil {
		st, err := ep.InspectQueue(ctx, x.qs.URL)
		if err == nil {
			left = st.Total()
			if left == 0 {
				empty++
				if empty == 2 {
					x.progress("drained in %s", time.Since(start).Round(100*time.Millisecond))
					return time.Since(start), 0
				}
			} else {
				empty = 0
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	x.progress("NOT drained after %s: %d messages left", x.cfg.Recover, left)
	return time.Since(start), max(left, 0)
}

// plantLost adds one healthy work item of its own aggregate to the
// schedule, sends its message and deletes it before any host runs.
func (x *run) plantLost(ctx context.Context) error {
	wid := fmt.Sprintf("w%04d", len(x.s.Works))
	w := &Work{WID: wid, Key: "k-" + wid, Type: TypeA, Agg: "planted", Version: 2, Kind: KindOK, Pad: "planted"}
	x.s.Works = append(x.s.Works, w)
	if err := x.send(ctx, w, 0); err != nil {
		return err
	}
	for range 20 {
		out, err := x.adminSQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(x.qs.URL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		if err != nil {
			return err
		}
		if len(out.Messages) == 1 {
			if _, err := x.adminSQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(x.qs.URL), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
				return err
			}
			x.planted = w.WID
			x.progress("planted: %s's message deleted before any worker saw it", w.WID)
			return nil
		}
	}
	return errors.New("plant: the planted message was not received")
}

// plantDouble applies the first applied work item a second time.
func (x *run) plantDouble(ctx context.Context) error {
	for _, w := range x.s.Works {
		if w.Kind != KindOK || w.Reuse != "" {
			continue
		}
		_, err := x.admin.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(x.table),
			Key:                       map[string]ddbAV{"PK": &ddbS{Value: aggPrefix + w.Agg}, "SK": &ddbS{Value: aggSK}},
			UpdateExpression:          aws.String("ADD #n :one"),
			ConditionExpression:       aws.String("#n = :one"),
			ExpressionAttributeNames:  map[string]string{"#n": counterPref + w.WID},
			ExpressionAttributeValues: map[string]ddbAV{":one": &ddbN{Value: "1"}}})
		if err != nil {
			continue // not applied (superseded): the next one
		}
		x.planted = w.WID
		x.progress("planted: %s applied a second time", w.WID)
		return nil
	}
	return errors.New("plant: no applied work item to plant on")
}

// receiveAll receives every message of url (hidden for a minute), for
// the final reading after the hosts stopped.
func (x *run) receiveAll(ctx context.Context, url string) ([]types.Message, error) {
	var all []types.Message
	seen := map[string]bool{}
	empty := 0
	for empty < 2 {
		out, err := x.adminSQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			VisibilityTimeout: 60, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, m := range out.Messages {
			if !seen[aws.ToString(m.MessageId)] {
				seen[aws.ToString(m.MessageId)] = true
				all = append(all, m)
				fresh++
			}
		}
		if fresh == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return all, nil
}
