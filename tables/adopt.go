package tables

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Adopting an existing table — one that holds an application's items,
// indexes and perhaps a TTL attribute of its own — is decide, then apply:
// Plan reads the table and returns every change it needs (the layout's
// missing indexes, TTL, the stream), what it leaves alone and what blocks
// it, as a value; Adopt applies a plan without blockers, one change at a
// time. Neither reads nor writes an item.

// PlanAPI is what Plan needs of DynamoDB (a *dynamodb.Client has it).
type PlanAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// AdoptAPI is what Adopt needs of DynamoDB (a *dynamodb.Client has it).
type AdoptAPI interface {
	PlanAPI
	UpdateTable(ctx context.Context, params *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// DefaultMaxIndexes is DynamoDB's default quota of global secondary
// indexes per table.
const DefaultMaxIndexes = 20

// AdoptConfig configures Plan.
type AdoptConfig struct {
	// Name is the existing table. Required.
	Name string
	// Layout names the key, index and TTL attributes the inbox uses in it.
	// Default: DefaultLayout().
	Layout Layout
	// Stream also plans the table's NEW_IMAGE stream (for the outbox
	// relay). Default: false.
	Stream bool
	// IndexReadCapacity and IndexWriteCapacity are the provisioned
	// throughput of each index Adopt creates on a provisioned table
	// (ignored on an on-demand one). Default: the table's own.
	IndexReadCapacity, IndexWriteCapacity int64
	// MaxIndexes is the table's quota of global secondary indexes.
	// Default: DefaultMaxIndexes.
	MaxIndexes int
}

func (c *AdoptConfig) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("tables: AdoptConfig.Name is required"))
	}
	if c.IndexReadCapacity < 0 || c.IndexWriteCapacity < 0 {
		errs = append(errs, errors.New("tables: AdoptConfig.IndexReadCapacity and IndexWriteCapacity must not be negative"))
	}
	if c.MaxIndexes < 0 {
		errs = append(errs, errors.New("tables: AdoptConfig.MaxIndexes must not be negative"))
	}
	if c.MaxIndexes == 0 {
		c.MaxIndexes = DefaultMaxIndexes
	}
	var err error
	if c.Layout, err = c.Layout.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ChangeKind is what a Change does.
type ChangeKind string

// The changes Plan can plan, in the order Adopt applies them.
const (
	// ChangeCreateIndex adds one of the layout's indexes (KEYS_ONLY) and
	// waits for its backfill.
	ChangeCreateIndex ChangeKind = "create-index"
	// ChangeAwaitIndex waits for the backfill of one of the layout's
	// indexes that is already being created (by an earlier Adopt that
	// stopped waiting, or anyone else).
	ChangeAwaitIndex ChangeKind = "await-index"
	// ChangeEnableTTL turns TTL on, on the layout's TTL attribute.
	ChangeEnableTTL ChangeKind = "enable-ttl"
	// ChangeEnableStream turns the table's NEW_IMAGE stream on.
	ChangeEnableStream ChangeKind = "enable-stream"
)

// Change is one change Adopt makes.
type Change struct {
	Kind ChangeKind
	// Target is the index, the TTL attribute, or "stream".
	Target string
	// Detail says what exactly, for a person.
	Detail string
	// Index is the index to create (ChangeCreateIndex) and
	// AttributeDefinitions its key attributes.
	Index                *types.CreateGlobalSecondaryIndexAction
	AttributeDefinitions []types.AttributeDefinition
}

// Kept is what Plan found and Adopt leaves alone.
type Kept struct {
	// Target is "key", "index NAME", "TTL", "stream" or "items".
	Target string
	// Detail says what it is and why it stays, for a person.
	Detail string
}

// AdoptError is one reason a table cannot be adopted with a layout.
// Several are joined (errors.Join); each unwraps to ErrIncompatible.
type AdoptError struct {
	Table string
	// Subject is what it is about: "key", "index NAME", "attribute NAME",
	// "indexes", "TTL", "stream".
	Subject string
	Reason  string
	// Field is the Layout field that would fix it when given another name
	// ("PartitionKey", "SortKey", "AggregateIndex", "AggregatePK", …,
	// "TTL"); empty when no name in the layout does. Suggest is the name
	// that fits, when the table decides it (its key, its TTL attribute);
	// empty when the operator chooses.
	Field, Suggest string
}

func (e *AdoptError) Error() string {
	msg := fmt.Sprintf("tables: table %s cannot be adopted: %s: %s", e.Table, e.Subject, e.Reason)
	switch {
	case e.Field != "" && e.Suggest != "":
		msg += fmt.Sprintf(" (Layout.%s %q fits)", e.Field, e.Suggest)
	case e.Field != "":
		msg += fmt.Sprintf(" (choose another Layout.%s)", e.Field)
	}
	return msg
}

// Unwrap returns ErrIncompatible.
func (e *AdoptError) Unwrap() error { return ErrIncompatible }

// AdoptPlan is what adopting a table with a layout takes: the changes, in
// the order Adopt applies them, what stays as it is, what a person should
// know, and what blocks it. Plan makes it; nothing in it is applied yet.
type AdoptPlan struct {
	Table  string
	Layout Layout
	// KeyFits reports that the table's key is the layout's: items can be
	// read and written under the layout's key names.
	KeyFits  bool
	Changes  []Change
	Kept     []Kept
	Warnings []string
	Blockers []*AdoptError
}

// Err joins the blockers (each an *AdoptError); nil when there are none.
func (p AdoptPlan) Err() error {
	errs := make([]error, len(p.Blockers))
	for i, b := range p.Blockers {
		errs[i] = b
	}
	return errors.Join(errs...)
}

func (p *AdoptPlan) block(subject, reason, field, suggest string) {
	p.Blockers = append(p.Blockers, &AdoptError{Table: p.Table, Subject: subject, Reason: reason, Field: field, Suggest: suggest})
}

// Plan reads the table and returns what adopting it with cfg.Layout
// takes. It changes nothing. The rules are Verify's: the table's key must
// be the layout's (string keys: a key schema cannot change), an index of
// the layout's name must have the layout's keys (any projection holds
// them), the layout's key attributes must be strings wherever the table
// defines them, and TTL must be on the layout's attribute — when the table
// has TTL on another, the layout must name it (DynamoDB allows one TTL
// attribute per table and forbids changing it while enabled). Missing
// indexes are created KEYS_ONLY, within cfg.MaxIndexes. An error is the
// SDK's (a missing table: *types.ResourceNotFoundException) or an invalid
// cfg; what blocks adoption is in the plan's Blockers.
func Plan(ctx context.Context, api PlanAPI, cfg AdoptConfig) (AdoptPlan, error) {
	if err := cfg.validate(); err != nil {
		return AdoptPlan{}, err
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Name)})
	if err != nil {
		return AdoptPlan{}, fmt.Errorf("tables: describe %s: %w", cfg.Name, err)
	}
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(cfg.Name)})
	if err != nil {
		return AdoptPlan{}, fmt.Errorf("tables: describe TTL of %s: %w", cfg.Name, err)
	}
	t := desc.Table
	if t == nil {
		return AdoptPlan{}, fmt.Errorf("tables: describe %s: no description", cfg.Name)
	}
	p := AdoptPlan{Table: cfg.Name, Layout: cfg.Layout}
	p.planKey(t)
	p.planIndexes(t, cfg)
	p.planTTL(ttl.TimeToLiveDescription)
	if cfg.Stream {
		p.planStream(t)
	}
	p.Kept = append(p.Kept, Kept{Target: "items", Detail: fmt.Sprintf("about %d, %d bytes (DescribeTable's counts, refreshed every few hours): none is read or written",
		aws.ToInt64(t.ItemCount), aws.ToInt64(t.TableSizeBytes))})
	return p, nil
}

func (p *AdoptPlan) planKey(t *types.TableDescription) {
	l := p.Layout
	var pk, sk string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			pk = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			sk = aws.ToString(k.AttributeName)
		}
	}
	typ := attributeTypes(t.AttributeDefinitions)
	fits := true
	for _, k := range []struct {
		what, have string
		want       layoutName
	}{{"partition key", pk, layoutName{"PartitionKey", l.PartitionKey}}, {"sort key", sk, layoutName{"SortKey", l.SortKey}}} {
		switch {
		case k.have == "":
			fits = false
			p.block("key", fmt.Sprintf("the table has no %s, and the inbox needs a (partition key, sort key) of strings; a key schema cannot change: keep the inbox records in a table of their own", k.what), "", "")
		case typ[k.have] != types.ScalarAttributeTypeS:
			fits = false
			p.block("key", fmt.Sprintf("the table's %s %s is of type %s, and the inbox's keys are strings; a key schema cannot change: keep the inbox records in a table of their own", k.what, k.have, typ[k.have]), "", "")
		case k.have != k.want.name:
			fits = false
			p.block("key", fmt.Sprintf("the table's %s is %s, not %s, and a key schema cannot change", k.what, k.have, k.want.name), k.want.field, k.have)
		}
	}
	p.KeyFits = fits
	if fits {
		p.Kept = append(p.Kept, Kept{Target: "key", Detail: fmt.Sprintf("(%s S, %s S): the layout's", pk, sk)})
	}
}

func (p *AdoptPlan) planIndexes(t *types.TableDescription, cfg AdoptConfig) {
	have := map[string]types.GlobalSecondaryIndexDescription{}
	for _, g := range t.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = g
	}
	// The layout's key attributes that are keys of the table's other
	// indexes: items of one enter the other.
	keyOf := map[string][]string{}
	for _, g := range t.GlobalSecondaryIndexes {
		for _, k := range g.KeySchema {
			keyOf[aws.ToString(k.AttributeName)] = append(keyOf[aws.ToString(k.AttributeName)], aws.ToString(g.IndexName))
		}
	}
	mine := map[string]bool{}
	for _, ix := range p.Layout.indexes() {
		mine[ix.name] = true
	}
	theirs := slices.SortedFunc(slices.Values(t.GlobalSecondaryIndexes), func(a, b types.GlobalSecondaryIndexDescription) int {
		return strings.Compare(aws.ToString(a.IndexName), aws.ToString(b.IndexName))
	})
	for _, g := range theirs {
		if name := aws.ToString(g.IndexName); !mine[name] {
			p.Kept = append(p.Kept, Kept{Target: "index " + name, Detail: fmt.Sprintf("yours, %s %s, %s: untouched", describeKeys(g.KeySchema), g.Projection.ProjectionType, g.IndexStatus)})
		}
	}
	warned := map[string]bool{}
	for _, k := range recordKeyedIndexes(p.Layout, t) {
		switch {
		case k.clash:
			p.block("index "+k.index, k.clashProblem(), "", "")
		case k.enters && !warned[k.index]:
			warned[k.index] = true
			p.Warnings = append(p.Warnings, fmt.Sprintf("your index %s is keyed on attributes the inbox records write too (%s): inbox records enter %s, and a query of it meets them beside your items",
				k.index, k.attr, k.index))
		}
	}
	nonString := map[string]typedName{}
	for _, a := range nonStringKeys(p.Layout, t.AttributeDefinitions) {
		nonString[a.name] = a
	}
	creates := 0
	for _, ix := range p.Layout.indexes() {
		for _, k := range []layoutName{ix.pk, ix.sk} {
			for _, other := range keyOf[k.name] {
				if other != ix.name {
					p.Warnings = append(p.Warnings, fmt.Sprintf("attribute %s is a key of the index %s too: inbox records enter %s, and items of yours that carry %s enter %s; to keep them apart, name another attribute for Layout.%s",
						k.name, other, other, k.name, ix.name, k.field))
				}
			}
		}
		blocked := false
		for _, k := range []layoutName{ix.pk, ix.sk} {
			if a, ok := nonString[k.name]; ok {
				blocked = true
				p.block("attribute "+k.name, fmt.Sprintf("the table defines it as type %s (a key of the table or of one of its indexes), and the index %s's keys are strings", a.typ, ix.name), k.field, "")
			}
		}
		got, exists := have[ix.name]
		switch {
		case blocked:
		case exists && !sameKeys(got.KeySchema, ix.keySchema()):
			p.block("index "+ix.name, fmt.Sprintf("an index of that name exists with the key %s, and the layout's needs (%s, %s); an index's key cannot change",
				describeKeys(got.KeySchema), ix.pk.name, ix.sk.name), ix.field, "")
		case exists && got.IndexStatus == types.IndexStatusDeleting:
			p.block("index "+ix.name, "it is being deleted: run the adoption again once it is gone", "", "")
		case exists && got.IndexStatus == types.IndexStatusCreating:
			p.Changes = append(p.Changes, Change{Kind: ChangeAwaitIndex, Target: ix.name,
				Detail: fmt.Sprintf("%s, being created: waits for its backfill", describeKeys(got.KeySchema))})
		case exists:
			detail := fmt.Sprintf("%s %s, %s: fits", describeKeys(got.KeySchema), got.Projection.ProjectionType, got.IndexStatus)
			if got.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
				detail += " (the inbox reads only the keys; its records are projected as the index says)"
			}
			p.Kept = append(p.Kept, Kept{Target: "index " + ix.name, Detail: detail})
		default:
			creates++
			p.Changes = append(p.Changes, createIndex(t, ix, cfg))
		}
	}
	if n := len(t.GlobalSecondaryIndexes); n+creates > cfg.MaxIndexes {
		quota := "the quota"
		if cfg.MaxIndexes == DefaultMaxIndexes {
			quota = "DynamoDB's default quota"
		}
		p.block("indexes", fmt.Sprintf("the table has %d global secondary indexes and the inbox needs %d more, over %s of %d per table (ask AWS for more, or keep the inbox records in a table of their own)",
			n, creates, quota, cfg.MaxIndexes), "", "")
	}
}

// createIndex is the change that creates index ix on table t.
func createIndex(t *types.TableDescription, ix layoutIndex, cfg AdoptConfig) Change {
	create := &types.CreateGlobalSecondaryIndexAction{IndexName: aws.String(ix.name), KeySchema: ix.keySchema(),
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}
	capacity := "on-demand, as the table"
	if provisioned(t) {
		rcu, wcu := cfg.IndexReadCapacity, cfg.IndexWriteCapacity
		from := "given"
		switch {
		case rcu == 0 && wcu == 0:
			from = "the table's"
		case rcu == 0 || wcu == 0:
			from = "given, else the table's"
		}
		if tp := t.ProvisionedThroughput; tp != nil {
			rcu = cmp.Or(rcu, aws.ToInt64(tp.ReadCapacityUnits))
			wcu = cmp.Or(wcu, aws.ToInt64(tp.WriteCapacityUnits))
		}
		rcu, wcu = max(rcu, 1), max(wcu, 1)
		create.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(rcu), WriteCapacityUnits: aws.Int64(wcu)}
		capacity = fmt.Sprintf("provisioned %d RCU, %d WCU (%s)", rcu, wcu, from)
	}
	return Change{Kind: ChangeCreateIndex, Target: ix.name,
		Detail:               fmt.Sprintf("(%s S, %s S) KEYS_ONLY, %s; waits for its backfill", ix.pk.name, ix.sk.name, capacity),
		Index:                create,
		AttributeDefinitions: []types.AttributeDefinition{stringAttribute(ix.pk.name), stringAttribute(ix.sk.name)}}
}

func (p *AdoptPlan) planTTL(d *types.TimeToLiveDescription) {
	status, attr := types.TimeToLiveStatusDisabled, ""
	if d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	switch status {
	case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
		if attr == p.Layout.TTL {
			p.Kept = append(p.Kept, Kept{Target: "TTL", Detail: fmt.Sprintf("%s on %s: the inbox records expire by it too (epoch seconds); yours as before", status, attr)})
			return
		}
		p.block("TTL", fmt.Sprintf("TTL is %s on %s, and DynamoDB allows one TTL attribute per table and forbids changing it while enabled: the inbox must use it too (your items keep expiring as before)",
			status, attr), "TTL", attr)
	case types.TimeToLiveStatusDisabling:
		p.block("TTL", fmt.Sprintf("TTL on %s is being disabled, and DynamoDB enables it again only once that is done (up to an hour): run the adoption again then", attr), "", "")
	default:
		p.Changes = append(p.Changes, Change{Kind: ChangeEnableTTL, Target: p.Layout.TTL, Detail: fmt.Sprintf("UpdateTimeToLive: TTL on %s (epoch seconds)", p.Layout.TTL)})
		p.Warnings = append(p.Warnings, fmt.Sprintf("with TTL on %s, DynamoDB deletes every item whose %s is a number of epoch seconds in the past: yours too, if any carries that attribute", p.Layout.TTL, p.Layout.TTL))
	}
}

func (p *AdoptPlan) planStream(t *types.TableDescription) {
	s := t.StreamSpecification
	if s == nil || !aws.ToBool(s.StreamEnabled) {
		p.Changes = append(p.Changes, Change{Kind: ChangeEnableStream, Target: "stream", Detail: "UpdateTable: the stream on, NEW_IMAGE, for the outbox relay"})
		return
	}
	switch s.StreamViewType {
	case types.StreamViewTypeNewImage, types.StreamViewTypeNewAndOldImages:
		p.Kept = append(p.Kept, Kept{Target: "stream", Detail: fmt.Sprintf("on, %s: the outbox relay reads it (inbox and outbox records pass through it too)", s.StreamViewType)})
	default:
		p.block("stream", fmt.Sprintf("the stream is on with the view type %s, and the outbox relay needs NEW_IMAGE or NEW_AND_OLD_IMAGES (changing it would break its other readers)", s.StreamViewType), "", "")
	}
}

// The defaults of AdoptOptions, applied by Adopt.
const (
	DefaultAdoptWait         = time.Hour
	DefaultAdoptPollInterval = 5 * time.Second
)

// AdoptOptions configures Adopt.
type AdoptOptions struct {
	// Wait bounds each wait: for the table to take an update, and for each
	// index's backfill. The backfill goes on when it ends: a later Plan
	// plans the wait again. Default: DefaultAdoptWait.
	Wait time.Duration
	// PollInterval is how often a wait reads the table, at most: the
	// first read is at once, the next after 200 ms, then twice as long
	// each time up to PollInterval. Default: DefaultAdoptPollInterval.
	PollInterval time.Duration
	// Progress, when set, is called on each read of the table while a
	// change waits, and once when it is done.
	Progress func(Progress)
}

// Progress is where Adopt is.
type Progress struct {
	// Step is the change's number, from 1, of Steps.
	Step, Steps int
	Change      Change
	// Elapsed is the time since the change began.
	Elapsed time.Duration
	// TableStatus is the table's status as last read.
	TableStatus types.TableStatus
	// Index is, while the change waits for an index, that index as last
	// read: the change's own (its IndexStatus, Backfilling,
	// IndexSizeBytes, ItemCount), or another one being created or
	// deleted, which the table must finish first.
	Index *types.GlobalSecondaryIndexDescription
	// Done is set once the change is applied.
	Done bool
}

// Adopt applies plan's changes in order: each index is created with its
// own UpdateTable once the table has no other index being created or
// deleted (DynamoDB allows one at a time), and waited for until it is
// ACTIVE; then TTL and the stream. A plan with blockers is refused with
// plan.Err(), before any change. A wait that outlasts opts.Wait ends
// Adopt with ErrNotActive; what was applied stays, and Plan on the table
// plans the rest.
func Adopt(ctx context.Context, api AdoptAPI, plan AdoptPlan, opts AdoptOptions) error {
	if err := plan.Err(); err != nil {
		return err
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultAdoptWait
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultAdoptPollInterval
	}
	for i, c := range plan.Changes {
		a := applying{api: api, table: plan.Table, opts: opts, progress: Progress{Step: i + 1, Steps: len(plan.Changes), Change: c}, start: time.Now()}
		var err error
		switch c.Kind {
		case ChangeCreateIndex:
			err = a.createIndex(ctx)
		case ChangeAwaitIndex:
			err = a.awaitIndex(ctx)
		case ChangeEnableTTL:
			err = ensureTTL(ctx, api, plan.Table, c.Target)
		case ChangeEnableStream:
			if err = a.await(ctx, "to take an update", tableIdle); err == nil {
				_, err = EnableStream(ctx, api, plan.Table, opts.Wait)
			}
		default:
			err = fmt.Errorf("tables: unknown change %q", c.Kind)
		}
		if err != nil {
			return fmt.Errorf("tables: adopting %s, step %d of %d (%s %s): %w", plan.Table, i+1, len(plan.Changes), c.Kind, c.Target, err)
		}
		a.report(true)
	}
	return nil
}

// applying is one change being applied.
type applying struct {
	api      AdoptAPI
	table    string
	opts     AdoptOptions
	progress Progress
	start    time.Time
}

func (a *applying) report(done bool) {
	if a.opts.Progress == nil {
		return
	}
	p := a.progress
	p.Elapsed, p.Done = time.Since(a.start), done
	a.opts.Progress(p)
}

func (a *applying) createIndex(ctx context.Context) error {
	c := a.progress.Change
	var present *types.GlobalSecondaryIndexDescription
	err := a.await(ctx, "to take a new index", func(t *types.TableDescription) (bool, *types.GlobalSecondaryIndexDescription) {
		present = findIndex(t, c.Target)
		return tableIdle(t)
	})
	if err != nil {
		return err
	}
	switch {
	case present != nil && !sameKeys(present.KeySchema, c.Index.KeySchema):
		return &AdoptError{Table: a.table, Subject: "index " + c.Target,
			Reason: fmt.Sprintf("an index of that name appeared meanwhile with the key %s", describeKeys(present.KeySchema))}
	case present == nil:
		_, err := a.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(a.table), AttributeDefinitions: c.AttributeDefinitions,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: c.Index}}})
		if err != nil {
			return fmt.Errorf("create index %s: %w", c.Target, err)
		}
	}
	return a.awaitIndex(ctx)
}

// awaitIndex waits until the change's index is ACTIVE and the table too.
func (a *applying) awaitIndex(ctx context.Context) error {
	name := a.progress.Change.Target
	return a.await(ctx, "to finish index "+name+"'s backfill", func(t *types.TableDescription) (bool, *types.GlobalSecondaryIndexDescription) {
		g := findIndex(t, name)
		return g != nil && g.IndexStatus == types.IndexStatusActive && t.TableStatus == types.TableStatusActive, g
	})
}

// tableIdle reports whether the table is ACTIVE with no index being
// created or deleted, and else the index it must finish first.
func tableIdle(t *types.TableDescription) (bool, *types.GlobalSecondaryIndexDescription) {
	for i, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus == types.IndexStatusCreating || g.IndexStatus == types.IndexStatusDeleting {
			return false, &t.GlobalSecondaryIndexes[i]
		}
	}
	return t.TableStatus == types.TableStatusActive, nil
}

// await reads the table every PollInterval, reporting each read, until
// ready says so or Wait has passed.
func (a *applying) await(ctx context.Context, what string, ready func(*types.TableDescription) (bool, *types.GlobalSecondaryIndexDescription)) error {
	deadline := time.Now().Add(a.opts.Wait)
	timer := time.NewTimer(0)
	defer timer.Stop()
	delay := min(200*time.Millisecond, a.opts.PollInterval)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		desc, err := a.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.table)})
		if err != nil {
			return fmt.Errorf("describe %s: %w", a.table, err)
		}
		ok, g := ready(desc.Table)
		a.progress.TableStatus, a.progress.Index = desc.Table.TableStatus, g
		if ok {
			return nil
		}
		a.report(false)
		if !time.Now().Before(deadline) {
			state := string(desc.Table.TableStatus)
			if g != nil {
				state = fmt.Sprintf("index %s %s (backfilling: %t)", aws.ToString(g.IndexName), g.IndexStatus, aws.ToBool(g.Backfilling))
			}
			return fmt.Errorf("%w: %s did not get %s within %s, it is %s; what DynamoDB began goes on, and adopting again waits for it",
				ErrNotActive, a.table, what, a.opts.Wait, state)
		}
		timer.Reset(min(delay, time.Until(deadline)))
		delay = min(2*delay, a.opts.PollInterval)
	}
}

func findIndex(t *types.TableDescription, name string) *types.GlobalSecondaryIndexDescription {
	for i := range t.GlobalSecondaryIndexes {
		if aws.ToString(t.GlobalSecondaryIndexes[i].IndexName) == name {
			return &t.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

// provisioned reports whether the table bills provisioned capacity (a
// table created so before on-demand existed has no billing summary).
func provisioned(t *types.TableDescription) bool {
	return t.BillingModeSummary == nil || t.BillingModeSummary.BillingMode == types.BillingModeProvisioned
}
