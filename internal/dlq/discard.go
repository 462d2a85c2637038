package dlq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DiscardOptions select the messages Discard removes from the DLQ for good:
// messages that can never be fixed (a type no release will handle, a
// producer's bug whose work nobody wants any more).
type DiscardOptions struct {
	// Filter selects the messages. Required: at least its Code or Type —
	// Discard never removes a DLQ unfiltered.
	Filter Filter
	// Max is the most messages removed (or, in a dry run, listed).
	// Default: DefaultMax. Must be 0 with All.
	Max int
	// All lifts Max: every selected message is removed.
	All bool
	// DryRun lists what would be removed and removes nothing. Account is
	// still called, told so, to say what it would record or why it would
	// refuse.
	DryRun bool
	// Account records the removal of m where the work is accounted for
	// (the inbox: the work's FAILED_TERMINAL record, or a rejection
	// record), before m is deleted, and returns what it recorded; an error
	// leaves m in the DLQ (Failed, step "record"). dryRun: only read, and
	// say what would be recorded. Required.
	Account func(ctx context.Context, m Message, dryRun bool) (recorded string, err error)
	// Progress is called after each receive's messages were handled.
	// Optional.
	Progress func(DiscardProgress)
}

// DiscardProgress is where a running discard stands.
type DiscardProgress struct {
	Scanned, Skipped, Discarded, Failed int
	// Max is the limit (0 with All).
	Max int
}

// Discarded is a message removed from the DLQ (in a dry run: that would
// be), and what was recorded of its removal.
type Discarded struct {
	ID   string `json:"id"`
	Code string `json:"code"`
	Type string `json:"type"`
	Key  string `json:"idempotencyKey,omitempty"`
	// Recorded says where the removal is accounted for.
	Recorded string `json:"recorded"`
}

// DiscardFailed is a selected message that stayed in the DLQ.
type DiscardFailed struct {
	Discarded
	// Step is "record" (nothing was recorded or removed) or "delete"
	// (recorded, still in the DLQ: a later discard finds the record and
	// deletes it).
	Step  string `json:"step"`
	Error string `json:"error"`
}

// DiscardReport is what a discard did.
type DiscardReport struct {
	DLQURL  string `json:"dlqUrl"`
	DryRun  bool   `json:"dryRun"`
	Filter  Filter `json:"filter"`
	Max     int    `json:"max"` // 0 with All
	Scanned int    `json:"scanned"`
	Matched int    `json:"matched"`
	Skipped int    `json:"skipped"`
	// Arrived reached the DLQ after the discard started; they stay.
	Arrived int `json:"arrived"`
	// OverMax matched but were received after Max was reached; they stay.
	OverMax      int             `json:"overMax"`
	Discarded    []Discarded     `json:"discarded"`
	Failed       []DiscardFailed `json:"failed"`
	ByCode       map[string]int  `json:"discardedByCode"`
	ByType       map[string]int  `json:"discardedByType"`
	LimitReached bool            `json:"limitReached"`
	Complete     bool            `json:"complete"`
	Duration     time.Duration   `json:"durationNs"`
}

// ErrDiscardUnfiltered reports a discard without a filter.
var ErrDiscardUnfiltered = errors.New("dlq: DiscardOptions.Filter must name a code or a type: a DLQ is never discarded unfiltered")

// Discard removes up to opts.Max messages that match opts.Filter from the
// DLQ, each only after opts.Account recorded its removal; like Redrive it
// scans on past Max until one more matching message shows that some remain
// (LimitReached) or the DLQ ends (Complete), and makes visible again
// everything it received and did not remove.
func (q *Queue) Discard(ctx context.Context, opts DiscardOptions) (rep DiscardReport, err error) {
	var errs []error
	if opts.Filter.IsZero() {
		errs = append(errs, ErrDiscardUnfiltered)
	}
	if opts.Account == nil {
		errs = append(errs, errors.New("dlq: DiscardOptions.Account is required: every removal is recorded"))
	}
	switch {
	case opts.Max < 0:
		errs = append(errs, fmt.Errorf("dlq: DiscardOptions.Max %d must not be negative", opts.Max))
	case opts.All && opts.Max > 0:
		errs = append(errs, fmt.Errorf("dlq: DiscardOptions.Max %d and All exclude each other", opts.Max))
	case opts.Max == 0 && !opts.All:
		opts.Max = DefaultMax
	}
	if err := errors.Join(errs...); err != nil {
		return DiscardReport{}, err
	}
	start := q.cfg.Now()
	rep = DiscardReport{DLQURL: q.cfg.DLQURL, DryRun: opts.DryRun, Filter: opts.Filter, Max: opts.Max,
		Discarded: []Discarded{}, Failed: []DiscardFailed{}, ByCode: map[string]int{}, ByType: map[string]int{}}
	limit := opts.Max
	if opts.All {
		limit = math.MaxInt
	}
	selected := 0
	s := q.newScan()
	defer func() {
		err = errors.Join(err, s.release(ctx))
		rep.Scanned, rep.Complete = s.scanned, s.complete
		rep.Matched = rep.Scanned - rep.Skipped
		rep.Duration = q.cfg.Now().Sub(start)
	}()
	err = s.run(ctx, q.cfg.MaxScan, func(int) int { return maxBatch }, func(ctx context.Context, batch []Message) (bool, error) {
		var recorded []Discarded
		for _, m := range batch {
			switch {
			case !opts.Filter.Match(&m):
				rep.Skipped++
				continue
			case m.SentAt.After(start.Truncate(time.Millisecond)):
				rep.Arrived++
				continue
			case selected >= limit:
				rep.OverMax++
				continue
			}
			selected++
			d := Discarded{ID: m.ID, Code: m.FailureCode, Type: m.MessageType, Key: m.IdempotencyKey}
			note, err := opts.Account(ctx, m, opts.DryRun)
			if err != nil {
				rep.Failed = append(rep.Failed, DiscardFailed{Discarded: d, Step: "record", Error: err.Error()})
				continue
			}
			d.Recorded = note
			if opts.DryRun {
				rep.add(d)
				continue
			}
			recorded = append(recorded, d)
		}
		q.deleteDiscarded(ctx, s, recorded, &rep)
		if opts.Progress != nil {
			opts.Progress(DiscardProgress{Scanned: s.scanned, Skipped: rep.Skipped + rep.Arrived, Discarded: len(rep.Discarded), Failed: len(rep.Failed), Max: opts.Max})
		}
		if selected >= limit && rep.OverMax > 0 {
			rep.LimitReached = true
			return true, nil
		}
		return false, ctx.Err()
	})
	return rep, err
}

func (r *DiscardReport) add(d Discarded) {
	r.Discarded = append(r.Discarded, d)
	r.ByCode[d.Code]++
	r.ByType[d.Type]++
}

// deleteDiscarded deletes the recorded messages from the DLQ (one batch:
// a receive brings at most 10), on a context detached from ctx: what was
// recorded is removed even when the caller gives up.
func (q *Queue) deleteDiscarded(ctx context.Context, s *scan, ds []Discarded, rep *DiscardReport) {
	if len(ds) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.ReleaseTimeout)
	defer cancel()
	entries := make([]types.DeleteMessageBatchRequestEntry, len(ds))
	for i, d := range ds {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(s.receipt(d.ID))}
	}
	out, err := q.api.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.cfg.DLQURL), Entries: entries})
	failed := map[int]string{}
	if err != nil {
		for i := range ds {
			failed[i] = err.Error()
		}
	} else {
		for _, f := range out.Failed {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil {
				failed[i] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
			}
		}
	}
	for i, d := range ds {
		if msg, bad := failed[i]; bad {
			rep.Failed = append(rep.Failed, DiscardFailed{Discarded: d, Step: "delete", Error: msg})
			continue
		}
		s.gone(d.ID)
		rep.add(d)
	}
}
