package devcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/caseflow"
	"github.com/ddbworker/ddbworker/internal/daemonext"
)

func newSendCmd(g daemonext.Globals) *cobra.Command {
	var (
		sc       caseflow.ScenarioConfig
		queueURL string
		noSeed   bool
		senders  int
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send example case messages: fresh work, duplicates, out-of-order versions and poison",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if queueURL == "" {
				return fmt.Errorf("--queue-url (DDBWORKER_QUEUE_URL) is required")
			}
			at, err := given(cmd.Context(), g)
			if err != nil {
				return err
			}
			ddb, q := at.clients(nil, nil)
			plan, err := caseflow.GeneratePlan(sc)
			if err != nil {
				return err
			}
			if !noSeed {
				if err := caseflow.SeedCases(cmd.Context(), ddb, g.Table(), plan.CaseIDs); err != nil {
					return err
				}
			}
			bodies := make([]string, 0, len(plan.Messages))
			for _, m := range plan.Messages {
				bodies = append(bodies, m.Body)
			}
			p := newProgress(cmd.ErrOrStderr(), "send")
			if err := sendBodies(cmd.Context(), q, queueURL, bodies, senders, func(n int) { p.update("%d/%d messages sent", n, len(bodies)) }); err != nil {
				return err
			}
			p.done("%d messages sent", len(bodies))
			fmt.Fprintf(cmd.OutOrStdout(), "sent %d messages: %d work items, %d duplicates, %d out of order, %d poison, over %d cases\n",
				len(plan.Messages), len(plan.Work), plan.Duplicates, plan.OutOfOrder, len(plan.PoisonList), len(plan.CaseIDs))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&queueURL, "queue-url", "", "work queue URL (required)")
	f.IntVar(&sc.Messages, "count", 2000, "messages to send")
	f.IntVar(&sc.Cases, "cases", 0, "cases to seed (default count/20)")
	f.Float64Var(&sc.DuplicateRatio, "duplicates", 0.3, "fraction of messages that re-send earlier work (new SQS message, same key)")
	f.Float64Var(&sc.OutOfOrderRatio, "out-of-order", 0.2, "fraction of stage changes sent after the next version")
	f.IntVar(&sc.Poison, "poison", 0, "poison messages (default count/100; negative: none)")
	f.Uint64Var(&sc.Seed, "seed", uint64(time.Now().UnixNano()), "random seed (same seed, same stream)")
	f.BoolVar(&noSeed, "no-seed", false, "do not create the case items")
	f.IntVar(&senders, "senders", 4, "concurrent SendMessageBatch calls")
	return cmd
}

// sendBodies sends bodies in batches of 10 with senders concurrent calls,
// reporting the running count. On a FIFO queue the group is the message's
// aggregateId, so one case's messages keep their order.
func sendBodies(ctx context.Context, q *sqs.Client, queueURL string, bodies []string, senders int, progress func(int)) error {
	fifo := strings.HasSuffix(queueURL, ".fifo")
	batches := make(chan []string)
	var sent atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range max(1, senders) {
		wg.Go(func() {
			for batch := range batches {
				entries := make([]types.SendMessageBatchRequestEntry, len(batch))
				for i, b := range batch {
					entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
					if fifo {
						sum := sha256.Sum256([]byte(b))
						entries[i].MessageGroupId = aws.String(groupOf(b))
						entries[i].MessageDeduplicationId = aws.String(hex.EncodeToString(sum[:16]))
					}
				}
				out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d messages refused, first: %s %s", len(out.Failed), aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("send: %w", err) })
					continue
				}
				progress(int(sent.Add(int64(len(batch)))))
			}
		})
	}
	for start := 0; start < len(bodies); start += 10 {
		if ctx.Err() != nil {
			break
		}
		batches <- bodies[start:min(start+10, len(bodies))]
	}
	close(batches)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

func groupOf(body string) string {
	var e struct {
		AggregateID string `json:"aggregateId"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.AggregateID == "" {
		return "unparseable"
	}
	return e.AggregateID
}

// progress prints a live line: rewritten in place on a terminal, at most
// every two seconds otherwise.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	mu    sync.Mutex
	last  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, label: label, tty: tty}
}

func (p *progress) update(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	every := 2 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if now.Sub(p.last) < every {
		return
	}
	p.last = now
	line := fmt.Sprintf("[%s] "+format, append([]any{p.label}, args...)...)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("[%s] "+format, append([]any{p.label}, args...)...)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}
