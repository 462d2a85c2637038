package explore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/stale"
)

// op performs one operator action with the library functions the CLI
// uses (daemon/inbox.go reopenRecord, dlq.Queue.Redrive,
// stale.Sweeper.Sweep) and, for SQS's own redrive, as SQS does it.
func (x *run) op(ctx context.Context, o Op) {
	n, err := x.doOp(ctx, o)
	label := string(o.Kind)
	if o.Code != "" {
		label += " code=" + o.Code
	}
	if err != nil {
		x.progress("operator: %s: %v", label, err)
		return
	}
	x.evMu.Lock()
	x.ops[string(o.Kind)]++
	x.ops[string(o.Kind)+" (messages or records)"] += n
	x.evMu.Unlock()
	x.progress("operator: %s: %d", label, n)
}

func (x *run) doOp(ctx context.Context, o Op) (int, error) {
	switch o.Kind {
	case OpReopen:
		return x.reopen(ctx)
	case OpRedriveAll, OpRedriveFiltered:
		q, err := dlq.New(x.adminSQS, dlq.Config{DLQURL: x.qs.DLQURL, QueueURL: x.qs.URL, WaitTime: time.Second, Hide: 30 * time.Second})
		if err != nil {
			return 0, err
		}
		opts := dlq.RedriveOptions{All: true, Rate: 1000}
		if o.Kind == OpRedriveFiltered {
			opts.Filter = dlq.Filter{Code: o.Code}
		}
		rep, err := q.Redrive(ctx, opts)
		if err != nil || !slices.ContainsFunc(rep.Failed, func(f dlq.Failed) bool { return f.Step == "fit" }) {
			return len(rep.Moved), err
		}
		// A copy that cannot carry every producer attribute with its age
		// is refused, naming the fix: the operator names an attribute no
		// route reads (the producer's decoration p00) and redrives again.
		opts.DropAttributes = []string{"p00"}
		again, err := q.Redrive(ctx, opts)
		return len(rep.Moved) + len(again.Moved), err
	case OpSQSRedrive:
		return x.sqsRedrive(ctx)
	case OpSweep:
		sw, err := stale.NewSweeper(x.admin, stale.SweepConfig{Store: x.store})
		if err != nil {
			return 0, err
		}
		rep, err := sw.Sweep(ctx, stale.SweepOptions{})
		return rep.Read, err
	}
	return 0, fmt.Errorf("unknown operator action %q", o.Kind)
}

// reopen reopens the FAILED_TERMINAL records of flaky work — the operator
// fixed what made it fail — as `ddbworker inbox reopen` does, in key
// order.
func (x *run) reopen(ctx context.Context) (int, error) {
	st, err := x.read(ctx)
	if err != nil {
		return 0, err
	}
	store, err := x.store.WithDefaults()
	if err != nil {
		return 0, err
	}
	flaky := map[string]bool{}
	for _, w := range x.s.Works {
		if w.Kind == KindFlaky {
			flaky[w.Key+"/"+w.Type] = true
		}
	}
	var recs []*inbox.Record
	for id, rec := range st.records {
		if rec.Status == inbox.StatusFailedTerminal && flaky[id] {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *inbox.Record) int { return compare(a.Key+a.MessageType, b.Key+b.MessageType) })
	n := 0
	for _, rec := range recs {
		in, err := store.Reopen(rec, time.Now(), "explore", "the flaky dependency was fixed").UpdateItem(store.Table, store.Key(rec.Key, rec.MessageType))
		if err != nil {
			return n, err
		}
		if _, err := x.admin.UpdateItem(ctx, in); err == nil {
			n++
		}
	}
	return n, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sqsRedrive moves every DLQ message back to the work queue as SQS's own
// redrive (StartMessageMoveTask) does: the body and the attributes as they
// are, no mark added; the copy's receive count starts at 1.
func (x *run) sqsRedrive(ctx context.Context) (int, error) {
	msgs, err := x.receiveAll(ctx, x.qs.DLQURL)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(x.qs.URL), MessageBody: m.Body}
		if len(m.MessageAttributes) > 0 {
			in.MessageAttributes = m.MessageAttributes
		}
		if x.s.FIFO {
			in.MessageGroupId = aws.String(orDefault(m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], "explore"))
			in.MessageDeduplicationId = aws.String("sqs-redrive-" + aws.ToString(m.MessageId) + "-" + strconv.Itoa(n))
		}
		if _, err := x.adminSQS.SendMessage(ctx, in); err != nil {
			return n, err
		}
		if _, err := x.adminSQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(x.qs.DLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
