package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/metricstest"
	"github.com/ddbworker/ddbworker/worker"
)

// Variant is how the throttled scenario's worker runs.
type Variant string

// The variants of the throttled scenario.
const (
	// VariantGated is the worker as shipped: the database health gate and
	// the adaptive concurrency limit.
	VariantGated Variant = "gated"
	// VariantUngated turns both off through internal/hooks: the worker as
	// it was before it had them.
	VariantUngated Variant = "ungated"
)

// Throttled scenario defaults.
const (
	DefaultThrottleMessages    = 300
	DefaultThrottleConcurrency = 16
	DefaultThrottleTimeout     = 3 * time.Minute
	DefaultThrottleSeed        = 1
	// ThrottleMaxReceiveCount is the scenario queue's redrive policy: a
	// realistic one, which a worker that keeps receiving through throttling
	// walks messages to.
	ThrottleMaxReceiveCount = 10
)

// ThrottledResult is one run of the throttled scenario: one variant of the
// default worker (gate + commit) at one throttle fraction, through a
// ddbproxy that throttles that share of the requests at random.
type ThrottledResult struct {
	Fraction    float64 `json:"throttleFraction"`
	Variant     Variant `json:"variant"`
	Concurrency int     `json:"concurrency"`
	Messages    int     `json:"messages"`
	// Applied counts the messages whose work is applied, read back from the
	// case items.
	Applied int `json:"applied"`
	// TimedOut: the run was stopped at Config.ThrottleTimeout with messages
	// neither applied nor dead-lettered.
	TimedOut bool          `json:"timedOut"`
	Elapsed  time.Duration `json:"elapsedNs"`
	// Throughput is applied messages per second of Elapsed.
	Throughput float64 `json:"appliedPerSecond"`
	// Requests are the DynamoDB requests the proxy received (the SDK's
	// retries and the throttled ones included), by operation in
	// RequestsByOperation; Throttled of them were answered with a throttle.
	Requests            int            `json:"dynamodbRequests"`
	Throttled           int            `json:"throttledRequests"`
	RequestsByOperation map[string]int `json:"requestsByOperation"`
	// Calls are the worker's DynamoDB calls (its metrics; each is up to
	// CallAttempts requests) and its probes (one request each).
	Calls int `json:"dynamodbCalls"`
	// SQSCalls are the worker's SQS calls, by operation in SQSByOperation.
	SQSCalls       int            `json:"sqsCalls"`
	SQSByOperation map[string]int `json:"sqsByOperation"`
	Probes         int            `json:"probes"`
	// Pauses counts the health gate's trips; Paused is the time it held
	// receiving (sampled every 25 ms).
	Pauses int           `json:"pauses"`
	Paused time.Duration `json:"pausedNs"`
	// MinLimit is the lowest concurrency limit seen; AvgLimit its time
	// average while the worker was receiving (sampled every 25 ms).
	MinLimit int     `json:"minConcurrencyLimit"`
	AvgLimit float64 `json:"avgConcurrencyLimit"`
	// DeadLettered counts the messages the queue's redrive policy moved to
	// the DLQ (maxReceiveCount 10); WorkerDLQ those the worker sent there
	// by its terminal policy.
	DeadLettered int `json:"deadLettered"`
	WorkerDLQ    int `json:"workerDlq"`
	// AttemptsUsed is the business attempts the inbox records count (each
	// a recorded failure): infrastructure trouble is not an attempt, so it
	// must be 0.
	AttemptsUsed int `json:"businessAttemptsUsed"`
	// MaxAttempts is the most business attempts any record counts (the
	// worker's default limit is 5).
	MaxAttempts int `json:"maxBusinessAttempts"`
	// InboxStatus counts the run's inbox records by status.
	InboxStatus map[inbox.Status]int `json:"inboxStatus"`
	// AppliedTwice counts work applied more than once (must be 0).
	AppliedTwice int `json:"appliedTwice"`
	// Per applied message.
	RequestsPerMessage  float64 `json:"dynamodbRequestsPerApplied"`
	ThrottledPerMessage float64 `json:"throttledRequestsPerApplied"`
	SQSPerMessage       float64 `json:"sqsCallsPerApplied"`
}

// Left is how many messages were neither applied nor dead-lettered.
func (r *ThrottledResult) Left() int { return max(0, r.Messages-r.Applied-r.DeadLettered-r.WorkerDLQ) }

const (
	// throttleSampleEvery is how often the worker's health and concurrency
	// limit are sampled.
	throttleSampleEvery = 25 * time.Millisecond
	// dlqPollEvery is how often the DLQ is counted while a run goes on.
	dlqPollEvery = 500 * time.Millisecond
)

// throttleFractions are the rows of the scenario: the unthrottled
// baseline, then cfg's fractions in order, without repeats.
func throttleFractions(cfg Config) []float64 {
	out := []float64{0}
	for _, f := range cfg.Throttle {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// runThrottled runs every row of the throttled scenario: for each fraction
// the same number of fresh messages through the gated and the ungated
// worker, in alternating order from row to row (drift in the emulators hits
// both alike). warm runs one unreported unthrottled run first.
func runThrottled(ctx context.Context, env Env, cfg Config, warm bool) ([]ThrottledResult, error) {
	if env.DynamoDBEndpoint == "" {
		return nil, errors.New("bench: the throttled scenario needs Env.DynamoDBEndpoint to put its proxy in front of")
	}
	if warm {
		fmt.Fprintln(cfg.Progress, "[bench] warming up the emulators for the throttled scenario …")
		res, err := throttledRun(ctx, env, cfg, 0, VariantGated)
		if err != nil {
			return nil, fmt.Errorf("bench: throttled warm-up: %w", err)
		}
		fmt.Fprintf(cfg.Progress, "[bench] warm-up: %d/%d applied in %s\n", res.Applied, res.Messages, res.Elapsed.Round(100*time.Millisecond))
	}
	var out []ThrottledResult
	for i, f := range throttleFractions(cfg) {
		order := []Variant{VariantGated, VariantUngated}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		row := map[Variant]*ThrottledResult{}
		for _, v := range order {
			res, err := throttledRun(ctx, env, cfg, f, v)
			if err != nil {
				return nil, err
			}
			status := "done"
			if res.TimedOut {
				status = fmt.Sprintf("timed out, %d left", res.Left())
			}
			fmt.Fprintf(cfg.Progress, "[bench] throttle %.2f %-7s %4d/%d applied %6.1f msg/s  %5.2f DDB req/msg  %d dead-lettered  paused %s  (%s, %s)\n",
				f, v, res.Applied, res.Messages, res.Throughput, res.RequestsPerMessage, res.DeadLettered,
				res.Paused.Round(100*time.Millisecond), res.Elapsed.Round(100*time.Millisecond), status)
			row[v] = res
		}
		out = append(out, *row[VariantGated], *row[VariantUngated])
	}
	return out, nil
}

// throttledRun is one row's variant: fresh messages on a queue of their
// own, the default worker reaching DynamoDB Local through a proxy that
// throttles fraction of the requests, until every message is applied or
// dead-lettered, or Config.ThrottleTimeout.
func throttledRun(ctx context.Context, env Env, cfg Config, fraction float64, v Variant) (*ThrottledResult, error) {
	n := cfg.ThrottleMessages
	res := &ThrottledResult{Fraction: fraction, Variant: v, Concurrency: cfg.ThrottleConcurrency, Messages: n}
	ms, err := makeMessages(KindDefault, caseflow.NewID("")[:10], n, shape{noteBytes: cfg.NoteBytes, keyBytes: cfg.KeyBytes})
	if err != nil {
		return nil, err
	}
	direct := dynamodb.NewFromConfig(env.AWS, env.DynamoDB...)
	if err := caseflow.SeedCases(ctx, direct, env.Table, ms.cases); err != nil {
		return nil, err
	}

	proxy, err := ddbproxy.Start(ddbproxy.Config{Target: env.DynamoDBEndpoint, Seed: cfg.ThrottleSeed})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer proxy.Close()
	proxy.SetThrottleFraction(fraction)

	plainSQS := sqs.NewFromConfig(env.AWS, env.SQS...)
	q, err := worker.CreateQueues(ctx, plainSQS, worker.QueueConfig{Name: "bench-thr-" + caseflow.NewID("")[:10],
		VisibilityTimeout: leasePolicy.Lease, MaxReceiveCount: ThrottleMaxReceiveCount})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, u := range []string{q.URL, q.DLQURL} {
			_, _ = plainSQS.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()
	if err := send(ctx, plainSQS, q.URL, ms.fresh); err != nil {
		return nil, err
	}

	met := newMeter()
	ddb := dynamodb.NewFromConfig(env.AWS, append(slices.Clone(env.DynamoDB), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })...)
	sq := sqs.NewFromConfig(env.AWS, append(slices.Clone(env.SQS), met.sqs)...)
	metrics := metricstest.New()
	var finals, workerDLQ atomic.Int64
	var lastFinal atomic.Int64 // UnixNano
	settledOne := make(chan struct{}, 1)
	reg := ddbworker.NewRegistry()
	if err := (&caseflow.Handlers{Table: env.Table}).Register(reg); err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Deps{DynamoDB: ddb, SQS: sq, Handlers: reg, Logger: slog.New(slog.DiscardHandler), Metrics: metrics,
		OnEvent: func(ev worker.Event) {
			if !ev.Final {
				return
			}
			if ev.Outcome == worker.OutcomeTerminal && ev.Policy == worker.PolicyDLQ {
				workerDLQ.Add(1)
			}
			lastFinal.Store(time.Now().UnixNano())
			finals.Add(1)
			select {
			case settledOne <- struct{}{}:
			default:
			}
		}}, worker.Config{Store: inbox.Store{Table: env.Table, RequestHashVersion: 3}, QueueURL: q.URL, DLQURL: q.DLQURL, Concurrency: cfg.ThrottleConcurrency,
		VisibilityTimeout: leasePolicy.Lease, WaitTime: cfg.throttleWaitTime, DrainTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if v == VariantUngated {
		runCtx = hooks.With(runCtx, hooks.Hooks{NoHealthGate: true, FixedConcurrency: true})
	}
	start := time.Now()
	finished := make(chan error, 1)
	go func() { finished <- w.Run(runCtx) }()
	smp := startSampler(w, func() float64 { return metrics.Value("ddbworker_concurrency_limit") }, cfg.ThrottleConcurrency)

	// Wait until every message is applied or dead-lettered.
	deadline := time.NewTimer(cfg.ThrottleTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(dlqPollEvery)
	defer poll.Stop()
	dlq, dlqGrewAt := 0, start
	var runErr error
	ran := true
wait:
	for {
		redriven := dlq - int(workerDLQ.Load())
		if int(finals.Load())+redriven >= n {
			break
		}
		select {
		case <-settledOne:
		case <-poll.C:
			c, err := countMessages(ctx, plainSQS, q.DLQURL)
			if err != nil {
				runErr = err
				break wait
			}
			if c > dlq {
				dlq, dlqGrewAt = c, time.Now()
			}
		case <-deadline.C:
			res.TimedOut = true
			break wait
		case runErr = <-finished:
			ran = false
			if runErr == nil {
				runErr = errors.New("worker.Run returned before the run ended")
			}
			break wait
		case <-ctx.Done():
			runErr = ctx.Err()
			break wait
		}
	}
	end := time.Now()
	if !res.TimedOut && runErr == nil {
		end = time.Unix(0, lastFinal.Load())
		if dlqGrewAt.After(end) {
			end = dlqGrewAt
		}
	}
	res.Elapsed = end.Sub(start)
	smp.stop()
	stop()
	if ran {
		if err := <-finished; err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return nil, fmt.Errorf("bench: throttle %.2f %s: %w", fraction, v, runErr)
	}

	// What the run cost.
	ps := proxy.Stats()
	res.Requests, res.Throttled, res.RequestsByOperation = ps.Total, ps.ByMode[ddbproxy.Throttle], ps.Requests
	res.Probes = int(metrics.Sum("ddbworker_database_probes_total", nil))
	res.Calls = int(metrics.Sum("ddbworker_dynamodb_calls_total", nil)) + res.Probes // probes bypass the call metrics
	res.Pauses = int(metrics.Value("ddbworker_database_health_transitions_total", "unhealthy"))
	res.Paused, res.MinLimit, res.AvgLimit = smp.paused, smp.minLimit, smp.avgLimit()
	r := met.read()
	res.SQSCalls, res.SQSByOperation = r.SQS, map[string]int{}
	for k, c := range r.Calls {
		res.SQSByOperation[k[len("SQS."):]] = c
	}
	res.WorkerDLQ = int(workerDLQ.Load())
	if dlq, err = countMessages(ctx, plainSQS, q.DLQURL); err != nil {
		return nil, err
	}
	res.DeadLettered = max(0, dlq-res.WorkerDLQ)

	// What it did, read back.
	applied, err := readBack(ctx, direct, env.Table, ms, nil, false)
	if err != nil {
		return nil, err
	}
	res.Applied, res.AppliedTwice = applied.applied, applied.twice
	if res.AttemptsUsed, res.MaxAttempts, res.InboxStatus, err = attemptsUsed(ctx, direct, env.Table, ms); err != nil {
		return nil, err
	}
	res.Throughput = float64(res.Applied) / res.Elapsed.Seconds()
	if res.Applied > 0 {
		a := float64(res.Applied)
		res.RequestsPerMessage, res.ThrottledPerMessage, res.SQSPerMessage = float64(res.Requests)/a, float64(res.Throttled)/a, float64(res.SQSCalls)/a
	}
	return res, nil
}

// countMessages is how many messages a queue holds, visible or not.
func countMessages(ctx context.Context, q *sqs.Client, url string) (int, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, fmt.Errorf("bench: count the DLQ: %w", err)
	}
	n := 0
	for _, a := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		c, _ := strconv.Atoi(out.Attributes[string(a)])
		n += c
	}
	return n, nil
}

// sampler samples the worker's health and its concurrency limit gauge.
type sampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	// Results, valid after stop.
	paused    time.Duration
	minLimit  int
	limitTime float64 // Σ limit·seconds while receiving
	receiving time.Duration
}

func startSampler(w *worker.Worker, limit func() float64, ceiling int) *sampler {
	s := &sampler{done: make(chan struct{}), minLimit: ceiling}
	s.wg.Go(func() {
		t := time.NewTicker(throttleSampleEvery)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-s.done:
				return
			case now := <-t.C:
				dt := now.Sub(last)
				last = now
				l := int(limit())
				s.minLimit = min(s.minLimit, l)
				if !w.DatabaseHealthy() {
					s.paused += dt
					continue
				}
				s.receiving += dt
				s.limitTime += float64(l) * dt.Seconds()
			}
		}
	})
	return s
}

func (s *sampler) stop() {
	close(s.done)
	s.wg.Wait()
}

func (s *sampler) avgLimit() float64 {
	if s.receiving <= 0 {
		return 0
	}
	return s.limitTime / s.receiving.Seconds()
}

// batchGet reads items by key, consistently, 100 at a time.
func batchGet(ctx context.Context, ddb *dynamodb.Client, table string, keys []map[string]ddbtypes.AttributeValue) ([]map[string]ddbtypes.AttributeValue, error) {
	var items []map[string]ddbtypes.AttributeValue
	for start := 0; start < len(keys); start += 100 {
		in := &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
			table: {Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(true)}}}
		for tries := 0; len(in.RequestItems) > 0; tries++ {
			if tries == 10 {
				return nil, fmt.Errorf("bench: read back: keys still unprocessed after %d tries", tries)
			}
			out, err := ddb.BatchGetItem(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("bench: read back: %w", err)
			}
			items = append(items, out.Responses[table]...)
			in.RequestItems = out.UnprocessedKeys
		}
	}
	return items, nil
}

// attemptsUsed reads the run's inbox records back and returns the business
// attempts they count (their recorded failures), the most any record
// counts, and the records by status.
func attemptsUsed(ctx context.Context, ddb *dynamodb.Client, table string, ms *messageSet) (used, most int, byStatus map[inbox.Status]int, err error) {
	var keys []map[string]ddbtypes.AttributeValue
	for _, body := range ms.fresh {
		e := ms.envs[body]
		keys = append(keys, (inbox.Store{}).Key(e.IdempotencyKey, e.MessageType))
	}
	items, err := batchGet(ctx, ddb, table, keys)
	if err != nil {
		return 0, 0, nil, err
	}
	byStatus = map[inbox.Status]int{}
	for _, it := range items {
		rec, err := (inbox.Store{}).Decode(it)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("bench: read back: %w", err)
		}
		byStatus[rec.Status]++
		used += rec.Attempts
		most = max(most, rec.Attempts)
	}
	return used, most, byStatus, nil
}
