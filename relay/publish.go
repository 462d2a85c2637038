package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbworker/ddbworker/failure"
	"github.com/ddbworker/ddbworker/internal/attr"
	"github.com/ddbworker/ddbworker/internal/dlq"
	"github.com/ddbworker/ddbworker/internal/hooks"
	"github.com/ddbworker/ddbworker/internal/spans"
	"github.com/ddbworker/ddbworker/internal/sqsbatch"
	"github.com/ddbworker/ddbworker/metrics"
	"github.com/ddbworker/ddbworker/outbox"
	"github.com/ddbworker/ddbworker/tracing"
)

// Sentinel errors.
var (
	// ErrPublish is matched by every *PublishError.
	ErrPublish = errors.New("relay: record not published")
	// ErrBlocked: an earlier record of the same aggregate (FIFO group)
	// failed, so this one was not sent (per-aggregate order).
	ErrBlocked = errors.New("relay: an earlier record of the aggregate failed")
	// ErrLeaseLost: another instance took the shard's lease over.
	ErrLeaseLost = errors.New("relay: shard lease lost")
)

// PublishError says which step failed for which record.
type PublishError struct {
	EventID string
	// Step is read (the status check), send or mark.
	Step string
	Err  error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("relay: event %s: %s: %v", e.EventID, e.Step, e.Err)
}

// Unwrap returns ErrPublish and the cause.
func (e *PublishError) Unwrap() []error { return []error{ErrPublish, e.Err} }

// Relay publishes outbox records: from the table's stream (Run), from the
// table's PENDING index (Sweep), or from stream events a Lambda function
// receives (Handler). It is safe for concurrent use.
type Relay struct {
	deps   Deps
	cfg    Config
	log    *slog.Logger
	m      *instruments
	tracer trace.Tracer // nil: no spans
}

// New applies cfg's defaults (Config.WithDefaults) and validates deps
// and cfg; every problem is reported, joined.
func New(deps Deps, cfg Config) (*Relay, error) {
	var errs []error
	if deps.DynamoDB == nil {
		errs = append(errs, errors.New("relay: Deps.DynamoDB is required"))
	}
	if deps.SQS == nil {
		errs = append(errs, errors.New("relay: Deps.SQS is required"))
	}
	cfg = cfg.WithDefaults()
	errs = append(errs, cfg.validate()...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Relay{deps: deps, cfg: cfg, log: deps.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.Discard
	}
	r.m = newInstruments(deps.Metrics)
	if deps.TracerProvider != nil {
		r.tracer = deps.TracerProvider.Tracer(spans.InstrumentationName, trace.WithSchemaURL(spans.SchemaURL))
	}
	return r, nil
}

type recKey struct{ pk, sk string }

// Publish sends recs to their queues and marks them PUBLISHED, and returns
// one error per record (nil: published now or before). Records no longer
// PENDING are skipped. On a FIFO queue (a URL ending in .fifo) each
// aggregate is a message group (MessageGroupId = GroupID(aggregate id)), its records
// go in sort-key order, one per SendMessageBatch call so that a failed
// entry can never be overtaken, and the group stops at its first failure
// (ErrBlocked for the rest). The event id is the deduplication id. On a
// standard queue a record's tenant is its MessageGroupId (TenantGroupID).
func (r *Relay) Publish(ctx context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	if len(recs) == 0 {
		return errs
	}
	pending, err := r.pending(ctx, recs)
	if err != nil {
		r.m.Failures.WithLabelValues("read").Inc()
		for i, rec := range recs {
			errs[i] = &PublishError{EventID: rec.EventID, Step: "read", Err: err}
		}
		return errs
	}
	// Groups: one per aggregate and queue on FIFO queues, one per record
	// otherwise.
	type group struct {
		queue string
		fifo  bool
		idx   []int // into recs, in send order
		next  int
		tries int
		done  bool
	}
	var groups []*group
	byName := map[string]*group{}
	seen := map[recKey]bool{}
	for i, rec := range recs {
		k := recKey{rec.PK, rec.SK}
		if !pending[k] || seen[k] {
			if !seen[k] {
				r.m.Skipped.Inc()
			}
			continue
		}
		seen[k] = true
		q := rec.Destination
		if q == "" {
			q = r.cfg.QueueURL
		}
		fifo := strings.HasSuffix(q, ".fifo")
		name := q + "\x00" + strconv.Itoa(i)
		if fifo {
			name = q + "\x00" + rec.PK
		}
		g := byName[name]
		if g == nil {
			g = &group{queue: q, fifo: fifo}
			byName[name] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	for _, g := range groups {
		slices.SortStableFunc(g.idx, func(a, b int) int { return strings.Compare(recs[a].SK, recs[b].SK) })
	}
	fail := func(g *group, step string, err error) {
		i := g.idx[g.next]
		errs[i] = &PublishError{EventID: recs[i].EventID, Step: step, Err: err}
		for _, j := range g.idx[g.next+1:] {
			if g.fifo {
				errs[j] = &PublishError{EventID: recs[j].EventID, Step: "send", Err: ErrBlocked}
			}
		}
		g.done = true
	}
	for round := 0; ; round++ {
		// The head of every live group, by queue.
		heads := map[string][]*group{}
		var queues []string
		for _, g := range groups {
			if g.done || g.next >= len(g.idx) {
				continue
			}
			if heads[g.queue] == nil {
				queues = append(queues, g.queue)
			}
			heads[g.queue] = append(heads[g.queue], g)
		}
		if len(queues) == 0 {
			return errs
		}
		failed := false
		for _, q := range queues {
			// sqsbatch's rule: at most 10 entries and batchPayloadMax bytes
			// (a larger record alone): SQS refuses a longer batch as a
			// whole, every time it is sent.
			size := func(g *group) int {
				rec := recs[g.idx[g.next]]
				n := sqsbatch.MessageSize(rec.Body, attributes(rec))
				if r.tracer != nil && rec.Traceparent == "" {
					n += injectedBytes // the send span's context, injected in send
				}
				return n
			}
			for _, batch := range sqsbatch.Split(heads[q], size, sqsbatch.Limits{Bytes: batchPayloadMax}) {
				sent, entryErrs := r.send(ctx, q, recs, func(yield func(int) bool) {
					for _, g := range batch {
						if !yield(g.idx[g.next]) {
							return
						}
					}
				})
				var ok []int
				for b, g := range batch {
					if entryErrs[b] == nil {
						ok = append(ok, g.idx[g.next])
						continue
					}
					failed = true
					r.m.Failures.WithLabelValues("send").Inc()
					g.tries++
					if g.tries >= r.cfg.SendAttempts || ctx.Err() != nil {
						fail(g, "send", entryErrs[b])
					}
				}
				if sent > 0 {
					failpoint(ctx, hooks.RelayAfterSend)
				}
				markErrs := r.markAll(ctx, recs, ok)
				if len(ok) > 0 {
					failpoint(ctx, hooks.RelayAfterMark)
				}
				for b, g := range batch {
					if entryErrs[b] != nil {
						continue
					}
					i := g.idx[g.next]
					if err := markErrs[i]; err != nil {
						// Sent but not marked: reported, so it is sent
						// again (a duplicate the consumer's gate absorbs);
						// its successors may go: they follow it.
						r.m.Failures.WithLabelValues("mark").Inc()
						errs[i] = &PublishError{EventID: recs[i].EventID, Step: "mark", Err: err}
					} else {
						r.m.Published.Inc()
					}
					g.next++
					g.tries = 0
				}
			}
		}
		if failed {
			d := min(time.Second, 50*time.Millisecond<<min(round, 5))
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
	}
}

// injectedBytes is what a traceparent attribute adds to a message
// (sqsbatch.AttributeSize: name, data type, 55 characters).
const injectedBytes = len(tracing.AttrTraceparent) + len("String") + 55

// batchPayloadMax bounds the payload of one SendMessageBatch call (bodies
// and attributes): SQS's limit (BatchRequestTooLong) was 256 KiB and is
// 1 MiB since 2025; the lower one holds everywhere. A larger record goes
// alone.
const batchPayloadMax = sqsbatch.PortableBatchBytes

// send sends one batch (at most 10 records) and returns how many were
// accepted and one error per entry, in order.
func (r *Relay) send(ctx context.Context, queue string, recs []outbox.Record, idx func(func(int) bool)) (int, []error) {
	var entries []sqstypes.SendMessageBatchRequestEntry
	fifo := strings.HasSuffix(queue, ".fifo")
	ctx, span := r.sendSpan(ctx, queue, recs, idx)
	defer endSpan(span)
	for i := range idx {
		rec := recs[i]
		attrs := attributes(rec)
		if rec.Traceparent == "" {
			// No producer's context stored: the send's own (if any) is the
			// message's creation context.
			attrs = tracing.Inject(ctx, attrs)
		}
		e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(entries))), MessageBody: aws.String(rec.Body),
			MessageAttributes: attrs}
		switch {
		case fifo:
			e.MessageGroupId = aws.String(GroupID(rec.AggregateID))
			e.MessageDeduplicationId = aws.String(DeduplicationID(rec.EventID))
		case rec.Tenant != "":
			// A standard queue's MessageGroupId is the message's tenant
			// (SQS fair queues).
			e.MessageGroupId = aws.String(TenantGroupID(rec.Tenant))
		}
		entries = append(entries, e)
	}
	errs := make([]error, len(entries))
	out, err := r.deps.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries})
	if err != nil {
		if span != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(sendErrorType(err)))
			span.SetStatus(codes.Error, sendErrorType(err))
		}
		for i := range errs {
			errs[i] = err
		}
		return 0, errs
	}
	answered := make([]bool, len(entries))
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		if i >= 0 && i < len(errs) {
			errs[i] = fmt.Errorf("SendMessageBatch entry failed: %s: %s (sender fault: %t)", aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault)
			answered[i] = true
		}
	}
	sent := 0
	for _, s := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(answered) {
			answered[i] = true
			sent++
		}
	}
	for i, a := range answered {
		if !a {
			errs[i] = errors.New("SendMessageBatch: entry neither successful nor failed")
		}
	}
	return sent, errs
}

// attributes are the message attributes of rec's message: its producer's
// trace context (traceparent, tracestate, when the record keeps one) and
// dlq.AttrFirstSentAt (Number, epoch milliseconds, the form the worker
// reads), the record's createdAt. Every copy — a re-send after a crash
// between send and mark, a sweep's, the Lambda handler's — carries the
// work's origin, and the worker's replay-window check judges the copy by
// it, not by the copy's own SentTimestamp: a copy first sent longer ago
// than the inbox keeps COMPLETED records is refused
// (REPLAY_WINDOW_EXPIRED), not applied a second time. createdAt is when
// the work was committed, never after its first send. An outbox record
// carries no attributes of its own, so this one is the message's only
// attribute, well within SQS's 10. A record without a readable createdAt
// (not written by package outbox) gets none. At most three attributes,
// well within SQS's 10.
func attributes(rec outbox.Record) map[string]sqstypes.MessageAttributeValue {
	attrs := map[string]sqstypes.MessageAttributeValue{}
	if !rec.CreatedAt.IsZero() {
		attrs[dlq.AttrFirstSentAt] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"),
			StringValue: aws.String(strconv.FormatInt(rec.CreatedAt.UnixMilli(), 10))}
	}
	if rec.Traceparent != "" {
		attrs[tracing.AttrTraceparent] = strAttr(rec.Traceparent)
		if rec.Tracestate != "" {
			attrs[tracing.AttrTracestate] = strAttr(rec.Tracestate)
		}
	}
	if len(attrs) == 0 {
		return nil
	}
	return attrs
}

func strAttr(s string) sqstypes.MessageAttributeValue {
	return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// sendSpan starts the span of one SendMessageBatch — send <queue>, linked
// to each record's stored creation context — when tracing is on. Its kind
// is producer when it is the creation context of a record that kept none,
// client otherwise (the conventions' rule).
func (r *Relay) sendSpan(ctx context.Context, queue string, recs []outbox.Record, idx func(func(int) bool)) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	var links []trace.Link
	n, kind := 0, trace.SpanKindClient
	for i := range idx {
		n++
		rec := recs[i]
		sc := tracing.Extract(attributes(rec), nil)
		if !sc.IsValid() {
			kind = trace.SpanKindProducer
			continue
		}
		links = append(links, trace.Link{SpanContext: sc})
	}
	name := tracing.QueueName(queue)
	attrs := []attribute.KeyValue{semconv.MessagingSystemAWSSQS, semconv.MessagingDestinationName(name),
		semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"), semconv.AWSSQSQueueURL(queue)}
	if n > 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(n))
	}
	return r.tracer.Start(ctx, spans.SpanSend(name), trace.WithSpanKind(kind), trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// sendErrorType is a failed call's error.type: the AWS error code, or
// _OTHER.
func sendErrorType(err error) string {
	if code := failure.APICode(err); code != "" {
		return code
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

func endSpan(s trace.Span) {
	if s != nil {
		s.End()
	}
}

// DeduplicationID is the FIFO deduplication id of an event: the event id
// itself when SQS accepts it (at most 128 characters of alphanumerics and
// punctuation), else its SHA-256 in hex.
func DeduplicationID(eventID string) string { return sqsToken(eventID) }

// GroupID is the FIFO message group id of an aggregate: the aggregate id
// itself when SQS accepts it (same rule), else its SHA-256 in hex — still
// one group per aggregate, and never a record SQS refuses for its group id
// (which would stop its shard).
func GroupID(aggregateID string) string { return sqsToken(aggregateID) }

// TenantGroupID is the MessageGroupId of a record's tenant on a standard
// queue: the tenant itself when SQS accepts it (package outbox refuses
// others), else — a record written by other code — its SHA-256 in hex:
// still one tenant per value, and never a record SQS refuses.
func TenantGroupID(tenant string) string { return sqsToken(tenant) }

func sqsToken(s string) string {
	ok := len(s) > 0 && len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] <= '~'
	}
	if ok {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// pending reads (strongly consistent) which of recs are still PENDING.
func (r *Relay) pending(ctx context.Context, recs []outbox.Record) (map[recKey]bool, error) {
	l := r.cfg.Layout
	proj, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(l.PartitionKey),
		expression.Name(l.SortKey), expression.Name(attr.Status))).Build()
	if err != nil {
		return nil, err
	}
	var keys []map[string]types.AttributeValue
	seen := map[recKey]bool{}
	for _, rec := range recs {
		k := recKey{rec.PK, rec.SK}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, map[string]types.AttributeValue{l.PartitionKey: &types.AttributeValueMemberS{Value: rec.PK},
				l.SortKey: &types.AttributeValueMemberS{Value: rec.SK}})
		}
	}
	out := map[recKey]bool{}
	for len(keys) > 0 {
		chunk := keys[:min(100, len(keys))]
		keys = keys[len(chunk):]
		req := map[string]types.KeysAndAttributes{r.cfg.Table: {Keys: chunk, ConsistentRead: aws.Bool(true),
			ProjectionExpression: proj.Projection(), ExpressionAttributeNames: proj.Names()}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				if attempt > 8 {
					return nil, errors.New("BatchGetItem: keys still unprocessed after 8 retries")
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(min(time.Second, 25*time.Millisecond<<attempt)):
				}
			}
			res, err := r.deps.DynamoDB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("BatchGetItem: %w", err)
			}
			for _, item := range res.Responses[r.cfg.Table] {
				pk, _ := item[l.PartitionKey].(*types.AttributeValueMemberS)
				sk, _ := item[l.SortKey].(*types.AttributeValueMemberS)
				st, _ := item[attr.Status].(*types.AttributeValueMemberS)
				if pk != nil && sk != nil && st != nil && st.Value == outbox.StatusPending {
					out[recKey{pk.Value, sk.Value}] = true
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// markAll marks recs[idx] PUBLISHED, concurrently; the result is indexed
// like recs.
func (r *Relay) markAll(ctx context.Context, recs []outbox.Record, idx []int) map[int]error {
	out := map[int]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.mark(ctx, recs[i])
			mu.Lock()
			out[i] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// mark sets a PENDING record PUBLISHED with its TTL and takes it out of
// the PENDING index. A record that is not PENDING any more was marked by
// another relay: not an error.
func (r *Relay) mark(ctx context.Context, rec outbox.Record) error {
	l := r.cfg.Layout
	now := r.cfg.Now().UTC()
	upd := expression.Set(expression.Name(attr.Status), expression.Value(outbox.StatusPublished)).
		Set(expression.Name(attr.OutboxPublishedAt), expression.Value(now.Format(outbox.TimeLayout))).
		Set(expression.Name(l.TTL), expression.Value(now.Add(r.cfg.PublishedTTL).Unix())).
		Add(expression.Name(attr.OutboxSendCount), expression.Value(1)).
		Remove(expression.Name(l.AttentionPK)).Remove(expression.Name(l.AttentionSK))
	cond := expression.Name(attr.Status).Equal(expression.Value(outbox.StatusPending))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = r.deps.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.cfg.Table),
		Key: map[string]types.AttributeValue{l.PartitionKey: &types.AttributeValueMemberS{Value: rec.PK},
			l.SortKey: &types.AttributeValueMemberS{Value: rec.SK}},
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("UpdateItem: %w", err)
	}
	return nil
}

// failpoint calls the development hook at name (never set in production).
func failpoint(ctx context.Context, name string) {
	if fp := hooks.From(ctx).Failpoint; fp != nil {
		fp(name)
	}
}
