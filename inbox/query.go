package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"
)

// Operator reads: one work item's records, one aggregate's history through
// the aggregate index, and failed or in-flight records through the sharded
// attention index. Both indexes are KEYS_ONLY: a listing queries the index
// for keys, then reads the records with BatchGetItem, in index order.

// Errors of the operator reads.
var (
	// ErrNotFound reports a key (or key and message type) with no record.
	ErrNotFound = errors.New("inbox: record not found")
	// ErrBadCursor reports a cursor that is malformed or belongs to another
	// listing (other aggregate, status, filter, order or shard count).
	ErrBadCursor = errors.New("inbox: bad cursor")
	// ErrBadStatus reports a status the attention index does not hold.
	ErrBadStatus = errors.New("inbox: status not in the attention index")
	// ErrBadQuery reports a request that cannot be run: empty key or
	// aggregate, a page limit out of range, Since after Until.
	ErrBadQuery = errors.New("inbox: bad query")
	// ErrUnprocessed reports keys that BatchGetItem still returned as
	// unprocessed after ReaderConfig.BatchGetAttempts calls.
	ErrUnprocessed = errors.New("inbox: keys left unprocessed")
)

// Page limits.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// maxBackoff caps the wait between BatchGetItem retries.
const maxBackoff = 2 * time.Second

// ReadAPI is what Reader needs of DynamoDB (*dynamodb.Client has it).
type ReadAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ReaderConfig configures NewReader.
type ReaderConfig struct {
	// Store is the inbox, as the workers write it. Required (Table).
	Store Store
	// BatchGetAttempts bounds the BatchGetItem calls for one batch of keys
	// while DynamoDB returns UnprocessedKeys. Default: 8.
	BatchGetAttempts int
	// RetryBackoff is the wait before the first retry of unprocessed keys;
	// it doubles per retry up to 2s, with jitter. Default: 50ms.
	RetryBackoff time.Duration
}

// Reader runs the operator reads. It is safe for concurrent use.
type Reader struct {
	api ReadAPI
	cfg ReaderConfig
}

// NewReader validates cfg, fills in defaults and returns a Reader.
func NewReader(api ReadAPI, cfg ReaderConfig) (*Reader, error) {
	var errs []error
	if api == nil {
		errs = append(errs, errors.New("inbox: ReadAPI is required"))
	}
	var err error
	if cfg.Store, err = cfg.Store.WithDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("inbox: ReaderConfig: %w", err))
	}
	if cfg.BatchGetAttempts == 0 {
		cfg.BatchGetAttempts = 8
	}
	if cfg.BatchGetAttempts < 1 {
		errs = append(errs, fmt.Errorf("inbox: ReaderConfig.BatchGetAttempts %d must be positive", cfg.BatchGetAttempts))
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	if cfg.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("inbox: ReaderConfig.RetryBackoff %s must not be negative", cfg.RetryBackoff))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Reader{api: api, cfg: cfg}, nil
}

// Get returns the record of (key, messageType), or with messageType empty
// every record under key (one per message type, in type order). Reads are
// strongly consistent. No record: an error that wraps ErrNotFound.
func (r *Reader) Get(ctx context.Context, key, messageType string) ([]*Record, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrBadQuery)
	}
	if messageType != "" {
		out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(r.cfg.Store.Table), Key: r.cfg.Store.Key(key, messageType), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("inbox: get %q/%q: %w", key, messageType, err)
		}
		if len(out.Item) == 0 {
			return nil, fmt.Errorf("%w: key %q, type %q", ErrNotFound, key, messageType)
		}
		rec, err := r.cfg.Store.Decode(out.Item)
		if err != nil {
			return nil, err
		}
		return []*Record{rec}, nil
	}
	kc := expression.Key(r.cfg.Store.Layout.PartitionKey).Equal(expression.Value(PK(key))).
		And(expression.Key(r.cfg.Store.Layout.SortKey).BeginsWith(prefixWorker))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, fmt.Errorf("inbox: build query: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(r.cfg.Store.Table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	var recs []*Record
	for {
		out, err := r.api.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("inbox: query %q: %w", key, err)
		}
		for _, item := range out.Items {
			rec, err := r.cfg.Store.Decode(item)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	return recs, nil
}

// GetRejection returns the rejection record of the SQS message
// sqsMessageID (a message refused before it was filed under a key). No
// record: an error that wraps ErrNotFound.
func (r *Reader) GetRejection(ctx context.Context, sqsMessageID string) (*Record, error) {
	if sqsMessageID == "" {
		return nil, fmt.Errorf("%w: empty SQS message id", ErrBadQuery)
	}
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.cfg.Store.Table), Key: r.cfg.Store.RejectionKey(sqsMessageID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("inbox: get rejection %q: %w", sqsMessageID, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("%w: rejection of SQS message %q", ErrNotFound, sqsMessageID)
	}
	return r.cfg.Store.Decode(out.Item)
}

// Page selects one page of a listing.
type Page struct {
	// Limit is the most records returned. Default: 50; at most 1000.
	Limit int
	// Cursor resumes a listing after the previous page (its Listing.Next).
	// Default: "" (from the start).
	Cursor string
	// Descending lists newest first (for PROCESSING: latest lease expiry
	// first). A cursor only resumes a listing in the same order. Default:
	// false (oldest first).
	Descending bool
}

// Listing is one page of records, in index order.
type Listing struct {
	Records []*Record
	// Next is the cursor of the following page, "" when the listing is
	// complete. It is opaque; a following page may be empty when the
	// records after this one no longer qualify (filtered out or changed).
	Next string
}

// AttentionFilter narrows an attention listing.
type AttentionFilter struct {
	// Since keeps index entries at or after Since: failedAt, or the lease
	// expiry for PROCESSING. Default: zero (no lower bound).
	Since time.Time
	// Until keeps index entries before Until. Default: zero (no upper
	// bound).
	Until time.Time
	// Code keeps records whose failureCode equals Code. It is applied to
	// the records read (the index has no failureCode), and the listing keeps
	// reading until the page is full or the index is exhausted. Default: ""
	// (every code).
	Code string
}

// ListAggregate lists the records of one aggregate through the aggregate
// index, in first-seen order (oldest first unless p.Descending).
func (r *Reader) ListAggregate(ctx context.Context, aggregateType, aggregateID string, p Page) (Listing, error) {
	if aggregateType == "" || aggregateID == "" {
		return Listing{}, fmt.Errorf("%w: aggregate type and id are both required", ErrBadQuery)
	}
	pk := AggregatePK(aggregateType, aggregateID)
	q := &listQuery{
		role:  RoleAggregate,
		index: r.cfg.Store.Layout.AggregateIndex, pkAttr: r.cfg.Store.Layout.AggregatePK, skAttr: r.cfg.Store.Layout.AggregateSK,
		tablePK: r.cfg.Store.Layout.PartitionKey, tableSK: r.cfg.Store.Layout.SortKey,
		partitions: []string{pk}, desc: p.Descending,
		id: []string{"aggregate", pk, strconv.FormatBool(p.Descending)},
		keep: func(rec *Record, e *indexEntry) bool {
			return rec.GSI1PK == e.pk && rec.GSI1SK == e.sk
		},
	}
	return r.list(ctx, q, p)
}

// ListAttention lists the records of status (FAILED_TERMINAL,
// FAILED_RETRYABLE or PROCESSING) through the attention index: every shard
// is queried and the shards are merged in index sort key order (failedAt;
// the lease expiry for PROCESSING, indexed only when the workers run with
// IndexProcessing). Rejection records are FAILED_TERMINAL. An index entry
// that is no longer the record's current one (the record moved on since)
// is skipped.
func (r *Reader) ListAttention(ctx context.Context, status Status, f AttentionFilter, p Page) (Listing, error) {
	switch status {
	case StatusFailedTerminal, StatusFailedRetryable, StatusProcessing:
	default:
		return Listing{}, fmt.Errorf("%w: %q (want %s, %s or %s)", ErrBadStatus, status,
			StatusFailedTerminal, StatusFailedRetryable, StatusProcessing)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until) {
		return Listing{}, fmt.Errorf("%w: Since %s is after Until %s", ErrBadQuery, f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano))
	}
	// Since inclusive, Until exclusive, at the index's millisecond precision.
	var lo, hi string
	if !f.Since.IsZero() {
		s := f.Since.Truncate(time.Millisecond)
		if s.Before(f.Since) {
			s = s.Add(time.Millisecond)
		}
		lo = FormatTime(s)
	}
	if !f.Until.IsZero() {
		u := f.Until.Truncate(time.Millisecond)
		if u.Equal(f.Until) {
			u = u.Add(-time.Millisecond)
		}
		hi = FormatTime(u)
	}
	q := &listQuery{
		role:  RoleAttention,
		index: r.cfg.Store.Layout.AttentionIndex, pkAttr: r.cfg.Store.Layout.AttentionPK, skAttr: r.cfg.Store.Layout.AttentionSK,
		tablePK: r.cfg.Store.Layout.PartitionKey, tableSK: r.cfg.Store.Layout.SortKey,
		desc: p.Descending, empty: lo != "" && hi != "" && lo > hi,
		id: []string{"attention", string(status), strconv.Itoa(r.cfg.Store.AttentionShards), lo, hi, f.Code, strconv.FormatBool(p.Descending)},
		keep: func(rec *Record, e *indexEntry) bool {
			return rec.GSI2PK == e.pk && rec.GSI2SK == e.sk && (f.Code == "" || rec.FailureCode == f.Code)
		},
	}
	switch {
	case lo != "" && hi != "":
		q.skCond = func(k expression.KeyBuilder) expression.KeyConditionBuilder {
			return k.Between(expression.Value(lo), expression.Value(hi))
		}
	case lo != "":
		q.skCond = func(k expression.KeyBuilder) expression.KeyConditionBuilder {
			return k.GreaterThanEqual(expression.Value(lo))
		}
	case hi != "":
		q.skCond = func(k expression.KeyBuilder) expression.KeyConditionBuilder {
			return k.LessThanEqual(expression.Value(hi))
		}
	}
	for i := range r.cfg.Store.AttentionShards {
		q.partitions = append(q.partitions, AttentionPK(status, i))
	}
	return r.list(ctx, q, p)
}

// listQuery is one index listing: one stream per index partition, merged.
type listQuery struct {
	role                  string // RoleAggregate or RoleAttention
	index, pkAttr, skAttr string
	tablePK, tableSK      string // the table's key attributes
	partitions            []string
	skCond                func(expression.KeyBuilder) expression.KeyConditionBuilder // range on the index sort key, or nil
	desc                  bool
	empty                 bool     // the range is empty: no query needed
	id                    []string // what a cursor must belong to
	keep                  func(*Record, *indexEntry) bool
}

// indexEntry is one index item.
type indexEntry struct {
	key    map[string]types.AttributeValue // table and index keys: resumes right after it
	pk, sk string                          // index keys
	tk     string                          // table key, as itemKey
}

// stream reads one index partition in order, a query page at a time.
type indexStream struct {
	in             dynamodb.QueryInput
	role           string
	pkAttr, skAttr string
	buf            []indexEntry
	more           bool                            // the index may hold entries beyond buf
	resume         map[string]types.AttributeValue // exclusive start after the last consumed entry
}

func (r *Reader) list(ctx context.Context, q *listQuery, p Page) (Listing, error) {
	limit := p.Limit
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 0 || limit > MaxPageLimit {
		return Listing{}, fmt.Errorf("%w: page limit %d must be within 1..%d", ErrBadQuery, p.Limit, MaxPageLimit)
	}
	streams, err := r.streams(q, p.Cursor, limit)
	if err != nil || q.empty {
		return Listing{}, err
	}
	var recs []*Record
	for len(recs) < limit {
		need := limit - len(recs)
		batch := make([]indexEntry, 0, need)
		for len(batch) < need {
			e, err := r.pop(ctx, q, streams)
			if err != nil {
				return Listing{}, err
			}
			if e == nil {
				break
			}
			batch = append(batch, *e)
		}
		if len(batch) == 0 {
			break
		}
		got, err := r.fetch(ctx, q, batch)
		if err != nil {
			return Listing{}, err
		}
		recs = append(recs, got...)
		if len(batch) < need { // every stream is exhausted
			break
		}
	}
	if err := r.peekAll(ctx, streams); err != nil {
		return Listing{}, err
	}
	l := Listing{Records: recs}
	if slices.ContainsFunc(streams, func(s *indexStream) bool { return len(s.buf) > 0 }) {
		if l.Next, err = encodeCursor(q, streams); err != nil {
			return Listing{}, err
		}
	}
	return l, nil
}

// streams builds one stream per partition, positioned by cursor.
func (r *Reader) streams(q *listQuery, cur string, limit int) ([]*indexStream, error) {
	var c *listCursor
	if cur != "" {
		var err error
		if c, err = decodeCursor(q, cur); err != nil {
			return nil, err
		}
	}
	streams := make([]*indexStream, len(q.partitions))
	for i, pk := range q.partitions {
		kc := expression.Key(q.pkAttr).Equal(expression.Value(pk))
		if q.skCond != nil {
			kc = kc.And(q.skCond(expression.Key(q.skAttr)))
		}
		ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, fmt.Errorf("inbox: build query: %w", err)
		}
		s := &indexStream{more: true, role: q.role, pkAttr: q.pkAttr, skAttr: q.skAttr, in: dynamodb.QueryInput{
			TableName: aws.String(r.cfg.Store.Table), IndexName: aws.String(q.index),
			KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			ScanIndexForward: aws.Bool(!q.desc),
			// One more than a page: a partition that fits in a page is
			// known to be exhausted without a second query.
			Limit: aws.Int32(int32(min(limit+1, MaxPageLimit))),
		}}
		if c != nil {
			if slices.Contains(c.Done, i) {
				s.more = false
			} else if k, ok := c.Start[strconv.Itoa(i)]; ok {
				s.resume = k.attributes()
				s.in.ExclusiveStartKey = s.resume
			}
		}
		streams[i] = s
	}
	return streams, nil
}

// peek fills s.buf unless s is exhausted.
func (r *Reader) peek(ctx context.Context, s *indexStream) error {
	for len(s.buf) == 0 && s.more {
		out, err := r.api.Query(ctx, &s.in)
		if err != nil {
			// A missing index, or one keyed on other attributes, is the
			// layout's problem, said as such (never a raw SDK error).
			index := aws.ToString(s.in.IndexName)
			return fmt.Errorf("inbox: query index %s: %w", index, r.cfg.Store.indexQueryError(err, s.role, index, []string{s.pkAttr, s.skAttr}))
		}
		for _, item := range out.Items {
			s.buf = append(s.buf, indexEntry{key: item, pk: attrString(item, s.pkAttr), sk: attrString(item, s.skAttr),
				tk: itemKey(attrString(item, r.cfg.Store.Layout.PartitionKey), attrString(item, r.cfg.Store.Layout.SortKey))})
		}
		s.in.ExclusiveStartKey = out.LastEvaluatedKey
		s.more = len(out.LastEvaluatedKey) > 0
	}
	return nil
}

// peekAll fills every stream's buffer, the partitions' first queries in
// parallel.
func (r *Reader) peekAll(ctx context.Context, streams []*indexStream) error {
	if !slices.ContainsFunc(streams, func(s *indexStream) bool { return len(s.buf) == 0 && s.more }) {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, s := range streams {
		if len(s.buf) == 0 && s.more {
			g.Go(func() error { return r.peek(gctx, s) })
		}
	}
	return g.Wait()
}

// pop consumes the next entry of the merged streams (nil when all are
// exhausted): the least sort key (greatest when descending); ties go to
// the lower partition (the higher when descending).
func (r *Reader) pop(ctx context.Context, q *listQuery, streams []*indexStream) (*indexEntry, error) {
	if err := r.peekAll(ctx, streams); err != nil {
		return nil, err
	}
	best := -1
	for i, s := range streams {
		if len(s.buf) == 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		a, b := s.buf[0].sk, streams[best].buf[0].sk
		if (!q.desc && a < b) || (q.desc && a >= b) {
			best = i
		}
	}
	if best < 0 {
		return nil, nil
	}
	s := streams[best]
	e := s.buf[0]
	s.buf = s.buf[1:]
	s.resume = e.key
	return &e, nil
}

// fetch reads the records of batch and returns those q keeps, in batch
// order. A record gone since it was indexed (deleted by TTL) is skipped.
func (r *Reader) fetch(ctx context.Context, q *listQuery, batch []indexEntry) ([]*Record, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(batch))
	seen := make(map[string]bool, len(batch))
	for _, e := range batch {
		if seen[e.tk] {
			continue
		}
		seen[e.tk] = true
		keys = append(keys, map[string]types.AttributeValue{
			r.cfg.Store.Layout.PartitionKey: e.key[r.cfg.Store.Layout.PartitionKey], r.cfg.Store.Layout.SortKey: e.key[r.cfg.Store.Layout.SortKey],
		})
	}
	items, err := r.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	var recs []*Record
	for i := range batch {
		item, ok := items[batch[i].tk]
		if !ok {
			continue
		}
		rec, err := r.cfg.Store.Decode(item)
		if err != nil {
			return nil, err
		}
		if q.keep(rec, &batch[i]) {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// batchGet reads keys (strongly consistent) in BatchGetItem calls of at
// most 100 keys, re-requesting UnprocessedKeys with backoff. It returns the
// items by itemKey.
func (r *Reader) batchGet(ctx context.Context, keys []map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	found := make(map[string]map[string]types.AttributeValue, len(keys))
	for chunk := range slices.Chunk(keys, 100) {
		pending := chunk
		for attempt := 1; len(pending) > 0; attempt++ {
			if attempt > r.cfg.BatchGetAttempts {
				return nil, fmt.Errorf("%w: %d keys after %d BatchGetItem calls", ErrUnprocessed, len(pending), r.cfg.BatchGetAttempts)
			}
			if attempt > 1 {
				if err := r.backoff(ctx, attempt-1); err != nil {
					return nil, fmt.Errorf("inbox: read records: %w", err)
				}
			}
			out, err := r.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				r.cfg.Store.Table: {Keys: pending, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return nil, fmt.Errorf("inbox: read records: %w", err)
			}
			for _, item := range out.Responses[r.cfg.Store.Table] {
				found[itemKey(attrString(item, r.cfg.Store.Layout.PartitionKey), attrString(item, r.cfg.Store.Layout.SortKey))] = item
			}
			pending = out.UnprocessedKeys[r.cfg.Store.Table].Keys
		}
	}
	return found, nil
}

// backoff waits before retry n (1-based): RetryBackoff doubled n-1 times,
// capped, half of it jittered.
func (r *Reader) backoff(ctx context.Context, n int) error {
	d := r.cfg.RetryBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	if d > 1 {
		d = d/2 + rand.N(d/2)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func attrString(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func itemKey(pk, sk string) string { return pk + "\x00" + sk }

// cursor is the resume state of a listing, as JSON in base64url.
type listCursor struct {
	// Version of the format.
	Version int `json:"v"`
	// Query identifies the listing the cursor belongs to.
	Query string `json:"q"`
	// Start holds, per partition index, the keys of its last consumed
	// entry (but the index partition key, which is the partition's); a
	// partition in neither Start nor Done has not been read yet.
	Start map[string]cursorKey `json:"s,omitempty"`
	// Done lists the exhausted partitions.
	Done []int `json:"d,omitempty"`
}

// cursorKey is an index item's keys (all strings).
type cursorKey map[string]string

func (k cursorKey) attributes() map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(k))
	for n, v := range k {
		m[n] = &types.AttributeValueMemberS{Value: v}
	}
	return m
}

const cursorVersion = 1

func (q *listQuery) fingerprint() string {
	b, _ := json.Marshal(q.id) // a []string always marshals
	h := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

func encodeCursor(q *listQuery, streams []*indexStream) (string, error) {
	c := listCursor{Version: cursorVersion, Query: q.fingerprint(), Start: map[string]cursorKey{}}
	for i, s := range streams {
		switch {
		case len(s.buf) == 0 && !s.more:
			c.Done = append(c.Done, i)
		case s.resume != nil:
			k := cursorKey{}
			for _, n := range []string{q.tablePK, q.tableSK, q.skAttr} { // the index PK is the partition's
				k[n] = attrString(s.resume, n)
			}
			c.Start[strconv.Itoa(i)] = k
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("inbox: encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(q *listQuery, s string) (*listCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCursor, err)
	}
	var c listCursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCursor, err)
	}
	if c.Version != cursorVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadCursor, c.Version)
	}
	if c.Query != q.fingerprint() {
		return nil, fmt.Errorf("%w: it belongs to another listing (other aggregate, status, filter, order or shard count)", ErrBadCursor)
	}
	n := len(q.partitions)
	for _, i := range c.Done {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("%w: partition %d out of range", ErrBadCursor, i)
		}
	}
	for is, k := range c.Start {
		i, err := strconv.Atoi(is)
		if err != nil || i < 0 || i >= n || strconv.Itoa(i) != is {
			return nil, fmt.Errorf("%w: partition %q out of range", ErrBadCursor, is)
		}
		if slices.Contains(c.Done, i) {
			return nil, fmt.Errorf("%w: partition %d both started and done", ErrBadCursor, i)
		}
		if len(k) != 3 || k[q.tablePK] == "" || k[q.tableSK] == "" || k[q.skAttr] == "" {
			return nil, fmt.Errorf("%w: bad start key of partition %d", ErrBadCursor, i)
		}
		k[q.pkAttr] = q.partitions[i]
	}
	return &c, nil
}
