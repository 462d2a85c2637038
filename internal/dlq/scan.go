package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ReleaseError reports messages a scan could not make visible again. They
// are not lost: each returns to the DLQ when its Hide runs out.
type ReleaseError struct {
	// IDs are the DLQ message ids still hidden.
	IDs []string
	// Err is what the release calls returned.
	Err error
}

func (e *ReleaseError) Error() string {
	return fmt.Sprintf("dlq: %d messages not released (visible again once Config.Hide runs out): %v", len(e.IDs), e.Err)
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// scan is one pass over the DLQ. It holds every message it received hidden
// until release.
type scan struct {
	q        *Queue
	held     map[string]string // DLQ message id → latest receipt handle
	order    []string          // held ids in the order first received
	scanned  int               // distinct messages received
	complete bool              // the last receives brought nothing new
}

func (q *Queue) newScan() *scan { return &scan{q: q, held: map[string]string{}} }

// run receives until limit distinct messages were seen, EmptyReceives
// receives in a row brought nothing new, or visit says stop; visit gets
// each receive's new messages. size says how many messages a receive may
// ask for (1..10), given how many may still be received.
func (s *scan) run(ctx context.Context, limit int, size func(left int) int, visit func(ctx context.Context, batch []Message) (stop bool, err error)) error {
	limit = min(limit, s.q.cfg.MaxScan)
	for empty := 0; ; {
		if empty >= s.q.cfg.EmptyReceives {
			s.complete = true
			return nil
		}
		left := limit - s.scanned
		if left <= 0 {
			return nil
		}
		batch, err := s.receive(ctx, int32(max(1, min(maxBatch, size(left), left))))
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			empty++
			continue
		}
		empty = 0
		stop, err := visit(ctx, batch)
		if err != nil || stop {
			return err
		}
	}
}

// receive does one receive and returns the messages this scan had not
// seen; a message seen before (its Hide ran out) only updates its handle.
func (s *scan) receive(ctx context.Context, n int32) ([]Message, error) {
	out, err := s.q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(s.q.cfg.DLQURL), MaxNumberOfMessages: n,
		WaitTimeSeconds:             int32(s.q.cfg.WaitTime.Seconds()),
		VisibilityTimeout:           int32(s.q.cfg.Hide.Seconds()),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: receive from %s: %w", s.q.cfg.DLQURL, err)
	}
	var fresh []Message
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if _, seen := s.held[id]; !seen {
			s.order = append(s.order, id)
			s.scanned++
			fresh = append(fresh, parse(m))
		}
		s.held[id] = aws.ToString(m.ReceiptHandle)
	}
	return fresh, nil
}

// gone says the message left the DLQ: nothing to release.
func (s *scan) gone(id string) { delete(s.held, id) }

// receipt is the latest receipt handle of a held message.
func (s *scan) receipt(id string) string { return s.held[id] }

// release makes every held message visible again, in batches of 10, on a
// context detached from ctx (bounded by Config.ReleaseTimeout).
func (s *scan) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.q.cfg.ReleaseTimeout)
	defer cancel()
	var ids []string
	for _, id := range s.order {
		if _, ok := s.held[id]; ok {
			ids = append(ids, id)
		}
	}
	var failed []string
	var errs []error
	for start := 0; start < len(ids); start += maxBatch {
		chunk := ids[start:min(start+maxBatch, len(ids))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, id := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(s.held[id]), VisibilityTimeout: 0}
		}
		out, err := s.q.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.q.cfg.DLQURL), Entries: entries})
		if err != nil {
			failed = append(failed, chunk...)
			errs = append(errs, err)
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if i < 0 || i >= len(chunk) {
				continue
			}
			failed = append(failed, chunk[i])
			errs = append(errs, fmt.Errorf("%s: %s %s", chunk[i], aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	for _, id := range ids {
		delete(s.held, id)
	}
	if len(failed) > 0 {
		return &ReleaseError{IDs: failed, Err: errors.Join(errs...)}
	}
	return nil
}

// Peek returns up to limit messages of the DLQ (≤ 0: Config.MaxScan) and
// leaves every one of them in it, visible again. Messages hidden by another
// reader while Peek runs are not seen; on a FIFO DLQ only the oldest
// message of each message group is (SQS holds a group while its head is
// received).
func (q *Queue) Peek(ctx context.Context, limit int) (msgs []Message, err error) {
	if limit <= 0 {
		limit = q.cfg.MaxScan
	}
	s := q.newScan()
	defer func() { err = errors.Join(err, s.release(ctx)) }()
	err = s.run(ctx, limit, func(left int) int { return left }, func(_ context.Context, batch []Message) (bool, error) {
		msgs = append(msgs, batch...)
		return false, nil
	})
	return msgs, err
}

// Scan calls fn with each message of the DLQ, up to limit (≤ 0:
// Config.MaxScan), and leaves every one in it, visible again; fn returning
// false stops the scan. Peek's caveats apply.
func (q *Queue) Scan(ctx context.Context, limit int, fn func(Message) bool) (err error) {
	if limit <= 0 {
		limit = q.cfg.MaxScan
	}
	s := q.newScan()
	defer func() { err = errors.Join(err, s.release(ctx)) }()
	return s.run(ctx, limit, func(left int) int { return left }, func(_ context.Context, batch []Message) (bool, error) {
		for _, m := range batch {
			if !fn(m) {
				return true, nil
			}
		}
		return false, nil
	})
}
