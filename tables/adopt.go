package tables

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Adopting an existing table — one that holds an application's items,
// indexes and perhaps a TTL attribute of its own — is decide, then apply:
// Plan reads the table and returns every change it needs (the layout's
// missing indexes, TTL, the stream), what it leaves alone and what blocks
// it, as a value; Adopt applies a plan without blockers, one change at a
// time. Plan reads what it must to show that nothing of the
// application's changes (a sample of the items, or all of them with
// AdoptConfig.ScanAll; a sample of an existing index's items) and writes
// nothing; Adopt writes no item.

// PlanAPI is what Plan needs of DynamoDB (a *dynamodb.Client has it).
type PlanAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
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
	// ShareIndexes are indexes of the table that ddbworker did not create
	// and that the inbox may share: one of the layout's name and keys, or
	// one the inbox records would enter because they write its keys.
	// Without its name here, such an index blocks the plan: its items and
	// queries are the application's. Default: none.
	ShareIndexes []string
	// ScanAll reads every item of the table before an index is created or
	// TTL enabled, instead of the first SampleItems. Default: false.
	ScanAll bool
	// SampleItems is how many items Plan reads by default. Default:
	// DefaultAdoptSample.
	SampleItems int
	// TTLExistingItems enables TTL on the layout's attribute even though
	// items of the application carry it — DynamoDB then deletes those whose
	// value is epoch seconds in the past within about two days. Plan
	// counts them first. Default: false: such items block the plan.
	TTLExistingItems bool
	// ScanProgress, when set, is called after each page of the items Plan
	// reads.
	ScanProgress func(ScanProgress)
}

// DefaultAdoptSample is AdoptConfig.SampleItems' default: a Scan of the
// first thousand items, a few pages of one attribute each, costs little on
// any table.
const DefaultAdoptSample = 1000

// The names Plan proposes in place of a default name the table already
// uses (an index of the application's, attributes its items carry): no
// application uses them, and the attribute names stay short, since every
// inbox record carries them.
const (
	AdoptAggregateIndex = "ddbworker-aggregate"
	AdoptAttentionIndex = "ddbworker-attention"
	AdoptAggregatePK    = "ddbworkerGSI1PK"
	AdoptAggregateSK    = "ddbworkerGSI1SK"
	AdoptAttentionPK    = "ddbworkerGSI2PK"
	AdoptAttentionSK    = "ddbworkerGSI2SK"
	AdoptTTL            = "ddbworkerTTL"
)

// adoptPrefix starts every name of the proposed layout: an index or
// attribute named so is ddbworker's.
const adoptPrefix = "ddbworker"

// namespaced reports whether a name is one of ddbworker's own (its
// proposed names start so).
func namespaced(name string) bool { return strings.HasPrefix(name, adoptPrefix) }

// ScanProgress is where Plan's reading of the items is.
type ScanProgress struct {
	// Read is the number of items read so far, Pages the number of Scan
	// pages; Done is set on the last one.
	Read  int64
	Pages int
	Done  bool
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
	if c.SampleItems < 0 {
		errs = append(errs, errors.New("tables: AdoptConfig.SampleItems must not be negative"))
	}
	if c.SampleItems == 0 {
		c.SampleItems = DefaultAdoptSample
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
	// Option is the AdoptConfig field that allows it explicitly —
	// "ShareIndexes" (with the index OptionValue names), "ScanAll" or
	// "TTLExistingItems" — empty when none does.
	Option, OptionValue string
}

func (e *AdoptError) Error() string {
	msg := fmt.Sprintf("tables: table %s cannot be adopted: %s: %s", e.Table, e.Subject, e.Reason)
	switch {
	case e.Field != "" && e.Suggest != "":
		msg += fmt.Sprintf(" (Layout.%s %q fits)", e.Field, e.Suggest)
	case e.Field != "":
		msg += fmt.Sprintf(" (choose another Layout.%s)", e.Field)
	}
	switch {
	case e.Option != "" && e.OptionValue != "":
		msg += fmt.Sprintf(" (or AdoptConfig.%s %q)", e.Option, e.OptionValue)
	case e.Option != "":
		msg += fmt.Sprintf(" (or AdoptConfig.%s)", e.Option)
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
	// Items is what Plan read of the table's items: the layout's
	// attributes on the application's items, checked before an index is
	// created or TTL enabled on them.
	Items ItemCheck
	// Proposed is, when something blocks the plan, the layout with a name
	// of its own (AdoptAggregateIndex, …) in place of each index or
	// attribute name the table already uses, and the table's key and TTL
	// attribute where it decides them: adopting with it changes nothing of
	// the application's. Zero when nothing blocks.
	Proposed Layout
}

// ItemCheck is what Plan read of the table's items.
type ItemCheck struct {
	// Read is how many items were read (the application's and
	// ddbworker's); Complete reports that they are all the table holds
	// (a full scan, or a sample that reached the end); ScanAll that every
	// item was to be read.
	Read     int64
	Complete bool
	ScanAll  bool
	// Attributes are the attributes checked, in the layout's order.
	Attributes []AttributeCheck
}

// AttributeCheck is what Plan found of one attribute on the application's
// items (ddbworker's own — inbox, rejection, settings, outbox and effect
// records — are not counted).
type AttributeCheck struct {
	Name string
	// Field is the Layout field that names it.
	Field string
	// Want is the type the layout needs of it: S for an index key, N for
	// the TTL attribute.
	Want types.ScalarAttributeType
	// Carrying counts the items that carry it, Other those of them whose
	// value is of another type than Want, Past those whose value is a
	// number of epoch seconds in the past (the TTL attribute).
	Carrying, Other, Past int64
	// Example is one such item's key, for a person: of another type when
	// Other > 0, else in the past when Past > 0.
	Example string
}

// Err joins the blockers (each an *AdoptError); nil when there are none.
func (p AdoptPlan) Err() error {
	errs := make([]error, len(p.Blockers))
	for i, b := range p.Blockers {
		errs[i] = b
	}
	return errors.Join(errs...)
}

func (p *AdoptPlan) block(subject, reason, field, suggest string) *AdoptError {
	e := &AdoptError{Table: p.Table, Subject: subject, Reason: reason, Field: field, Suggest: suggest}
	p.Blockers = append(p.Blockers, e)
	return e
}

// Plan reads the table and returns what adopting it with cfg.Layout
// takes. It writes nothing. The rules are Verify's — the table's key must
// be the layout's (string keys: a key schema cannot change), an index of
// the layout's name must have the layout's keys (any projection holds
// them), the layout's key attributes must be strings wherever the table
// defines them, and TTL must be on the layout's attribute (when the table
// has TTL on another, the layout must name it: DynamoDB allows one TTL
// attribute per table and forbids changing it while enabled) — and the
// application's own: nothing of the application's changes unless cfg says
// so.
//
//   - An existing index of the layout's name and keys is shared only when
//     it is ddbworker's — named as ddbworker's (AdoptAggregateIndex, …),
//     or a sample of its items (the first 100) are all inbox records, or
//     it is empty and KEYS_ONLY (as ddbworker creates them; nothing of the
//     application's is in it) — or cfg.ShareIndexes names it. So is an
//     index of the application's, global or local, that the inbox records
//     would enter because they write all of its keys.
//   - Before an index is created, the application's items are read (the
//     first cfg.SampleItems, or all with cfg.ScanAll; the layout's
//     attributes only): one that carries a key of the new index with
//     another type than a string blocks, since DynamoDB would refuse its
//     writes once the index exists.
//   - TTL is enabled only when no item of the application's carries the
//     attribute (all of them read, unless it is named as ddbworker's), or
//     cfg.TTLExistingItems says so after the plan counts them.
//
// Missing indexes are created KEYS_ONLY, within cfg.MaxIndexes. An error is
// the SDK's (a missing table: *types.ResourceNotFoundException) or an
// invalid cfg; what blocks adoption is in the plan's Blockers, and
// Proposed is then a layout of names the table does not use.
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
	a := &planning{ctx: ctx, api: api, cfg: cfg, t: t, taken: map[string]bool{}}
	p.planKey(t)
	if err := p.planIndexes(a); err != nil {
		return AdoptPlan{}, err
	}
	enableTTL := p.planTTL(ttl.TimeToLiveDescription)
	if cfg.Stream {
		p.planStream(t)
	}
	if err := p.checkItems(a, enableTTL); err != nil {
		return AdoptPlan{}, err
	}
	p.Kept = append(p.Kept, Kept{Target: "items", Detail: fmt.Sprintf("about %d, %d bytes (DescribeTable's counts, refreshed every few hours): %s; none is written",
		aws.ToInt64(t.ItemCount), aws.ToInt64(t.TableSizeBytes), p.Items.describe())})
	if len(p.Blockers) > 0 {
		p.Proposed = a.propose(&p)
	}
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

// planning is what Plan reads as it goes.
type planning struct {
	ctx context.Context
	api PlanAPI
	cfg AdoptConfig
	t   *types.TableDescription
	// taken are the index and attribute names the application uses: its
	// indexes and their keys, the attributes its items carry.
	taken map[string]bool
}

// ownedPrefixes start the partition keys of ddbworker's own items: inbox
// records, rejections, the settings and health items, outbox and effect
// records. The item check counts the others: the application's.
var ownedPrefixes = []string{"IDEMP#", "REJECT#", "DDBWORKER#", "OUTBOX#", "EFFECT#"}

func ownedItem(pk string) bool {
	for _, pre := range ownedPrefixes {
		if strings.HasPrefix(pk, pre) {
			return true
		}
	}
	return false
}

// inboxRecordKey reports whether a key is an inbox record's (or a
// rejection's): the only items ddbworker's indexes hold.
func inboxRecordKey(pk, sk string) bool {
	return (strings.HasPrefix(pk, "IDEMP#") && strings.HasPrefix(sk, "WORKER#")) || (strings.HasPrefix(pk, "REJECT#") && sk == "REJECT")
}

// keyProjection projects the table's key.
func (p *AdoptPlan) keyProjection(more ...string) (expression.Expression, error) {
	names := []expression.NameBuilder{expression.Name(p.Layout.SortKey)}
	seen := map[string]bool{p.Layout.PartitionKey: true, p.Layout.SortKey: true}
	for _, n := range more {
		if !seen[n] {
			seen[n] = true
			names = append(names, expression.Name(n))
		}
	}
	return expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(p.Layout.PartitionKey), names...)).Build()
}

// itemKey shows an item's key, for a person.
func (p *AdoptPlan) itemKey(it map[string]types.AttributeValue) (pk, sk, shown string) {
	str := func(n string) string {
		if v, ok := it[n].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	pk, sk = str(p.Layout.PartitionKey), str(p.Layout.SortKey)
	return pk, sk, fmt.Sprintf("%s=%s %s=%s", p.Layout.PartitionKey, pk, p.Layout.SortKey, sk)
}

// ownerSample is how many items of an existing index Plan reads to tell
// whose it is.
const ownerSample = 100

// whose tells whether an existing index of the layout's name and keys is
// ddbworker's, and why (for a person).
func (p *AdoptPlan) whose(a *planning, g types.GlobalSecondaryIndexDescription) (ours bool, why string, err error) {
	name := aws.ToString(g.IndexName)
	if namespaced(name) {
		return true, "named as ddbworker's", nil
	}
	proj, err := p.keyProjection()
	if err != nil {
		return false, "", err
	}
	out, err := a.api.Scan(a.ctx, &dynamodb.ScanInput{TableName: aws.String(p.Table), IndexName: aws.String(name), Limit: aws.Int32(ownerSample),
		ProjectionExpression: proj.Projection(), ExpressionAttributeNames: proj.Names()})
	if err != nil {
		return false, "", fmt.Errorf("tables: reading a sample of index %s of %s: %w", name, p.Table, err)
	}
	var records, others int
	var example string
	for _, it := range out.Items {
		pk, sk, shown := p.itemKey(it)
		if inboxRecordKey(pk, sk) {
			records++
			continue
		}
		if others++; example == "" {
			example = shown
		}
	}
	switch {
	case others > 0:
		return false, fmt.Sprintf("%d of the first %d items in it are not inbox records (one: %s)", others, len(out.Items), example), nil
	case records > 0:
		return true, fmt.Sprintf("the first %d items in it are all inbox records", records), nil
	}
	if g.Projection != nil && g.Projection.ProjectionType == types.ProjectionTypeKeysOnly {
		// As ddbworker creates its indexes, and nothing of the
		// application's is in it: sharing it changes no answer its
		// queries get.
		return true, "empty and KEYS_ONLY, as ddbworker creates its indexes", nil
	}
	return false, "it holds no item, and it projects " + projectionText(g) + ", not KEYS_ONLY as ddbworker's indexes", nil
}

// enteredIndex is an index of the table that the inbox records would
// enter: they write every one of its keys, with its type.
type enteredIndex struct {
	keys []string
	// field is the first of its keys that a Layout field names and may
	// rename (not the table's key), "" for none.
	field string
}

// enteredIndexes are the table's indexes, other than the layout's, that
// the inbox records enter, by name.
func enteredIndexes(l Layout, t *types.TableDescription) map[string]enteredIndex {
	written := map[string]types.ScalarAttributeType{l.PartitionKey: types.ScalarAttributeTypeS, l.SortKey: types.ScalarAttributeTypeS, l.TTL: types.ScalarAttributeTypeN}
	renames := map[string]string{}
	for _, a := range l.keyAttributes() {
		written[a.name] = types.ScalarAttributeTypeS
		if a.field != "PartitionKey" && a.field != "SortKey" {
			renames[a.name] = a.field
		}
	}
	mine := map[string]bool{l.AggregateIndex: true, l.AttentionIndex: true}
	typ := attributeTypes(t.AttributeDefinitions)
	out := map[string]enteredIndex{}
	for _, g := range tableIndexes(t) {
		if mine[aws.ToString(g.IndexName)] {
			continue
		}
		var e enteredIndex
		enters := true
		for _, k := range g.KeySchema {
			name := aws.ToString(k.AttributeName)
			want, ok := written[name]
			if !ok {
				want, ok = recordAttributeType(name)
			}
			if !ok || typ[name] != want {
				enters = false
				break
			}
			e.keys = append(e.keys, name)
			if e.field == "" {
				e.field = renames[name]
			}
		}
		if enters {
			out[aws.ToString(g.IndexName)] = e
		}
	}
	return out
}

// localIndex is the status tableIndexes gives a local secondary index
// (which has none): it shows as "(PK, x) ALL, local".
const localIndex types.IndexStatus = "local"

// tableIndexes are the table's global secondary indexes, then its local
// ones (as global descriptions, IndexStatus localIndex): the inbox records
// enter a local index too when they write its sort key.
func tableIndexes(t *types.TableDescription) []types.GlobalSecondaryIndexDescription {
	out := slices.Clone(t.GlobalSecondaryIndexes)
	for _, l := range t.LocalSecondaryIndexes {
		out = append(out, types.GlobalSecondaryIndexDescription{IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: l.Projection, IndexStatus: localIndex})
	}
	return out
}

func projectionText(g types.GlobalSecondaryIndexDescription) string {
	if g.Projection == nil {
		return ""
	}
	return string(g.Projection.ProjectionType)
}

func (p *AdoptPlan) planIndexes(a *planning) error {
	t, cfg := a.t, a.cfg
	have := map[string]types.GlobalSecondaryIndexDescription{}
	for _, g := range t.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = g
	}
	mine := map[string]bool{}
	for _, ix := range p.Layout.indexes() {
		mine[ix.name] = true
	}
	shared := map[string]bool{}
	for _, name := range cfg.ShareIndexes {
		shared[name] = true
		if !slices.ContainsFunc(tableIndexes(t), func(g types.GlobalSecondaryIndexDescription) bool { return aws.ToString(g.IndexName) == name }) {
			p.block("index "+name, "it is named to be shared (AdoptConfig.ShareIndexes), but the table has no index of that name", "", "")
		}
	}
	entered := enteredIndexes(p.Layout, t)
	theirs := slices.SortedFunc(slices.Values(tableIndexes(t)), func(a, b types.GlobalSecondaryIndexDescription) int {
		return strings.Compare(aws.ToString(a.IndexName), aws.ToString(b.IndexName))
	})
	for _, g := range theirs {
		name := aws.ToString(g.IndexName)
		if mine[name] {
			continue
		}
		a.taken[name] = true
		for _, k := range g.KeySchema {
			a.taken[aws.ToString(k.AttributeName)] = true
		}
		shape := fmt.Sprintf("%s %s, %s", describeKeys(g.KeySchema), projectionText(g), g.IndexStatus)
		e, enters := entered[name]
		switch {
		case enters && shared[name]:
			p.Kept = append(p.Kept, Kept{Target: "index " + name, Detail: fmt.Sprintf("yours, %s: shared as told — the inbox records enter it (they write %s)", shape, strings.Join(e.keys, ", "))})
		case enters:
			b := p.block("index "+name, fmt.Sprintf("your index %s %s is keyed on %s, which the inbox records write too: they would enter it, beside your items",
				name, shape, strings.Join(e.keys, ", ")), e.field, proposedName(e.field))
			b.Option, b.OptionValue = "ShareIndexes", name
		default:
			p.Kept = append(p.Kept, Kept{Target: "index " + name, Detail: "yours, " + shape + ": untouched"})
		}
	}
	for _, k := range recordKeyedIndexes(p.Layout, t) {
		if k.clash {
			p.block("index "+k.index, k.clashProblem(), "", "")
		}
	}
	nonString := map[string]typedName{}
	for _, a := range nonStringKeys(p.Layout, t.AttributeDefinitions) {
		nonString[a.name] = a
	}
	creates := 0
	for _, ix := range p.Layout.indexes() {
		blocked := false
		for _, k := range []layoutName{ix.pk, ix.sk} {
			if at, ok := nonString[k.name]; ok {
				blocked = true
				a.taken[k.name] = true
				p.block("attribute "+k.name, fmt.Sprintf("the table defines it as type %s (a key of the table or of one of its indexes), and the index %s's keys are strings", at.typ, ix.name), k.field, proposedName(k.field))
			}
		}
		got, exists := have[ix.name]
		switch {
		case blocked:
		case exists && !sameKeys(got.KeySchema, ix.keySchema()):
			a.taken[ix.name] = true
			p.block("index "+ix.name, fmt.Sprintf("an index of that name exists with the key %s, and the layout's needs (%s, %s); an index's key cannot change",
				describeKeys(got.KeySchema), ix.pk.name, ix.sk.name), ix.field, proposedName(ix.field))
		case exists && got.IndexStatus == types.IndexStatusDeleting:
			p.block("index "+ix.name, "it is being deleted: run the adoption again once it is gone", "", "")
		case exists && got.IndexStatus == types.IndexStatusCreating:
			p.Changes = append(p.Changes, Change{Kind: ChangeAwaitIndex, Target: ix.name,
				Detail: fmt.Sprintf("%s, being created: waits for its backfill", describeKeys(got.KeySchema))})
		case exists:
			shape := fmt.Sprintf("%s %s, %s", describeKeys(got.KeySchema), projectionText(got), got.IndexStatus)
			if !p.KeyFits {
				p.Kept = append(p.Kept, Kept{Target: "index " + ix.name, Detail: shape + ": whose it is is read once the table's key fits the layout"})
				break
			}
			ours, why, err := p.whose(a, got)
			if err != nil {
				return err
			}
			switch {
			case ours:
				p.Kept = append(p.Kept, Kept{Target: "index " + ix.name, Detail: fmt.Sprintf("ddbworker's (%s), %s: fits", why, shape)})
			case shared[ix.name]:
				p.Kept = append(p.Kept, Kept{Target: "index " + ix.name, Detail: fmt.Sprintf("yours (%s), %s: shared as told — the inbox records enter it, projected %s", why, shape, projectionText(got))})
			default:
				a.taken[ix.name], a.taken[ix.pk.name], a.taken[ix.sk.name] = true, true, true
				b := p.block("index "+ix.name, fmt.Sprintf("an index of that name and keys exists, %s, and nothing shows it is ddbworker's: %s. The inbox records would enter it beside your items, projected %s, and the index's key attributes are yours too",
					shape, why, projectionText(got)), ix.field, proposedName(ix.field))
				b.Option, b.OptionValue = "ShareIndexes", ix.name
			}
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
	return nil
}

// proposedName is the name of its own Plan proposes for a Layout field,
// "" for a field it does not rename (the table's key, "").
func proposedName(field string) string {
	return map[string]string{"AggregateIndex": AdoptAggregateIndex, "AttentionIndex": AdoptAttentionIndex,
		"AggregatePK": AdoptAggregatePK, "AggregateSK": AdoptAggregateSK, "AttentionPK": AdoptAttentionPK, "AttentionSK": AdoptAttentionSK,
		"TTL": AdoptTTL}[field]
}

// layoutField points at a Layout field by name.
func layoutField(l *Layout, field string) *string {
	return map[string]*string{"PartitionKey": &l.PartitionKey, "SortKey": &l.SortKey,
		"AggregateIndex": &l.AggregateIndex, "AggregatePK": &l.AggregatePK, "AggregateSK": &l.AggregateSK,
		"AttentionIndex": &l.AttentionIndex, "AttentionPK": &l.AttentionPK, "AttentionSK": &l.AttentionSK, "TTL": &l.TTL}[field]
}

// propose is the plan's layout with each name a blocker fixes given its
// fitting value, and each index whose name or key attributes the
// application uses given names of ddbworker's own (the index and both
// keys).
func (a *planning) propose(p *AdoptPlan) Layout {
	l := p.Layout
	for _, b := range p.Blockers {
		if f := layoutField(&l, b.Field); f != nil && b.Suggest != "" {
			*f = b.Suggest
		}
	}
	for _, ix := range p.Layout.indexes() {
		// An index keyed on attributes of its own gets a name of its own
		// too: no index the application adds later takes it.
		own := a.taken[ix.pk.name] || a.taken[ix.sk.name]
		for _, n := range []layoutName{ix.layoutName, ix.pk, ix.sk} {
			if a.taken[n.name] || own {
				*layoutField(&l, n.field) = proposedName(n.field)
			}
		}
	}
	return l
}

// checkItems reads the application's items for the layout's attributes
// that a planned change would act on — the keys of each index to create
// (strings), the TTL attribute to enable (epoch seconds) — and blocks
// what would change an item of the application's.
func (p *AdoptPlan) checkItems(a *planning, enableTTL bool) error {
	creating := map[string]string{} // attribute → the index to create on it
	var checks []AttributeCheck
	for _, ix := range p.Layout.indexes() {
		if !slices.ContainsFunc(p.Changes, func(c Change) bool { return c.Kind == ChangeCreateIndex && c.Target == ix.name }) {
			continue
		}
		for _, k := range []layoutName{ix.pk, ix.sk} {
			creating[k.name] = ix.name
			checks = append(checks, AttributeCheck{Name: k.name, Field: k.field, Want: types.ScalarAttributeTypeS})
		}
	}
	if enableTTL {
		checks = append(checks, AttributeCheck{Name: p.Layout.TTL, Field: "TTL", Want: types.ScalarAttributeTypeN})
	}
	if len(checks) == 0 || !p.KeyFits {
		return nil
	}
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.Name
	}
	proj, err := p.keyProjection(names...)
	if err != nil {
		return err
	}
	cfg := a.cfg
	in := &dynamodb.ScanInput{TableName: aws.String(p.Table), ProjectionExpression: proj.Projection(), ExpressionAttributeNames: proj.Names()}
	now := float64(time.Now().Unix())
	check := ItemCheck{ScanAll: cfg.ScanAll}
	rank := make([]int, len(checks)) // of each example: 3 another type, 2 in the past, 1 carrying
	for pages := 1; ; pages++ {
		if !cfg.ScanAll {
			in.Limit = aws.Int32(int32(int64(cfg.SampleItems) - check.Read))
		}
		out, err := a.api.Scan(a.ctx, in)
		if err != nil {
			return fmt.Errorf("tables: reading the items of %s: %w", p.Table, err)
		}
		check.Read += int64(len(out.Items))
		for _, it := range out.Items {
			pk, _, shown := p.itemKey(it)
			if ownedItem(pk) {
				continue
			}
			for i := range checks {
				c := &checks[i]
				av, ok := it[c.Name]
				if !ok {
					continue
				}
				c.Carrying++
				r := 1
				switch n, isN := av.(*types.AttributeValueMemberN); {
				case c.Want == types.ScalarAttributeTypeS:
					if _, isS := av.(*types.AttributeValueMemberS); !isS {
						c.Other++
						r = 3
					}
				case !isN:
					c.Other++
				default:
					if v, err := strconv.ParseFloat(n.Value, 64); err == nil && v < now {
						c.Past++
						r = 2
					}
				}
				if r > rank[i] {
					rank[i], c.Example = r, shown
				}
			}
		}
		check.Complete = out.LastEvaluatedKey == nil
		done := check.Complete || (!cfg.ScanAll && check.Read >= int64(cfg.SampleItems))
		if cfg.ScanProgress != nil {
			cfg.ScanProgress(ScanProgress{Read: check.Read, Pages: pages, Done: done})
		}
		if done {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	check.Attributes = checks
	p.Items = check
	scope := check.scope()
	var unsure []string // index keys a sample could not clear
	for _, c := range checks {
		if c.Carrying > 0 {
			a.taken[c.Name] = true
		}
		switch {
		case c.Want == types.ScalarAttributeTypeS && c.Other > 0:
			p.block("attribute "+c.Name, fmt.Sprintf("%d items of yours (%s) carry it with another type than a string, e.g. %s: the new index %s would be keyed on it as a string, and DynamoDB would then refuse every write of such an item (\"Type mismatch for Index Key\")",
				c.Other, scope, c.Example, creating[c.Name]), c.Field, proposedName(c.Field))
		case c.Want == types.ScalarAttributeTypeS && c.Carrying > 0:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%d items of yours (%s) carry %s, a string, e.g. %s: they enter the new index %s beside the inbox records (another name for it, %q, keeps them apart)",
				c.Carrying, scope, c.Name, c.Example, creating[c.Name], proposedName(c.Field)))
		case c.Want == types.ScalarAttributeTypeS && !check.Complete:
			unsure = append(unsure, c.Name)
		case c.Want == types.ScalarAttributeTypeN:
			p.judgeTTL(c, check, a)
		}
	}
	if len(unsure) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("none of the first %d items carries %s, but the table holds about %d and the rest were not read: an item further on that carries one of them with another type than a string would have its writes refused once the index exists (a full scan — ScanAll — reads them all)",
			check.Read, strings.Join(unsure, ", "), aws.ToInt64(a.t.ItemCount)))
	}
	return nil
}

// judgeTTL blocks enabling TTL on an attribute items of the application's
// carry, unless told to, and on one a sample could not show free.
func (p *AdoptPlan) judgeTTL(c AttributeCheck, check ItemCheck, a *planning) {
	scope := check.scope()
	later, other := c.Carrying-c.Other-c.Past, c.Other
	counts := fmt.Sprintf("%d items of yours (%s) carry %s: %d a number of epoch seconds in the past, which DynamoDB would delete within about two days of TTL being enabled; %d a later one, deleted when it comes; %d not a number (TTL ignores them); e.g. %s",
		c.Carrying, scope, c.Name, c.Past, later, other, c.Example)
	switch {
	case c.Carrying > 0 && !a.cfg.TTLExistingItems:
		b := p.block("TTL", counts+". TTL is enabled on an attribute items of yours carry only when told to", "TTL", AdoptTTL)
		b.Option = "TTLExistingItems"
	case c.Carrying > 0:
		p.Warnings = append(p.Warnings, "TTL is enabled as told although "+counts)
	case !check.Complete && !namespaced(c.Name) && !a.cfg.TTLExistingItems:
		b := p.block("TTL", fmt.Sprintf("none of the first %d items carries %s, but the table holds about %d and the rest were not read: TTL is enabled on an attribute only once no item of yours is shown to carry it",
			check.Read, c.Name, aws.ToInt64(a.t.ItemCount)), "TTL", AdoptTTL)
		b.Option = "ScanAll"
	default:
		for i := range p.Changes {
			if p.Changes[i].Kind == ChangeEnableTTL {
				p.Changes[i].Detail += fmt.Sprintf("; no item of yours carries it (%s)", scope)
			}
		}
	}
}

// scope says which items were read, for a person.
func (c ItemCheck) scope() string {
	switch {
	case c.Complete && c.ScanAll:
		return fmt.Sprintf("all %d items read", c.Read)
	case c.Complete:
		return fmt.Sprintf("all %d items read, the whole table", c.Read)
	}
	return fmt.Sprintf("of the first %d items read", c.Read)
}

// describe says what Plan read of the items, for a person.
func (c ItemCheck) describe() string {
	if len(c.Attributes) == 0 {
		return "none read"
	}
	names := make([]string, len(c.Attributes))
	for i, a := range c.Attributes {
		names[i] = a.Name
	}
	what := fmt.Sprintf("the first %d read (a sample; a full scan reads them all)", c.Read)
	if c.Complete {
		what = fmt.Sprintf("all %d read", c.Read)
	}
	return fmt.Sprintf("%s, for %s only", what, strings.Join(names, ", "))
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

// planTTL plans TTL on the layout's attribute, and reports whether it
// plans to enable it (checkItems then reads the items that carry it).
func (p *AdoptPlan) planTTL(d *types.TimeToLiveDescription) bool {
	status, attr := types.TimeToLiveStatusDisabled, ""
	if d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	switch status {
	case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
		switch {
		case attr == p.Layout.TTL && namespaced(attr):
			p.Kept = append(p.Kept, Kept{Target: "TTL", Detail: fmt.Sprintf("%s on %s, ddbworker's: the inbox records expire by it (epoch seconds)", status, attr)})
			return false
		case attr == p.Layout.TTL:
			p.Kept = append(p.Kept, Kept{Target: "TTL", Detail: fmt.Sprintf("%s on %s: the inbox records expire by it too (epoch seconds); yours as before", status, attr)})
			return false
		}
		p.block("TTL", fmt.Sprintf("TTL is %s on %s, and DynamoDB allows one TTL attribute per table and forbids changing it while enabled: the inbox must use it too — its records then carry %s (epoch seconds) and expire by it; your items keep expiring as before, nothing of yours changes",
			status, attr, attr), "TTL", attr)
	case types.TimeToLiveStatusDisabling:
		p.block("TTL", fmt.Sprintf("TTL on %s is being disabled, and DynamoDB enables it again only once that is done (up to an hour): run the adoption again then", attr), "", "")
	default:
		p.Changes = append(p.Changes, Change{Kind: ChangeEnableTTL, Target: p.Layout.TTL, Detail: fmt.Sprintf("UpdateTimeToLive: TTL on %s (epoch seconds)", p.Layout.TTL)})
		return true
	}
	return false
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
