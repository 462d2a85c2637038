package effects

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/internal/attr"
)

// AdminAPI is what an Admin needs of DynamoDB (the SDK's exact signatures).
type AdminAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Inbox is the inbox store (its Table and Layout). Required.
	Inbox inbox.Store
	// Table holds the effect records. Default: Inbox.Table.
	Table string
	// TTL of a resolved record, as Config.TTL. Default: the longer of
	// Inbox.TTL.Completed and Inbox.TTL.Failed.
	TTL time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Admin is the operator's access to the effect log: read one effect, list
// them, resolve an UNKNOWN one.
type Admin struct {
	ddb   AdminAPI
	store store
}

// Page limits.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// NewAdmin returns an Admin on ddb.
func NewAdmin(ddb AdminAPI, cfg AdminConfig) (*Admin, error) {
	var errs []error
	if ddb == nil {
		errs = append(errs, errors.New("effects: a DynamoDB client is required"))
	}
	if cfg.Inbox.Table == "" {
		errs = append(errs, errors.New("effects: AdminConfig.Inbox is required"))
	} else {
		s, err := cfg.Inbox.WithDefaults()
		if err != nil {
			errs = append(errs, fmt.Errorf("effects: AdminConfig.Inbox: %w", err))
		}
		cfg.Inbox = s
	}
	if cfg.Table == "" {
		cfg.Table = cfg.Inbox.Table
	}
	if cfg.TTL < 0 {
		errs = append(errs, errors.New("effects: AdminConfig.TTL must not be negative"))
	}
	if cfg.TTL == 0 {
		cfg.TTL = minTTL(cfg.Inbox)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Admin{ddb: ddb, store: store{table: cfg.Table, inbox: cfg.Inbox, ttl: cfg.TTL, now: cfg.Now, attnIdx: cfg.Inbox.Layout.AttentionIndex}}, nil
}

// Get reads the effect under key (ErrNotFound when there is none).
func (a *Admin) Get(ctx context.Context, key string) (*Effect, error) {
	out, err := a.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.store.table), Key: a.store.key(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("effects: read %s: %w", key, err)
	}
	e, err := a.store.decode(out.Item)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return e, nil
}

// Filter selects effects in List.
type Filter struct {
	// Status keeps one status ("": every status). UNKNOWN is read from the
	// attention index; every other listing scans the table for effect
	// records (it reads the whole table: mind its size).
	Status Status
	// Provider keeps one provider ("": all).
	Provider string
}

// Page is one page of a listing.
type Page struct {
	// Limit is the most effects returned. Default DefaultPageLimit;
	// 1..MaxPageLimit.
	Limit int
	// Cursor resumes after an earlier page (its Listing.Next).
	Cursor string
}

// Listing is one page of effects and the cursor of the next ("" at the
// end).
type Listing struct {
	Effects []*Effect
	Next    string
}

// List lists effects in f, a page at a time.
func (a *Admin) List(ctx context.Context, f Filter, p Page) (Listing, error) {
	if p.Limit == 0 {
		p.Limit = DefaultPageLimit
	}
	if p.Limit < 1 || p.Limit > MaxPageLimit {
		return Listing{}, fmt.Errorf("effects: page limit %d must be within 1..%d", p.Limit, MaxPageLimit)
	}
	if f.Status != "" && !validStatus(f.Status) {
		return Listing{}, fmt.Errorf("effects: unknown status %q (want one of %s)", f.Status, statusList())
	}
	start, err := decodeCursor(p.Cursor)
	if err != nil {
		return Listing{}, err
	}
	if f.Status == StatusUnknown {
		return a.listUnknown(ctx, f, p, start)
	}
	return a.scan(ctx, f, p, start)
}

func validStatus(s Status) bool {
	for _, v := range statuses() {
		if v == s {
			return true
		}
	}
	return false
}

func statusList() string {
	var out []string
	for _, s := range statuses() {
		out = append(out, string(s))
	}
	return strings.Join(out, ", ")
}

func (a *Admin) scan(ctx context.Context, f Filter, p Page, start map[string]types.AttributeValue) (Listing, error) {
	l := a.store.inbox.Layout
	cond := expression.BeginsWith(expression.Name(l.PartitionKey), prefixEffect).
		And(expression.Name(l.SortKey).Equal(expression.Value(effectSK)))
	if f.Status != "" {
		cond = cond.And(expression.Name(attr.Status).Equal(expression.Value(string(f.Status))))
	}
	if f.Provider != "" {
		cond = cond.And(expression.Name(attr.EffectProvider).Equal(expression.Value(f.Provider)))
	}
	ex, err := expression.NewBuilder().WithFilter(cond).Build()
	if err != nil {
		return Listing{}, fmt.Errorf("effects: build scan: %w", err)
	}
	var out Listing
	for {
		res, err := a.ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(a.store.table), FilterExpression: ex.Filter(),
			ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return Listing{}, fmt.Errorf("effects: scan %s: %w", a.store.table, err)
		}
		for _, item := range res.Items {
			e, err := a.store.decode(item)
			if err != nil {
				return Listing{}, err
			}
			out.Effects = append(out.Effects, e)
			if len(out.Effects) == p.Limit {
				out.Next = encodeCursor(item, l.PartitionKey, l.SortKey)
				return out, nil
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

func (a *Admin) listUnknown(ctx context.Context, f Filter, p Page, start map[string]types.AttributeValue) (Listing, error) {
	l := a.store.inbox.Layout
	kc := expression.Key(l.AttentionPK).Equal(expression.Value(attentionUnknown))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return Listing{}, fmt.Errorf("effects: build query: %w", err)
	}
	var out Listing
	for {
		res, err := a.ddb.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(a.store.table), IndexName: aws.String(l.AttentionIndex),
			KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
			ExclusiveStartKey: start})
		if err != nil {
			return Listing{}, fmt.Errorf("effects: query %s: %w", l.AttentionIndex, err)
		}
		for _, keys := range res.Items {
			got, err := a.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.store.table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{l.PartitionKey: keys[l.PartitionKey], l.SortKey: keys[l.SortKey]}})
			if err != nil {
				return Listing{}, fmt.Errorf("effects: read: %w", err)
			}
			e, err := a.store.decode(got.Item)
			if err != nil {
				return Listing{}, err
			}
			// The index is eventually consistent: skip what moved on.
			if e == nil || e.Status != StatusUnknown || (f.Provider != "" && e.Provider != f.Provider) {
				continue
			}
			out.Effects = append(out.Effects, e)
			if len(out.Effects) == p.Limit {
				out.Next = encodeCursor(keys, l.PartitionKey, l.SortKey, l.AttentionPK, l.AttentionSK)
				return out, nil
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

func encodeCursor(item map[string]types.AttributeValue, attrs ...string) string {
	m := map[string]string{}
	for _, a := range attrs {
		if v, ok := item[a].(*types.AttributeValueMemberS); ok {
			m[a] = v.Value
		}
	}
	raw, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(c string) (map[string]types.AttributeValue, error) {
	if c == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	var m map[string]string
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil || len(m) == 0 {
		return nil, fmt.Errorf("effects: invalid cursor %q", c)
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = &types.AttributeValueMemberS{Value: v}
	}
	return out, nil
}

// Resolution is an operator's finding about an effect whose outcome the log
// does not know.
type Resolution struct {
	// Completed: the provider did it; Ref (required) and Result are its
	// answer, found in the provider's own records.
	Completed bool
	Ref       string
	Result    string
	// NotDone: the provider did not do it; the next attempt of the work
	// calls it again (same key).
	NotDone bool
	// By and Reason audit the resolution (both required).
	By, Reason string
}

func (r Resolution) validate() error {
	var errs []error
	if r.Completed == r.NotDone {
		errs = append(errs, errors.New("a resolution is either Completed (with Ref) or NotDone"))
	}
	if r.Completed && (r.Ref == "" || len(r.Ref) > maxRefBytes) {
		errs = append(errs, fmt.Errorf("a Completed resolution needs the provider's Ref (1..%d bytes)", maxRefBytes))
	}
	if r.NotDone && (r.Ref != "" || r.Result != "") {
		errs = append(errs, errors.New("a NotDone resolution has no Ref or Result"))
	}
	if len(r.Result) > maxResultBytes {
		errs = append(errs, fmt.Errorf("the Result is longer than %d bytes", maxResultBytes))
	}
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Reason) == "" {
		errs = append(errs, errors.New("a resolution says who made it (By) and why (Reason)"))
	}
	return errors.Join(errs...)
}

// Resolve settles the effect under key as r says. Only an UNKNOWN effect,
// or a STARTED one (its worker crashed and no attempt has looked at it
// since), whose call lease has ended can be resolved (an UNKNOWN effect
// marked while its call's worker had lost the work's lease keeps that
// call's lease: the call may still answer); the write is fenced on
// the record being exactly as read, and records who resolved it, when and
// why. It returns the record as written.
func (a *Admin) Resolve(ctx context.Context, key string, r Resolution) (*Effect, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("effects: resolve %s: %w", key, err)
	}
	rec, err := a.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	now := a.store.now()
	switch {
	case (rec.Status == StatusUnknown || rec.Status == StatusStarted) && !now.Before(rec.CallExpiresAt):
	default:
		why := "only UNKNOWN effects, and STARTED ones whose call is over, are resolved"
		if rec.Status == StatusStarted || rec.Status == StatusUnknown {
			why = "its call may still be in progress (call lease until " + inbox.FormatTime(rec.CallExpiresAt) + ")"
		}
		return rec, fmt.Errorf("%w: %s is %s: %s", ErrNotResolvable, key, rec.Status, why)
	}
	s := a.store
	ts := inbox.FormatTime(now)
	status, resolution := StatusNotDone, "NOT_DONE"
	if r.Completed {
		status, resolution = StatusCompleted, "COMPLETED"
	}
	upd := expression.Set(expression.Name(attr.Status), expression.Value(string(status))).
		Set(expression.Name(attr.Resolution), expression.Value(resolution)).
		Set(expression.Name(attr.ResolvedAt), expression.Value(ts)).
		Set(expression.Name(attr.ResolvedBy), expression.Value(r.By)).
		Set(expression.Name(attr.ResolveReason), expression.Value(r.Reason)).
		Set(expression.Name(attr.CallExpiresAt), expression.Value(0)).
		Set(expression.Name(s.inbox.Layout.TTL), expression.Value(now.Add(s.ttl).Unix())).
		Remove(expression.Name(s.inbox.Layout.AttentionPK)).
		Remove(expression.Name(s.inbox.Layout.AttentionSK))
	if r.Completed {
		upd = upd.Set(expression.Name(attr.ProviderRef), expression.Value(r.Ref)).
			Set(expression.Name(attr.CompletedAt), expression.Value(ts))
		if r.Result != "" {
			upd = upd.Set(expression.Name(attr.EffectResult), expression.Value(r.Result))
		}
	}
	// An UNKNOWN effect marked by a later attempt keeps the call lease of
	// the claim whose call may still be in progress (its worker lost the
	// work's lease): resolving it before that call ends would refuse the
	// call's late answer, and a NOT_DONE resolution would let the next
	// attempt call again.
	cond := unchanged(rec).And(expression.Or(
		expression.Name(attr.CallExpiresAt).Equal(expression.Value(epochMs(rec.CallExpiresAt))),
		expression.AttributeNotExists(expression.Name(attr.CallExpiresAt))))
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("effects: build resolve: %w", err)
	}
	out, err := a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(key),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(),
		ExpressionAttributeValues: ex.Values(), ReturnValues: types.ReturnValueAllNew})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, fmt.Errorf("%w: %s changed while it was being resolved: read it again", ErrNotResolvable, key)
	}
	if err != nil {
		return nil, fmt.Errorf("effects: resolve %s: %w", key, err)
	}
	return s.decode(out.Attributes)
}

// epochMs is t in epoch milliseconds, 0 for the zero time.
func epochMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
