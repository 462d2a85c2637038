package tables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbworker/ddbworker/internal/attr"
)

// Layout names the attributes and indexes the inbox's keys live in: the
// table's key, the two indexes and the TTL attribute. The defaults are
// ddbworker's own table's (PK, SK, GSI1, GSI2, ttl); an application table
// that holds the inbox records beside its own items sets its own names.
// Every other attribute of an inbox record has a fixed name (below): they
// live only on inbox records.
type Layout struct {
	// PartitionKey and SortKey are the table's key attributes (strings).
	// Defaults: PK and SK.
	PartitionKey, SortKey string
	// AggregateIndex is the aggregate index (KEYS_ONLY) and AggregatePK,
	// AggregateSK its key attributes (strings). Defaults: GSI1, GSI1PK,
	// GSI1SK.
	AggregateIndex, AggregatePK, AggregateSK string
	// AttentionIndex is the sparse attention index (KEYS_ONLY) and
	// AttentionPK, AttentionSK its key attributes (strings). Defaults: GSI2,
	// GSI2PK, GSI2SK.
	AttentionIndex, AttentionPK, AttentionSK string
	// TTL is the table's time-to-live attribute (epoch seconds). Default:
	// ttl.
	TTL string
}

// DefaultLayout is ddbworker's own table's layout.
func DefaultLayout() Layout {
	return Layout{PartitionKey: "PK", SortKey: "SK",
		AggregateIndex: "GSI1", AggregatePK: "GSI1PK", AggregateSK: "GSI1SK",
		AttentionIndex: "GSI2", AttentionPK: "GSI2PK", AttentionSK: "GSI2SK", TTL: "ttl"}
}

// WithDefaults fills empty names with the defaults and checks that the
// attribute names are distinct and none is one of the inbox record's own.
func (l Layout) WithDefaults() (Layout, error) {
	d := DefaultLayout()
	for _, f := range []struct {
		v   *string
		def string
	}{{&l.PartitionKey, d.PartitionKey}, {&l.SortKey, d.SortKey},
		{&l.AggregateIndex, d.AggregateIndex}, {&l.AggregatePK, d.AggregatePK}, {&l.AggregateSK, d.AggregateSK},
		{&l.AttentionIndex, d.AttentionIndex}, {&l.AttentionPK, d.AttentionPK}, {&l.AttentionSK, d.AttentionSK}, {&l.TTL, d.TTL}} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, n := range []string{l.PartitionKey, l.SortKey, l.AggregatePK, l.AggregateSK, l.AttentionPK, l.AttentionSK, l.TTL} {
		if seen[n] {
			errs = append(errs, fmt.Errorf("tables: Layout names attribute %q twice", n))
		}
		seen[n] = true
		if recordAttribute(n) {
			errs = append(errs, fmt.Errorf("tables: Layout attribute %q is an inbox record attribute", n))
		}
	}
	if l.AggregateIndex == l.AttentionIndex {
		errs = append(errs, fmt.Errorf("tables: Layout names index %q twice", l.AggregateIndex))
	}
	return l, errors.Join(errs...)
}

func recordAttribute(n string) bool {
	_, ok := recordAttributeType(n)
	return ok
}

// recordAttributeType is the type the inbox's records write attribute n
// with, and whether they write it at all.
func recordAttributeType(n string) (types.ScalarAttributeType, bool) {
	switch n {
	case attr.Status, attr.RequestHash, attr.MessageType, attr.AggregateType, attr.AggregateID, attr.CorrelationID,
		attr.CausationID, attr.Producer, attr.IdempotencyKey, attr.FirstSeenAt, attr.LastSeenAt, attr.StartedAt, attr.CompletedAt,
		attr.FailedAt, attr.LeaseOwner, attr.LeaseToken, attr.FailureCode, attr.FailureMessage, attr.Outcome, attr.ResultRef,
		attr.SQSMessageID, attr.ReopenedAt, attr.ReopenedBy, attr.ReopenReason, attr.DiscardedAt, attr.DiscardedBy, attr.DiscardReason:
		return types.ScalarAttributeTypeS, true
	case attr.SchemaVersion, attr.Attempts, attr.Deliveries, attr.Takeovers, attr.LeaseExpiresAt:
		return types.ScalarAttributeTypeN, true
	}
	return "", false
}

// recordKeyedIndex is a key attribute, of one of the table's own indexes,
// that the inbox records write.
type recordKeyedIndex struct {
	index, attr string
	// typ is the index key's type; clash says the records write attr with
	// another (DynamoDB would refuse every record write).
	typ   types.ScalarAttributeType
	clash bool
}

// recordKeyedIndexes are the key attributes of the table's indexes, other
// than the layout's, that the inbox records write: with another type
// DynamoDB refuses every record write ("Type mismatch for Index Key").
// (Whether the records enter such an index is enteredIndexes', which also
// counts the layout's attributes.)
func recordKeyedIndexes(l Layout, t *types.TableDescription) []recordKeyedIndex {
	mine := map[string]bool{}
	for _, ix := range l.indexes() {
		mine[ix.name] = true
	}
	typ := attributeTypes(t.AttributeDefinitions)
	var out []recordKeyedIndex
	for _, g := range t.GlobalSecondaryIndexes {
		if mine[aws.ToString(g.IndexName)] {
			continue
		}
		for _, k := range g.KeySchema {
			name := aws.ToString(k.AttributeName)
			if want, ok := recordAttributeType(name); ok {
				out = append(out, recordKeyedIndex{index: aws.ToString(g.IndexName), attr: name, typ: typ[name], clash: typ[name] != want})
			}
		}
	}
	slices.SortFunc(out, func(a, b recordKeyedIndex) int { return strings.Compare(a.index+"\x00"+a.attr, b.index+"\x00"+b.attr) })
	return out
}

func (k recordKeyedIndex) clashProblem() string {
	want, _ := recordAttributeType(k.attr)
	return fmt.Sprintf("index %s is keyed on %s of type %s, which the inbox records write as type %s: DynamoDB would refuse every record (the record's attribute names are fixed; key that index on another attribute, or keep the inbox in another table)",
		k.index, k.attr, k.typ, want)
}

// Sentinel errors.
var (
	// ErrIncompatible reports an existing table whose keys, indexes or TTL
	// attribute differ from ddbworker's layout.
	ErrIncompatible = errors.New("tables: incompatible table")
	// ErrNotActive reports a table that did not become ACTIVE in time.
	ErrNotActive = errors.New("tables: table not active")
)

// IncompatibleError says what differs.
type IncompatibleError struct {
	Table   string
	Problem string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("tables: table %s does not fit the inbox layout: %s", e.Table, e.Problem)
}

// Unwrap returns ErrIncompatible.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }

// API is what Ensure needs of DynamoDB.
type API interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// DefaultWaitTimeout is Config.WaitTimeout's default, and EnableStream's
// wait when given none: how long a table may take to become ACTIVE.
const DefaultWaitTimeout = 5 * time.Minute

// Config configures Ensure.
type Config struct {
	// Name is the table name. Required.
	Name string
	// Layout names the key, index and TTL attributes. Default:
	// DefaultLayout().
	Layout Layout
	// WaitTimeout bounds the wait for ACTIVE. Default: DefaultWaitTimeout.
	WaitTimeout time.Duration
	// Tags are added when the table is created. Default: none.
	Tags map[string]string
}

func (c *Config) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("tables: Config.Name is required"))
	} else if len(c.Name) < 3 || len(c.Name) > 255 {
		errs = append(errs, fmt.Errorf("tables: Config.Name %q must be 3..255 characters", c.Name))
	}
	if c.WaitTimeout < 0 {
		errs = append(errs, errors.New("tables: Config.WaitTimeout must not be negative"))
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	var err error
	if c.Layout, err = c.Layout.WithDefaults(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// layoutName is one attribute or index name of a layout and the Layout
// field that holds it.
type layoutName struct{ field, name string }

// keyAttributes are the layout's string key attributes: the table's and
// both indexes'.
func (l Layout) keyAttributes() []layoutName {
	return []layoutName{{"PartitionKey", l.PartitionKey}, {"SortKey", l.SortKey},
		{"AggregatePK", l.AggregatePK}, {"AggregateSK", l.AggregateSK},
		{"AttentionPK", l.AttentionPK}, {"AttentionSK", l.AttentionSK}}
}

// layoutIndex is one of the layout's two indexes: its name and its
// partition and sort key, each with the Layout field that holds it.
type layoutIndex struct {
	layoutName
	pk, sk layoutName
}

// indexes are the layout's indexes: the aggregate index, then the
// attention index.
func (l Layout) indexes() []layoutIndex {
	return []layoutIndex{
		{layoutName{"AggregateIndex", l.AggregateIndex}, layoutName{"AggregatePK", l.AggregatePK}, layoutName{"AggregateSK", l.AggregateSK}},
		{layoutName{"AttentionIndex", l.AttentionIndex}, layoutName{"AttentionPK", l.AttentionPK}, layoutName{"AttentionSK", l.AttentionSK}},
	}
}

func stringAttribute(n string) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
}

func compositeKey(pk, sk string) []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
	}
}

// keySchema is the index's key schema.
func (ix layoutIndex) keySchema() []types.KeySchemaElement {
	return compositeKey(ix.pk.name, ix.sk.name)
}

// Definition returns the CreateTable input of an inbox table named name
// with layout l (on-demand billing; both indexes KEYS_ONLY).
func Definition(name string, l Layout) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{stringAttribute(l.PartitionKey), stringAttribute(l.SortKey)},
		KeySchema:            compositeKey(l.PartitionKey, l.SortKey),
	}
	for _, ix := range l.indexes() {
		in.AttributeDefinitions = append(in.AttributeDefinitions, stringAttribute(ix.pk.name), stringAttribute(ix.sk.name))
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{IndexName: aws.String(ix.name),
			KeySchema: ix.keySchema(), Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}})
	}
	return in
}

// Ensure makes the table exist with cfg.Layout and TTL on its TTL attribute.
// It creates the table when missing, waits until it is ACTIVE, checks an
// existing table's keys and indexes, and enables TTL unless it already is.
// Calling it again is a no-op; two concurrent callers both succeed.
func Ensure(ctx context.Context, api API, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Name)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		in := Definition(cfg.Name, cfg.Layout)
		for k, v := range cfg.Tags {
			in.Tags = append(in.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		_, err = api.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("tables: create %s: %w", cfg.Name, err)
		}
	case err != nil:
		return fmt.Errorf("tables: describe %s: %w", cfg.Name, err)
	default:
		if err := checkLayout(cfg.Name, cfg.Layout, desc.Table); err != nil {
			return err
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Name)}, cfg.WaitTimeout); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotActive, cfg.Name, err)
	}
	return ensureTTL(ctx, api, cfg.Name, cfg.Layout.TTL)
}

// ttlAPI is what turning TTL on needs of DynamoDB.
type ttlAPI interface {
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

func ensureTTL(ctx context.Context, api ttlAPI, name, attr string) error {
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("tables: describe TTL of %s: %w", name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if got := aws.ToString(d.AttributeName); got != attr {
				return &IncompatibleError{Table: name, Problem: fmt.Sprintf("TTL is on attribute %q, not %q", got, attr)}
			}
			return nil
		}
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	})
	// A concurrent Ensure may have enabled it between our describe and update.
	if err != nil && !strings.Contains(err.Error(), "already enabled") {
		return fmt.Errorf("tables: enable TTL on %s: %w", name, err)
	}
	return nil
}

// Verify checks that the existing table fits l: its key, both indexes
// (with their keys, projecting at least the keys — any projection does),
// the layout's key attributes strings wherever the table defines them, and
// TTL enabled on l's attribute (except on a global table with multi-Region
// strong consistency, which does not support TTL). It returns an *IncompatibleError naming each difference, or
// the SDK's error (a missing table: *types.ResourceNotFoundException).
func Verify(ctx context.Context, api API, name string, l Layout) error {
	l, err := l.WithDefaults()
	if err != nil {
		return err
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("tables: describe %s: %w", name, err)
	}
	var problems []string
	if err := checkLayout(name, l, desc.Table); err != nil {
		var inc *IncompatibleError
		if !errors.As(err, &inc) {
			return err
		}
		problems = append(problems, inc.Problem)
	}
	if desc.Table != nil && desc.Table.MultiRegionConsistency == types.MultiRegionConsistencyStrong {
		// A global table with multi-Region strong consistency (MRSC) does
		// not support TTL: its records do not expire (docs/operate.md,
		// "Global tables").
		if len(problems) > 0 {
			return &IncompatibleError{Table: name, Problem: strings.Join(problems, "; ")}
		}
		return nil
	}
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("tables: describe TTL of %s: %w", name, err)
	}
	d := ttl.TimeToLiveDescription
	switch {
	case d == nil || (d.TimeToLiveStatus != types.TimeToLiveStatusEnabled && d.TimeToLiveStatus != types.TimeToLiveStatusEnabling):
		problems = append(problems, fmt.Sprintf("TTL is not enabled (want it on attribute %q)", l.TTL))
	case aws.ToString(d.AttributeName) != l.TTL:
		problems = append(problems, fmt.Sprintf("TTL is on attribute %q, not %q", aws.ToString(d.AttributeName), l.TTL))
	}
	if len(problems) > 0 {
		return &IncompatibleError{Table: name, Problem: strings.Join(problems, "; ")}
	}
	return nil
}

func checkLayout(name string, l Layout, t *types.TableDescription) error {
	if t == nil {
		return &IncompatibleError{Table: name, Problem: "no description"}
	}
	want := Definition(name, l)
	var problems []string
	if !sameKeys(t.KeySchema, want.KeySchema) {
		problems = append(problems, fmt.Sprintf("its key is %s, not (%s, %s)", describeKeys(t.KeySchema), l.PartitionKey, l.SortKey))
	}
	have := map[string]types.GlobalSecondaryIndexDescription{}
	for _, g := range t.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = g
	}
	for _, g := range want.GlobalSecondaryIndexes {
		idx := aws.ToString(g.IndexName)
		got, ok := have[idx]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("it has no index %s (%s, %s)", idx, aws.ToString(g.KeySchema[0].AttributeName), aws.ToString(g.KeySchema[1].AttributeName)))
		case !sameKeys(got.KeySchema, g.KeySchema):
			problems = append(problems, fmt.Sprintf("index %s's key is %s, not (%s, %s)", idx, describeKeys(got.KeySchema),
				aws.ToString(g.KeySchema[0].AttributeName), aws.ToString(g.KeySchema[1].AttributeName)))
		}
	}
	for _, a := range nonStringKeys(l, t.AttributeDefinitions) {
		problems = append(problems, fmt.Sprintf("attribute %s is of type %s, but the inbox's keys are strings", a.name, a.typ))
	}
	for _, k := range recordKeyedIndexes(l, t) {
		if k.clash {
			problems = append(problems, k.clashProblem())
		}
	}
	if len(problems) > 0 {
		return &IncompatibleError{Table: name, Problem: strings.Join(problems, "; ")}
	}
	return nil
}

// typedName is a layout key attribute the table defines with another type
// than a string.
type typedName struct {
	layoutName
	typ types.ScalarAttributeType
}

// nonStringKeys are the layout's key attributes that the table defines
// (as a key of itself or of one of its indexes) with a type other than a
// string: the inbox records could not be written under them.
func nonStringKeys(l Layout, defs []types.AttributeDefinition) []typedName {
	typ := attributeTypes(defs)
	var out []typedName
	for _, a := range l.keyAttributes() {
		if tp, ok := typ[a.name]; ok && tp != types.ScalarAttributeTypeS {
			out = append(out, typedName{a, tp})
		}
	}
	return out
}

// attributeTypes are the types of the table's defined attributes, by name.
func attributeTypes(defs []types.AttributeDefinition) map[string]types.ScalarAttributeType {
	typ := map[string]types.ScalarAttributeType{}
	for _, d := range defs {
		typ[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	return typ
}

func describeKeys(ks []types.KeySchemaElement) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = aws.ToString(k.AttributeName)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

func sameKeys(a, b []types.KeySchemaElement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aws.ToString(a[i].AttributeName) != aws.ToString(b[i].AttributeName) || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}

// KeyAttributes are the partition and sort key attributes the table's key
// schema names; ok is false when it has no sort key (no inbox fits it).
// The table knows its key: a reader of the inbox's recorded settings —
// stored under that key — takes the names from here, not from a flag.
func KeyAttributes(t *types.TableDescription) (pk, sk string, ok bool) {
	if t == nil {
		return "", "", false
	}
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			pk = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			sk = aws.ToString(k.AttributeName)
		}
	}
	return pk, sk, pk != "" && sk != ""
}
