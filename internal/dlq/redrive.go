package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/tracing"
)

// Filter selects messages by exact failure code and message type; an empty
// field matches any. CodeNone and TypeUnreadable select what they name.
type Filter struct {
	Code string `json:"code,omitempty"`
	Type string `json:"type,omitempty"`
}

// Match reports whether m passes the filter.
func (f Filter) Match(m *Message) bool {
	return (f.Code == "" || f.Code == m.FailureCode) && (f.Type == "" || f.Type == m.MessageType)
}

// IsZero reports whether the filter matches every message.
func (f Filter) IsZero() bool { return f == Filter{} }

// RedriveOptions select and pace a redrive.
type RedriveOptions struct {
	// Filter selects the messages to move. Default: every message.
	Filter Filter
	// Max is the most messages to move (or, in a dry run, to list).
	// Default: 10 — redrive a few first, never all at once. Must be 0 with
	// All.
	Max int
	// All lifts Max: every selected message moves. Default: false.
	All bool
	// Rate is the most messages sent per second. Default: 10.
	Rate float64
	// DryRun lists what would move and moves nothing. Default: false.
	DryRun bool
	// MaxAge refuses messages whose work was first sent longer ago than
	// this: the worker keeps COMPLETED records 35 days by default, and a
	// replay older than that could apply the work twice (the worker refuses
	// it as REPLAY_WINDOW_EXPIRED anyway). They stay in the DLQ. Default:
	// 34 days; set it one day below the workers' TTL for COMPLETED records.
	MaxAge time.Duration
	// DropAttributes names producer attributes the copies leave out. A
	// copy keeps every attribute of its producer's and AttrFirstSentAt
	// (the work's age, by which the worker's replay window judges the
	// copy); a message that carries so many that its copy cannot keep them
	// all within SQS's limits is not moved (Failed, step "fit", naming
	// them): its routes may read any of them, which the tooling cannot
	// know. Name here the ones no route reads. Default: none.
	DropAttributes []string
	// Progress is called after each receive's messages were handled.
	// Optional.
	Progress func(RedriveProgress)
}

// RedriveProgress is where a running redrive stands.
type RedriveProgress struct {
	Scanned, Skipped, Moved, Failed int
	// Max is the limit (0 with All).
	Max int
}

// Moved is a message moved to the work queue (in a dry run: that would be).
type Moved struct {
	// ID is the message id in the DLQ.
	ID string `json:"id"`
	// NewID is the message id in the work queue ("" in a dry run).
	NewID string `json:"newId,omitempty"`
	Code  string `json:"code"`
	Type  string `json:"type"`
	Key   string `json:"idempotencyKey,omitempty"`
	// DroppedAttributes names the attributes the work queue's copy could
	// not carry within SQS's limits (10 attributes; 1 MiB with the body),
	// in FitAttributesFor's order: the copy keeps AttrRedrivenFrom and
	// AttrFirstSentAt first, then every other attribute of the producer's
	// the DLQ message carried (by name: a route may read any of them),
	// then the trace context. Empty when it carries them all.
	DroppedAttributes []string `json:"droppedAttributes,omitempty"`
}

// Failed is a selected message that did not move.
type Failed struct {
	Moved
	// Step is "send" (the message is still only in the DLQ) or "delete"
	// (sent, NewID set, and still in the DLQ: a later redrive sends it
	// again, which the idempotency gate absorbs).
	Step  string `json:"step"`
	Error string `json:"error"`
}

// RedriveReport is what a redrive did.
type RedriveReport struct {
	DLQURL   string  `json:"dlqUrl"`
	QueueURL string  `json:"queueUrl,omitempty"`
	DryRun   bool    `json:"dryRun"`
	Filter   Filter  `json:"filter"`
	Max      int     `json:"max"` // 0 with All
	Rate     float64 `json:"rate"`
	// Scanned is how many distinct DLQ messages were received.
	Scanned int `json:"scanned"`
	// Matched is how many of them matched the filter (Scanned − Skipped):
	// the moved, the failed, and those left for being over the limit, too
	// old or newer than the redrive.
	Matched int `json:"matched"`
	// Skipped did not match the filter; they stay in the DLQ.
	Skipped int `json:"skipped"`
	// Arrived reached the DLQ after the redrive started (for instance a
	// redriven message that failed again), by SentTimestamp against
	// Config.Now; they stay in the DLQ: one redrive never moves a message
	// twice. (A local clock behind SQS's leaves the very newest alone too.)
	Arrived int `json:"arrived"`
	// TooOld matched the filter but their work was first sent longer ago
	// than MaxAge; they stay in the DLQ.
	TooOld int `json:"tooOld"`
	// OverMax matched the filter but were received after Max was reached;
	// they stay in the DLQ for the next redrive. Once Max is reached the
	// redrive scans on, moving nothing, until it receives one such message
	// or reaches the end of the DLQ: OverMax > 0 means at least that many
	// remain; OverMax 0 with Complete means none does.
	OverMax int `json:"overMax"`
	// Moved were sent to the work queue and deleted from the DLQ; in a
	// dry run, they would have been.
	Moved []Moved `json:"moved"`
	// Failed were selected and did not move.
	Failed []Failed `json:"failed"`
	// MovedByCode and MovedByType count Moved.
	MovedByCode map[string]int `json:"movedByCode"`
	MovedByType map[string]int `json:"movedByType"`
	// LimitReached is true when Max stopped the redrive: a matching
	// message beyond it was received (OverMax > 0) and left in the DLQ.
	// Exactly Max matching messages do not reach it.
	LimitReached bool `json:"limitReached"`
	// Complete is true when the scan reached the end of the DLQ; false
	// after LimitReached, or when Config.MaxScan stopped it (then more
	// matching messages may remain).
	Complete bool          `json:"complete"`
	Duration time.Duration `json:"durationNs"`
}

// The defaults of RedriveOptions, applied by Redrive.
const (
	// DefaultMax is RedriveOptions.Max's default: redrive a few first.
	DefaultMax = 10
	// DefaultRate is RedriveOptions.Rate's default, in messages per second.
	DefaultRate = 10.0
	// DefaultMaxAge is RedriveOptions.MaxAge's default: one day less than
	// the worker's default TTL for COMPLETED records (35 days).
	DefaultMaxAge = 34 * 24 * time.Hour
)

// ErrNoQueueURL reports a redrive without Config.QueueURL.
var ErrNoQueueURL = errors.New("dlq: Config.QueueURL (the work queue to redrive to) is required")

func (o *RedriveOptions) validate(dryRun bool, queueURL string) error {
	var errs []error
	if queueURL == "" && !dryRun {
		errs = append(errs, ErrNoQueueURL)
	}
	switch {
	case o.Max < 0:
		errs = append(errs, fmt.Errorf("dlq: RedriveOptions.Max %d must not be negative", o.Max))
	case o.All && o.Max > 0:
		errs = append(errs, fmt.Errorf("dlq: RedriveOptions.Max %d and All exclude each other", o.Max))
	case o.Max == 0 && !o.All:
		o.Max = DefaultMax
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("dlq: RedriveOptions.MaxAge %s must not be negative", o.MaxAge))
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 1) {
		errs = append(errs, fmt.Errorf("dlq: RedriveOptions.Rate %v must be a positive number of messages per second", o.Rate))
	}
	return errors.Join(errs...)
}

// Redrive moves up to opts.Max messages that match opts.Filter from the DLQ
// to Config.QueueURL, at most opts.Rate a second: each is sent with its
// original body, its producer's attributes (ddbworker.* stripped),
// AttrFirstSentAt and AttrRedrivenFrom, then deleted from the DLQ once the
// send succeeded. A message whose work is older than opts.MaxAge is not
// sent (TooOld). Once Max is reached it scans on, moving nothing, until
// one more matching message shows that some remain (OverMax,
// LimitReached) or the DLQ ends (Complete: none remain), so the report
// says which.
// Everything else it received — filtered out, over the limit, failed, or
// arrived after it started — is made visible again. It returns an error
// when the redrive could not run to its end; messages that failed one by
// one are in the report's Failed.
func (q *Queue) Redrive(ctx context.Context, opts RedriveOptions) (rep RedriveReport, err error) {
	if err := opts.validate(opts.DryRun, q.cfg.QueueURL); err != nil {
		return RedriveReport{}, err
	}
	start := q.cfg.Now()
	rep = RedriveReport{DLQURL: q.cfg.DLQURL, QueueURL: q.cfg.QueueURL, DryRun: opts.DryRun, Filter: opts.Filter, Max: opts.Max, Rate: opts.Rate,
		Moved: []Moved{}, Failed: []Failed{}, MovedByCode: map[string]int{}, MovedByType: map[string]int{}}
	limit := opts.Max
	if opts.All {
		limit = math.MaxInt
	}
	// A message received waits at most 10/Rate before it is sent: receive
	// no more than can be sent within half of Hide.
	perReceive := int(min(maxBatch, max(1, opts.Rate*q.cfg.Hide.Seconds()/2)))
	perSend := int(min(maxBatch, max(1, opts.Rate)))
	p := &pacer{per: time.Duration(float64(time.Second) / opts.Rate), now: q.cfg.Now, sleep: q.sleep}
	selected := 0

	s := q.newScan()
	defer func() {
		err = errors.Join(err, s.release(ctx))
		rep.Scanned, rep.Complete = s.scanned, s.complete
		rep.Matched = rep.Scanned - rep.Skipped
		rep.Duration = q.cfg.Now().Sub(start)
	}()
	size := func(int) int {
		if opts.Filter.IsZero() { // every message matches: no more than can be taken, or one to look ahead
			return max(1, min(perReceive, limit-selected))
		}
		return perReceive
	}
	err = s.run(ctx, q.cfg.MaxScan, size, func(ctx context.Context, batch []Message) (bool, error) {
		var pick []Message
		for _, m := range batch {
			switch {
			case !opts.Filter.Match(&m):
				rep.Skipped++
			case m.SentAt.After(start.Truncate(time.Millisecond)):
				rep.Arrived++
			case !m.FirstSentAt.IsZero() && start.Sub(m.FirstSentAt) > opts.MaxAge:
				rep.TooOld++
			case selected < limit:
				selected++
				pick = append(pick, m)
			default:
				rep.OverMax++
			}
		}
		var err error
		if opts.DryRun {
			for _, m := range pick {
				if o := q.outgoing(&m, opts.DropAttributes); o.refusal != "" {
					rep.fail(m, "", "fit", o.refusal)
				} else {
					rep.add(m, "", o.dropped)
				}
			}
		} else {
			err = q.move(ctx, s, p, pick, perSend, opts.DropAttributes, &rep)
		}
		if opts.Progress != nil {
			opts.Progress(RedriveProgress{Scanned: s.scanned, Skipped: rep.Skipped + rep.Arrived, Moved: len(rep.Moved), Failed: len(rep.Failed), Max: opts.Max})
		}
		// At the limit, one more matching message says that some remain;
		// until one comes (or the DLQ ends) the scan goes on.
		if selected >= limit && rep.OverMax > 0 {
			rep.LimitReached = true
			return true, err
		}
		return false, err
	})
	return rep, err
}

func (r *RedriveReport) add(m Message, newID string, dropped []string) {
	r.Moved = append(r.Moved, Moved{ID: m.ID, NewID: newID, Code: m.FailureCode, Type: m.MessageType, Key: m.IdempotencyKey, DroppedAttributes: dropped})
	r.MovedByCode[m.FailureCode]++
	r.MovedByType[m.MessageType]++
}

func (r *RedriveReport) fail(m Message, newID, step string, err string) {
	r.Failed = append(r.Failed, Failed{Moved: Moved{ID: m.ID, NewID: newID, Code: m.FailureCode, Type: m.MessageType, Key: m.IdempotencyKey}, Step: step, Error: err})
}

// sendBatchBytes bounds the payload of one SendMessageBatch (bodies and
// attributes): 256 KiB, the limit of AWS before 2025 that some endpoints
// still enforce, well within today's 1 MiB; a larger message goes alone
// (sqsbatch's rule). Redrive is paced to a few messages a second, so the
// smaller calls cost nothing.
const sendBatchBytes = sqsbatch.PortableBatchBytes

// outgoing is a message on its way to the work queue: its copy, the copy's
// size as SQS counts it, the attributes it could not carry, and why it
// is not sent at all ("" when it is).
type outgoing struct {
	m       *Message
	entry   types.SendMessageBatchRequestEntry
	size    int
	dropped []string
	refusal string
}

// move sends msgs to the work queue in paced batches of at most perSend
// and sendBatchBytes, and deletes the ones sent from the DLQ. It returns an
// error only when the redrive must stop (ctx ended while pacing); the
// messages not sent then are in rep.Failed.
func (q *Queue) move(ctx context.Context, s *scan, p *pacer, msgs []Message, perSend int, drop []string, rep *RedriveReport) error {
	out := make([]outgoing, 0, len(msgs))
	for i := range msgs {
		o := q.outgoing(&msgs[i], drop)
		if o.refusal != "" {
			rep.fail(msgs[i], "", "fit", o.refusal)
			continue
		}
		out = append(out, o)
	}
	batches := sqsbatch.Split(out, func(o outgoing) int { return o.size }, sqsbatch.Limits{Entries: perSend, Bytes: sendBatchBytes})
	for b, batch := range batches {
		if err := p.wait(ctx, len(batch)); err != nil {
			for _, rest := range batches[b:] {
				for _, o := range rest {
					rep.fail(*o.m, "", "send", "not sent: "+err.Error())
				}
			}
			return fmt.Errorf("dlq: redrive stopped: %w", err)
		}
		q.sendAndDelete(ctx, s, batch, rep)
	}
	return nil
}

func (q *Queue) sendAndDelete(ctx context.Context, s *scan, batch []outgoing, rep *RedriveReport) {
	chunk := make([]Message, len(batch))
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, o := range batch {
		chunk[i] = *o.m
		entries[i] = o.entry
		entries[i].Id = aws.String(strconv.Itoa(i))
	}
	out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.cfg.QueueURL), Entries: entries})
	if err != nil {
		for _, m := range chunk {
			rep.fail(m, "", "send", err.Error())
		}
		return
	}
	// index is the position of a result's entry Id in chunk, or -1.
	index := func(id *string) int {
		if i, err := strconv.Atoi(aws.ToString(id)); err == nil && i >= 0 && i < len(chunk) {
			return i
		}
		return -1
	}
	sent := map[int]string{}
	answered := make([]bool, len(chunk))
	for _, ok := range out.Successful {
		if i := index(ok.Id); i >= 0 {
			sent[i] = aws.ToString(ok.MessageId)
			answered[i] = true
		}
	}
	for _, f := range out.Failed {
		if i := index(f.Id); i >= 0 {
			delete(sent, i)
			answered[i] = true
			rep.fail(chunk[i], "", "send", aws.ToString(f.Code)+": "+aws.ToString(f.Message))
		}
	}
	for i, ok := range answered {
		if !ok { // in neither list: not known to be sent, still in the DLQ
			rep.fail(chunk[i], "", "send", "SQS reported no result for the entry")
		}
	}
	if len(sent) == 0 {
		return
	}
	// Sent: delete even when ctx ended meanwhile, so that the message does
	// not stay in both queues.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.ReleaseTimeout)
	defer cancel()
	var del []types.DeleteMessageBatchRequestEntry
	for i := range chunk {
		if _, ok := sent[i]; ok {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(s.receipt(chunk[i].ID))})
		}
	}
	dout, err := q.api.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.cfg.DLQURL), Entries: del})
	failed := map[int]string{}
	if err != nil {
		for i := range sent {
			failed[i] = err.Error()
		}
	} else {
		for _, f := range dout.Failed {
			failed[index(f.Id)] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
		}
	}
	for i := range chunk {
		newID, ok := sent[i]
		if !ok {
			continue
		}
		if msg, bad := failed[i]; bad {
			rep.fail(chunk[i], newID, "delete", msg)
			continue
		}
		s.gone(chunk[i].ID)
		rep.add(chunk[i], newID, batch[i].dropped)
	}
}

// outgoing is the work-queue copy of m (its entry without an Id): the
// original body and copyAttributes, or the refusal of a copy that could
// not carry all that is needed.
func (q *Queue) outgoing(m *Message, drop []string) outgoing {
	attrs, dropped, droppedNeeded := copyAttributes(m, drop)
	if len(droppedNeeded) > 0 {
		return outgoing{m: m, refusal: fmt.Sprintf("not moved: its copy cannot carry every attribute of its producer's and %s within SQS's limits (10 attributes; %d bytes with the body); it would leave out %s. "+
			"Name producer attributes no route reads to leave out (--drop-attribute NAME; RedriveOptions.DropAttributes)",
			AttrFirstSentAt, sqsbatch.MaxMessageBytes, strings.Join(droppedNeeded, ", "))}
	}
	size := sqsbatch.MessageSize(m.Body, attrs)
	if len(attrs) == 0 {
		attrs = nil
	}
	e := types.SendMessageBatchRequestEntry{MessageBody: aws.String(m.Body), MessageAttributes: attrs}
	if isFIFO(q.cfg.QueueURL) {
		// The DLQ message id deduplicates a re-send of the same DLQ
		// message within SQS's 5-minute window.
		e.MessageGroupId = aws.String(firstNonEmpty(m.GroupID, "ddbworker-redrive"))
		e.MessageDeduplicationId = aws.String(m.ID)
	} else if m.GroupID != "" {
		// On a standard queue the group id is the message's tenant (SQS
		// fair queues): the redriven message keeps it.
		e.MessageGroupId = aws.String(m.GroupID)
	}
	return outgoing{m: m, entry: e, size: size, dropped: dropped}
}

// copyAttributes are the attributes of m's copy to the work queue, as
// FitAttributesFor ranks and fits them within SQS's limits (10
// attributes; sqsbatch.MaxMessageBytes with the body: SQS refuses a larger
// copy, and a call holding it, as a whole). Needed, first: every attribute
// of its producer's but the trace context and those drop names (the
// operator's tooling does not know which of them the worker's routes read,
// as an adapter's TypeAttribute), and when its work was first sent
// (AttrFirstSentAt: the worker's replay window and later redrives judge
// its age by it, not by the copy's new SentTimestamp). Then where it came
// from (AttrRedrivenFrom: the worker claims a marked message through the
// gate; every route but SkipInboxCheck's finds the work's record without
// it, in its commit) and its trace context (traceparent and tracestate,
// or its AWSTraceHeader as traceparent: the redriven delivery's span links
// to the original producer). dropped names the ones drop left out, then
// the others, in that order, and droppedNeeded the needed ones among them:
// a copy that drops one is not sent. A copy of the worker's DLQ copy drops nothing (it carries at most
// 8 attributes beside the failure code and firstSentAt); one of a message
// SQS's redrive policy moved with 9 producer attributes drops its mark and
// trace context, with 10 it is refused.
func copyAttributes(m *Message, drop []string) (attrs map[string]types.MessageAttributeValue, dropped, droppedNeeded []string) {
	candidates := m.ProducerAttributes()
	var left []string // the ones drop names that m carries
	for _, k := range drop {
		if _, ok := candidates[k]; ok {
			left = append(left, k)
			delete(candidates, k)
		}
	}
	var needed []string
	for k := range candidates {
		if k != tracing.AttrTraceparent && k != tracing.AttrTracestate {
			needed = append(needed, k)
		}
	}
	trace := tracing.Carry(tracing.Extract(candidates, map[string]string{tracing.SystemAttrAWSTraceHeader: m.AWSTraceHeader}))
	// As extracted: a malformed traceparent or tracestate is not copied.
	delete(candidates, tracing.AttrTraceparent)
	delete(candidates, tracing.AttrTracestate)
	maps.Copy(candidates, trace)
	if !m.FirstSentAt.IsZero() {
		candidates[AttrFirstSentAt] = types.MessageAttributeValue{DataType: aws.String("Number"),
			StringValue: aws.String(strconv.FormatInt(m.FirstSentAt.UnixMilli(), 10))}
		needed = append(needed, AttrFirstSentAt)
	}
	candidates[AttrRedrivenFrom] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.ID)}
	attrs, dropped, droppedNeeded = FitAttributesFor(m.Body, candidates, needed, sqsbatch.MaxMessageBytes)
	if len(left) > 0 {
		dropped = append(left, dropped...)
	}
	return attrs, dropped, droppedNeeded
}

// pacer spaces sends to a rate: a batch of n waits until the previous
// batch's n/rate has passed. The first batch goes at once.
type pacer struct {
	per   time.Duration
	next  time.Time
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

func (p *pacer) wait(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := p.now()
	if d := p.next.Sub(now); d > 0 {
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
		now = p.next
	}
	p.next = now.Add(time.Duration(n) * p.per)
	return nil
}
