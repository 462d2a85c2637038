package inbox_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// seedTime is the first-seen time of the seeded records (fixed within a
// run: listings sort by time, and the tests compare whole orders). It is a
// day ago, not a fixed date: the records carry TTLs from it, and DynamoDB
// Local deletes expired items in the background, as AWS does (a date in
// 2025 made TestReaderRejections lose records mid-test, 4 runs in 8 under
// load).
var seedTime = time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)

type readSeeder struct {
	t      *testing.T
	env    *testenv.Env
	shards int
}

func newReadSeeder(t *testing.T, shards int) *readSeeder {
	t.Helper()
	return &readSeeder{t: t, env: testenv.New(t, testenv.Options{NoQueue: true}), shards: shards}
}

func (s *readSeeder) reader(mods ...func(*inbox.ReaderConfig)) *inbox.Reader {
	s.t.Helper()
	return s.readerWith(s.env.DynamoDB, mods...)
}

func (s *readSeeder) readerWith(api inbox.ReadAPI, mods ...func(*inbox.ReaderConfig)) *inbox.Reader {
	s.t.Helper()
	cfg := inbox.ReaderConfig{Store: inbox.Store{Table: s.env.Table, AttentionShards: s.shards}}
	for _, m := range mods {
		m(&cfg)
	}
	r, err := inbox.NewReader(api, cfg)
	require.NoError(s.t, err)
	return r
}

func (s *readSeeder) put(rec *inbox.Record) {
	s.t.Helper()
	item, err := (inbox.Store{}).Encode(rec), error(nil)
	require.NoError(s.t, err)
	_, err = s.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.env.Table), Item: item})
	require.NoError(s.t, err)
}

// record is a record as the gate writes it for key first seen at seen.
func seedRecord(key, msgType, aggType, aggID string, seen time.Time) *inbox.Record {
	rec := inbox.NewRecord(&inbox.Work{Key: key, MessageType: msgType, RequestHash: "hash-" + key,
		SchemaVersion: 1, AggregateType: aggType, AggregateID: aggID, CorrelationID: "corr-" + key, Producer: "test"}, seen)
	rec.Status = inbox.StatusProcessing
	rec.LeaseOwner, rec.LeaseToken = "worker-1", "token-"+key
	return rec
}

// completed puts a COMPLETED record (no attention entry).
func (s *readSeeder) completed(key, msgType, aggType, aggID string, seen time.Time) *inbox.Record {
	rec := seedRecord(key, msgType, aggType, aggID, seen)
	rec.Status, rec.Outcome, rec.CompletedAt = inbox.StatusCompleted, inbox.OutcomeApplied, inbox.FormatTime(seen.Add(time.Second))
	s.put(rec)
	return rec
}

// failed puts a failed record as mutation.Fail leaves it.
func (s *readSeeder) failed(status inbox.Status, key, code string, at time.Time) *inbox.Record {
	rec := seedRecord(key, "CaseOpened", "CASE", "agg-"+key, at.Add(-time.Minute))
	ts := inbox.FormatTime(at)
	rec.Status, rec.FailureCode, rec.FailureMessage, rec.FailedAt, rec.LastSeenAt = status, code, "failed with "+code, ts, ts
	rec.GSI2PK, rec.GSI2SK = inbox.AttentionPK(status, inbox.Shard(key, s.shards)), ts
	s.put(rec)
	return rec
}

// processing puts a PROCESSING record indexed by lease expiry (the
// workers' IndexProcessing).
func (s *readSeeder) processing(key string, expires time.Time) *inbox.Record {
	rec := seedRecord(key, "CaseOpened", "CASE", "agg-"+key, expires.Add(-30*time.Second))
	rec.LeaseExpiresAt = expires.UnixMilli()
	rec.GSI2PK, rec.GSI2SK = inbox.AttentionPK(inbox.StatusProcessing, inbox.Shard(key, s.shards)), inbox.FormatTime(expires)
	s.put(rec)
	return rec
}

// rejection puts a rejection record as gate.Reject writes it.
func (s *readSeeder) rejection(msgID, code string, at time.Time) {
	s.t.Helper()
	ts := inbox.FormatTime(at)
	rec := &inbox.Record{SQSMessageID: msgID, Status: inbox.StatusFailedTerminal, FailureCode: code, FailureMessage: "rejected",
		FirstSeenAt: ts, FailedAt: ts,
		GSI2PK: inbox.AttentionPK(inbox.StatusFailedTerminal, inbox.Shard(msgID, s.shards)), GSI2SK: ts}
	item, err := (inbox.Store{}).Encode(rec), error(nil)
	require.NoError(s.t, err)
	for k, v := range (inbox.Store{}).RejectionKey(msgID) {
		item[k] = v
	}
	_, err = s.env.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.env.Table), Item: item})
	require.NoError(s.t, err)
}

// id names a record in assertions: its key, or its SQS message id for a
// rejection.
func recID(r *inbox.Record) string {
	if r.Rejection {
		return "reject:" + r.SQSMessageID
	}
	return r.Key
}

func recIDs(recs []*inbox.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, recID(r))
	}
	return out
}

// collect follows Next to the end and returns every record and the size of
// every page; it fails the test on an endless listing.
func collectPages(t *testing.T, list func(inbox.Page) (inbox.Listing, error), p inbox.Page) (recs []*inbox.Record, pages []int) {
	t.Helper()
	for range 1000 {
		l, err := list(p)
		require.NoError(t, err)
		recs = append(recs, l.Records...)
		pages = append(pages, len(l.Records))
		if l.Next == "" {
			return recs, pages
		}
		p.Cursor = l.Next
	}
	t.Fatal("listing did not end")
	return nil, nil
}

func TestNewReaderConfig(t *testing.T) {
	api := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	tests := []struct {
		name string
		api  inbox.ReadAPI
		cfg  inbox.ReaderConfig
		want []string // every problem reported; nil: valid
	}{
		{name: "defaults", api: api, cfg: inbox.ReaderConfig{Store: inbox.Store{Table: "t1"}}},
		{name: "100 shards", api: api, cfg: inbox.ReaderConfig{Store: inbox.Store{Table: "t1", AttentionShards: 100}}},
		{name: "no table", api: api, cfg: inbox.ReaderConfig{}, want: []string{"inbox: Store.Table is required"}},
		{name: "too many shards", api: api, cfg: inbox.ReaderConfig{Store: inbox.Store{Table: "t1", AttentionShards: 101}}, want: []string{"AttentionShards 101 must be within 1..100"}},
		{name: "everything wrong", cfg: inbox.ReaderConfig{Store: inbox.Store{AttentionShards: -1}, BatchGetAttempts: -2, RetryBackoff: -time.Second}, want: []string{
			"inbox: ReadAPI is required", "Table is required", "AttentionShards -1", "BatchGetAttempts -2", "RetryBackoff -1s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := inbox.NewReader(tt.api, tt.cfg)
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, r)
				return
			}
			require.Error(t, err)
			require.Nil(t, r)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestReaderGet(t *testing.T) {
	s := newReadSeeder(t, 16)
	a := s.completed("k-1", "CaseOpened", "CASE", "c-1", seedTime)
	s.failed(inbox.StatusFailedTerminal, "k-1", "BAD", seedTime.Add(time.Minute)) // same key, its own type below
	s.completed("k-2", "CaseOpened", "CASE", "c-1", seedTime)
	b := seedRecord("k-1", "StageChanged", "CASE", "c-1", seedTime.Add(time.Second))
	b.Status = inbox.StatusFailedRetryable
	s.put(b)
	s.rejection("msg-1", "ENVELOPE_INVALID", seedTime)
	r := s.reader()
	ctx := context.Background()

	tests := []struct {
		name, key, msgType string
		wantTypes          []string
		wantErr            error
	}{
		{name: "one type", key: "k-1", msgType: "StageChanged", wantTypes: []string{"StageChanged"}},
		{name: "every type", key: "k-1", wantTypes: []string{"CaseOpened", "StageChanged"}},
		{name: "other key", key: "k-2", wantTypes: []string{"CaseOpened"}},
		{name: "missing key", key: "k-404", wantErr: inbox.ErrNotFound},
		{name: "missing type", key: "k-1", msgType: "CaseClosed", wantErr: inbox.ErrNotFound},
		{name: "empty key", key: "", wantErr: inbox.ErrBadQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := r.Get(ctx, tt.key, tt.msgType)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				if tt.key != "" {
					require.ErrorContains(t, err, tt.key)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, rec := range recs {
				require.Equal(t, tt.key, rec.Key)
				got = append(got, rec.MessageType)
			}
			require.Equal(t, tt.wantTypes, got)
		})
	}

	recs, err := r.Get(ctx, "k-1", "CaseOpened")
	require.NoError(t, err)
	got := recs[0]
	require.Equal(t, inbox.StatusFailedTerminal, got.Status, "the later put of k-1/CaseOpened wins")
	require.Equal(t, "BAD", got.FailureCode)
	require.Equal(t, a.RequestHash, got.RequestHash)
	require.Equal(t, "CASE", got.AggregateType)

	rej, err := r.GetRejection(ctx, "msg-1")
	require.NoError(t, err)
	require.True(t, rej.Rejection)
	require.Equal(t, "ENVELOPE_INVALID", rej.FailureCode)
	_, err = r.GetRejection(ctx, "msg-404")
	require.ErrorIs(t, err, inbox.ErrNotFound)
}

func TestReaderListAggregate(t *testing.T) {
	s := newReadSeeder(t, 16)
	var want []string
	msgTypes := []string{"CaseOpened", "StageChanged", "DeadlineSet"}
	for i := range 23 {
		seen := seedTime.Add(time.Duration(i) * time.Second)
		key := fmt.Sprintf("c1-%02d", i)
		rec := s.completed(key, msgTypes[i%3], "CASE", "c-1", seen)
		if i%5 == 0 { // other statuses are listed too
			rec.Status, rec.FailureCode, rec.FailedAt = inbox.StatusFailedRetryable, "THROTTLED", inbox.FormatTime(seen)
			s.put(rec)
		}
		want = append(want, key)
		if i%4 == 0 {
			s.completed(fmt.Sprintf("c2-%02d", i), "CaseOpened", "CASE", "c-2", seen) // another aggregate
			s.completed(fmt.Sprintf("o1-%02d", i), "CaseOpened", "ORDER", "c-1", seen)
		}
	}
	r := s.reader()
	ctx := context.Background()
	list := func(p inbox.Page) (inbox.Listing, error) { return r.ListAggregate(ctx, "CASE", "c-1", p) }

	tests := []struct {
		name      string
		page      inbox.Page
		wantPages []int
	}{
		{name: "pages of 10", page: inbox.Page{Limit: 10}, wantPages: []int{10, 10, 3}},
		{name: "pages of 5", page: inbox.Page{Limit: 5}, wantPages: []int{5, 5, 5, 5, 3}},
		{name: "one exact page", page: inbox.Page{Limit: 23}, wantPages: []int{23}},
		{name: "default limit", page: inbox.Page{}, wantPages: []int{23}},
		{name: "descending pages of 8", page: inbox.Page{Limit: 8, Descending: true}, wantPages: []int{8, 8, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, pages := collectPages(t, list, tt.page)
			require.Equal(t, tt.wantPages, pages)
			w := append([]string(nil), want...)
			if tt.page.Descending {
				for i, j := 0, len(w)-1; i < j; i, j = i+1, j-1 {
					w[i], w[j] = w[j], w[i]
				}
			}
			require.Equal(t, w, recIDs(recs))
			for i, rec := range recs {
				n := i // the record's seed index
				if tt.page.Descending {
					n = len(recs) - 1 - i
				}
				require.Equal(t, "c-1", rec.AggregateID)
				require.Equal(t, msgTypes[n%3], rec.MessageType)
			}
		})
	}

	t.Run("other aggregate", func(t *testing.T) {
		l, err := r.ListAggregate(ctx, "CASE", "c-2", inbox.Page{})
		require.NoError(t, err)
		require.Equal(t, []string{"c2-00", "c2-04", "c2-08", "c2-12", "c2-16", "c2-20"}, recIDs(l.Records))
		require.Empty(t, l.Next)
	})
	t.Run("empty aggregate", func(t *testing.T) {
		l, err := r.ListAggregate(ctx, "CASE", "nothing", inbox.Page{})
		require.NoError(t, err)
		require.Empty(t, l.Records)
		require.Empty(t, l.Next)
	})
	t.Run("cursor of another listing", func(t *testing.T) {
		l, err := list(inbox.Page{Limit: 3})
		require.NoError(t, err)
		require.NotEmpty(t, l.Next)
		_, err = r.ListAggregate(ctx, "CASE", "c-2", inbox.Page{Limit: 3, Cursor: l.Next})
		require.ErrorIs(t, err, inbox.ErrBadCursor)
		_, err = list(inbox.Page{Limit: 3, Cursor: l.Next, Descending: true})
		require.ErrorIs(t, err, inbox.ErrBadCursor)
		_, err = r.ListAttention(ctx, inbox.StatusFailedTerminal, inbox.AttentionFilter{}, inbox.Page{Cursor: l.Next})
		require.ErrorIs(t, err, inbox.ErrBadCursor)
		// The limit may change between pages.
		rest, _ := collectPages(t, list, inbox.Page{Limit: 7, Cursor: l.Next})
		require.Equal(t, want[3:], recIDs(rest))
	})
	t.Run("missing aggregate id", func(t *testing.T) {
		_, err := r.ListAggregate(ctx, "CASE", "", inbox.Page{})
		require.ErrorIs(t, err, inbox.ErrBadQuery)
	})
}

// attentionFixture seeds failed records over several shards with distinct
// failure times, inserted in random order.
type attentionFixture struct {
	s         *readSeeder
	termIDs   []string // FAILED_TERMINAL records and rejections, by failedAt
	termCodes []string
	termAt    []time.Time
	retryIDs  []string
}

func newAttentionFixture(t *testing.T, shards int) *attentionFixture {
	s := newReadSeeder(t, shards)
	f := &attentionFixture{s: s}
	type spec struct {
		status inbox.Status
		key    string
		code   string
		reject bool
	}
	var specs []spec
	codes := []string{"HANDLER_ERROR", "VALIDATION_FAILED", "HANDLER_ERROR"}
	for i := range 31 {
		sp := spec{status: inbox.StatusFailedTerminal, key: fmt.Sprintf("term-%02d", i), code: codes[i%3]}
		if i%10 == 7 {
			sp = spec{status: inbox.StatusFailedTerminal, key: fmt.Sprintf("msg-%02d", i), code: "ENVELOPE_INVALID", reject: true}
		}
		specs = append(specs, sp)
	}
	for i := range 9 {
		specs = append(specs, spec{status: inbox.StatusFailedRetryable, key: fmt.Sprintf("retry-%02d", i), code: "THROTTLED"})
	}
	// Every spec gets its own second: spec i failed at seedTime + i s (terminal
	// ones first, then retryable ones), but they are written in random order.
	order := rand.Perm(len(specs))
	for _, i := range order {
		sp, at := specs[i], seedTime.Add(time.Duration(i)*time.Second)
		if sp.reject {
			s.rejection(sp.key, sp.code, at)
		} else {
			s.failed(sp.status, sp.key, sp.code, at)
		}
	}
	for i, sp := range specs {
		name := sp.key
		if sp.reject {
			name = "reject:" + sp.key
		}
		if sp.status == inbox.StatusFailedTerminal {
			f.termIDs = append(f.termIDs, name)
			f.termCodes = append(f.termCodes, sp.code)
			f.termAt = append(f.termAt, seedTime.Add(time.Duration(i)*time.Second))
		} else {
			f.retryIDs = append(f.retryIDs, name)
		}
	}
	// Completed work is not in the attention index.
	for i := range 5 {
		s.completed(fmt.Sprintf("done-%d", i), "CaseOpened", "CASE", "c", seedTime)
	}
	// More than one shard is in play.
	used := map[int]bool{}
	for _, sp := range specs {
		used[inbox.Shard(sp.key, shards)] = true
	}
	require.GreaterOrEqual(t, len(used), min(shards, 3))
	return f
}

func TestReaderListAttention(t *testing.T) {
	f := newAttentionFixture(t, 4)
	r := f.s.reader()
	ctx := context.Background()
	since := seedTime.Add(12 * time.Second)
	until := seedTime.Add(25 * time.Second)

	pick := func(keep func(i int) bool) []string {
		var out []string
		for i, id := range f.termIDs {
			if keep(i) {
				out = append(out, id)
			}
		}
		return out
	}
	reverse := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[len(s)-1-i] = v
		}
		return out
	}
	tests := []struct {
		name      string
		status    inbox.Status
		filter    inbox.AttentionFilter
		page      inbox.Page
		want      []string
		wantPages []int // nil: not checked
	}{
		{name: "all terminal, pages of 7", status: inbox.StatusFailedTerminal, page: inbox.Page{Limit: 7},
			want: f.termIDs, wantPages: []int{7, 7, 7, 7, 3}},
		{name: "all terminal, one page", status: inbox.StatusFailedTerminal, page: inbox.Page{Limit: 31},
			want: f.termIDs, wantPages: []int{31}},
		{name: "pages of 1", status: inbox.StatusFailedTerminal, page: inbox.Page{Limit: 1}, want: f.termIDs},
		{name: "descending", status: inbox.StatusFailedTerminal, page: inbox.Page{Limit: 6, Descending: true},
			want: reverse(f.termIDs), wantPages: []int{6, 6, 6, 6, 6, 1}},
		{name: "since", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Since: since}, page: inbox.Page{Limit: 5},
			want: pick(func(i int) bool { return !f.termAt[i].Before(since) })},
		{name: "since between seconds", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Since: since.Add(-time.Microsecond)},
			want: pick(func(i int) bool { return !f.termAt[i].Before(since) })},
		{name: "until is exclusive", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Until: until}, page: inbox.Page{Limit: 4},
			want: pick(func(i int) bool { return f.termAt[i].Before(until) })},
		{name: "since and until", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Since: since, Until: until}, page: inbox.Page{Limit: 4},
			want: pick(func(i int) bool { return !f.termAt[i].Before(since) && f.termAt[i].Before(until) })},
		{name: "since equals until", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Since: since, Until: since}, want: nil},
		{name: "code, pages of 4", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Code: "VALIDATION_FAILED"}, page: inbox.Page{Limit: 4},
			want: pick(func(i int) bool { return f.termCodes[i] == "VALIDATION_FAILED" }), wantPages: []int{4, 4, 1}},
		{name: "rejections by code", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Code: "ENVELOPE_INVALID"}, page: inbox.Page{Limit: 2},
			want: []string{"reject:msg-07", "reject:msg-17", "reject:msg-27"}},
		{name: "code and since", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Code: "HANDLER_ERROR", Since: since}, page: inbox.Page{Limit: 3},
			want: pick(func(i int) bool { return f.termCodes[i] == "HANDLER_ERROR" && !f.termAt[i].Before(since) })},
		{name: "unknown code", status: inbox.StatusFailedTerminal, filter: inbox.AttentionFilter{Code: "NOPE"}, page: inbox.Page{Limit: 3},
			want: nil, wantPages: []int{0}},
		{name: "retryable", status: inbox.StatusFailedRetryable, page: inbox.Page{Limit: 4},
			want: f.retryIDs, wantPages: []int{4, 4, 1}},
		{name: "processing: none indexed", status: inbox.StatusProcessing, want: nil, wantPages: []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, pages := collectPages(t, func(p inbox.Page) (inbox.Listing, error) {
				return r.ListAttention(ctx, tt.status, tt.filter, p)
			}, tt.page)
			require.Equal(t, tt.want, nilIfEmpty(recIDs(recs)), "every record exactly once, in order")
			if tt.wantPages != nil {
				require.Equal(t, tt.wantPages, pages)
			}
			for _, rec := range recs {
				require.Equal(t, tt.status, rec.Status)
				require.Equal(t, rec.Rejection, rec.FailureCode == "ENVELOPE_INVALID")
				require.NotEmpty(t, rec.FailedAt)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Records failed in the same millisecond, over the default 16 shards: the
// merge still returns each exactly once.
func TestReaderListAttentionTies(t *testing.T) {
	s := newReadSeeder(t, 16)
	var want []string
	for i := range 40 {
		key := fmt.Sprintf("tie-%02d", i)
		s.failed(inbox.StatusFailedRetryable, key, "TIMEOUT", seedTime.Add(time.Duration(i%3)*time.Millisecond))
		want = append(want, key)
	}
	r := s.reader(func(c *inbox.ReaderConfig) { c.Store.AttentionShards = 0 }) // default: 16
	for _, limit := range []int{1, 3, 7, 40, 41} {
		recs, _ := collectPages(t, func(p inbox.Page) (inbox.Listing, error) {
			return r.ListAttention(context.Background(), inbox.StatusFailedRetryable, inbox.AttentionFilter{}, p)
		}, inbox.Page{Limit: limit})
		got := recIDs(recs)
		for i := 1; i < len(recs); i++ {
			require.LessOrEqual(t, recs[i-1].FailedAt, recs[i].FailedAt, "limit %d: time order", limit)
		}
		sort.Strings(got)
		require.Equal(t, want, got, "limit %d: every record exactly once", limit)
	}
}

func TestReaderListProcessing(t *testing.T) {
	s := newReadSeeder(t, 8)
	now := seedTime.Add(time.Hour)
	var expired, live []string
	for i := range 12 {
		key := fmt.Sprintf("proc-%02d", i)
		exp := now.Add(time.Duration(i-6) * time.Minute) // six expired, six live
		s.processing(key, exp)
		if exp.Before(now) {
			expired = append(expired, key)
		} else {
			live = append(live, key)
		}
	}
	s.failed(inbox.StatusFailedRetryable, "not-processing", "X", now)
	r := s.reader()
	ctx := context.Background()
	list := func(f inbox.AttentionFilter) func(inbox.Page) (inbox.Listing, error) {
		return func(p inbox.Page) (inbox.Listing, error) { return r.ListAttention(ctx, inbox.StatusProcessing, f, p) }
	}

	recs, _ := collectPages(t, list(inbox.AttentionFilter{Until: now}), inbox.Page{Limit: 4})
	require.Equal(t, expired, recIDs(recs), "stale leases: expiry before now, oldest first")
	for _, rec := range recs {
		require.Equal(t, inbox.StatusProcessing, rec.Status)
		require.True(t, rec.LeaseExpiry.Before(now))
		require.Equal(t, "worker-1", rec.LeaseOwner)
	}
	recs, _ = collectPages(t, list(inbox.AttentionFilter{Since: now}), inbox.Page{Limit: 5})
	require.Equal(t, live, recIDs(recs))
}

func TestReaderBadRequests(t *testing.T) {
	s := newReadSeeder(t, 4)
	for i := range 6 {
		s.failed(inbox.StatusFailedTerminal, fmt.Sprintf("k-%d", i), "X", seedTime.Add(time.Duration(i)*time.Second))
	}
	r := s.reader()
	ctx := context.Background()
	l, err := r.ListAttention(ctx, inbox.StatusFailedTerminal, inbox.AttentionFilter{}, inbox.Page{Limit: 2})
	require.NoError(t, err)
	require.NotEmpty(t, l.Next)
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	good, err := base64.RawURLEncoding.DecodeString(l.Next)
	require.NoError(t, err)

	tests := []struct {
		name    string
		status  inbox.Status
		filter  inbox.AttentionFilter
		page    inbox.Page
		wantErr error
	}{
		{name: "cursor not base64", page: inbox.Page{Cursor: "%%%"}, wantErr: inbox.ErrBadCursor},
		{name: "cursor not JSON", page: inbox.Page{Cursor: b64("nope")}, wantErr: inbox.ErrBadCursor},
		{name: "cursor version", page: inbox.Page{Cursor: b64(`{"v":9}`)}, wantErr: inbox.ErrBadCursor},
		{name: "cursor of another query", page: inbox.Page{Cursor: b64(`{"v":1,"q":"x"}`)}, wantErr: inbox.ErrBadCursor},
		{name: "cursor truncated", page: inbox.Page{Cursor: l.Next[:len(l.Next)/2]}, wantErr: inbox.ErrBadCursor},
		{name: "cursor tampered", page: inbox.Page{Cursor: b64(string(good[:len(good)-1]) + `,"d":[99]}`)}, wantErr: inbox.ErrBadCursor},
		{name: "cursor with other filter", filter: inbox.AttentionFilter{Code: "X"}, page: inbox.Page{Cursor: l.Next}, wantErr: inbox.ErrBadCursor},
		{name: "cursor with other status", status: inbox.StatusFailedRetryable, page: inbox.Page{Cursor: l.Next}, wantErr: inbox.ErrBadCursor},
		{name: "status completed", status: inbox.StatusCompleted, wantErr: inbox.ErrBadStatus},
		{name: "status empty", status: "-", wantErr: inbox.ErrBadStatus},
		{name: "status lower case", status: "failed_terminal", wantErr: inbox.ErrBadStatus},
		{name: "limit too big", page: inbox.Page{Limit: 1001}, wantErr: inbox.ErrBadQuery},
		{name: "limit negative", page: inbox.Page{Limit: -1}, wantErr: inbox.ErrBadQuery},
		{name: "since after until", filter: inbox.AttentionFilter{Since: seedTime, Until: seedTime.Add(-time.Second)}, wantErr: inbox.ErrBadQuery},
		{name: "good cursor", page: inbox.Page{Limit: 2, Cursor: l.Next}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := tt.status
			switch status {
			case "":
				status = inbox.StatusFailedTerminal
			case "-":
				status = ""
			}
			got, err := r.ListAttention(ctx, status, tt.filter, tt.page)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, []string{"k-2", "k-3"}, recIDs(got.Records))
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorContains(t, err, "inbox: ")
		})
	}
}

// unprocessed is a ReadAPI that returns part of every BatchGetItem request
// as UnprocessedKeys, as DynamoDB does under throttling.
// unprocessed is SDK middleware on a real client that makes BatchGetItem
// leave keys unprocessed, as DynamoDB does under load (DynamoDB Local never
// does): each call sends only the first keep keys (0: none) and returns the
// rest as UnprocessedKeys.
type unprocessed struct {
	table  string
	keep   int
	calls  atomic.Int32
	onCall func() // after each call, if set
}

// client is a DynamoDB client of env with the middleware installed.
func (u *unprocessed) client(env *testenv.Env) *dynamodb.Client {
	return dynamodb.NewFromConfig(env.AWS, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("test.unprocessed", u.handle), middleware.Before)
		})
	})
}

func (u *unprocessed) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	req, ok := in.Parameters.(*dynamodb.BatchGetItemInput)
	if !ok {
		return next.HandleInitialize(ctx, in)
	}
	u.calls.Add(1)
	if u.onCall != nil {
		defer u.onCall()
	}
	ka := req.RequestItems[u.table]
	keys := ka.Keys
	n := min(u.keep, len(keys))
	var out middleware.InitializeOutput
	var md middleware.Metadata
	res := &dynamodb.BatchGetItemOutput{}
	if n > 0 {
		sent := ka
		sent.Keys = keys[:n]
		in.Parameters = &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{u.table: sent}}
		var err error
		out, md, err = next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		res = out.Result.(*dynamodb.BatchGetItemOutput)
	}
	if n < len(keys) {
		rest := ka
		rest.Keys = keys[n:]
		res.UnprocessedKeys = map[string]types.KeysAndAttributes{u.table: rest}
	}
	out.Result = res
	return out, md, nil
}

func TestReaderUnprocessedKeys(t *testing.T) {
	s := newReadSeeder(t, 4)
	var want []string
	for i := range 10 {
		key := fmt.Sprintf("k-%02d", i)
		s.completed(key, "CaseOpened", "CASE", "c-1", seedTime.Add(time.Duration(i)*time.Second))
		want = append(want, key)
	}
	fast := func(c *inbox.ReaderConfig) { c.RetryBackoff = time.Microsecond }

	slow := &unprocessed{table: s.env.Table, keep: 3}
	l, err := s.readerWith(slow.client(s.env), fast).ListAggregate(context.Background(), "CASE", "c-1", inbox.Page{})
	require.NoError(t, err)
	require.Equal(t, want, recIDs(l.Records), "index order kept across retries")
	require.EqualValues(t, 4, slow.calls.Load(), "3+3+3+1 keys")

	stuck := &unprocessed{table: s.env.Table}
	_, err = s.readerWith(stuck.client(s.env), fast, func(c *inbox.ReaderConfig) { c.BatchGetAttempts = 3 }).
		ListAggregate(context.Background(), "CASE", "c-1", inbox.Page{})
	require.ErrorIs(t, err, inbox.ErrUnprocessed)
	require.EqualValues(t, 3, stuck.calls.Load())

	// The wait between retries ends with the context.
	ctx, cancel := context.WithCancel(context.Background())
	canceled := &unprocessed{table: s.env.Table, onCall: cancel}
	_, err = s.readerWith(canceled.client(s.env), func(c *inbox.ReaderConfig) { c.RetryBackoff = time.Hour }).
		ListAggregate(ctx, "CASE", "c-1", inbox.Page{})
	require.ErrorIs(t, err, context.Canceled)
	require.EqualValues(t, 1, canceled.calls.Load())
}
