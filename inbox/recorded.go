package inbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/tables"
)

// The store's settings that every writer and reader of the records must
// share — attention shards, the PROCESSING index, the TTLs — are recorded
// in the table itself, in one item (PK DDBWORKER#CONFIG, SK INBOX, under
// the store's key attribute names). The daemon's `tables create` records
// them, its `run` records them when the table has none, and every command
// — and a Lambda function at cold start — reads them, so a sweeper or an
// operator read can never silently use other shards, index or TTLs than
// the workers write with.
const (
	recordedPK = "DDBWORKER#CONFIG"
	recordedSK = "INBOX"

	recordedAtAttr = "recordedAt"
	recordedByAttr = "recordedBy"
)

// Setting is one recorded setting; its value is the item's attribute name.
type Setting string

// The recorded settings.
const (
	SettingAttentionShards Setting = "attentionShards"      // Store.AttentionShards, a number
	SettingIndexProcessing Setting = "indexProcessing"      // Store.IndexProcessing, a boolean
	SettingCompletedTTL    Setting = "completedTtlSeconds"  // Store.TTL.Completed, whole seconds
	SettingFailedTTL       Setting = "failedTtlSeconds"     // Store.TTL.Failed, whole seconds
	SettingProcessingTTL   Setting = "processingTtlSeconds" // Store.TTL.Processing, whole seconds
	// SettingRequestHash is Store.RequestHashVersion, a string "v2" or
	// "v3". Recorded after the layout: a record written before it holds
	// none, and its table's workers write DefaultRequestHashVersion.
	SettingRequestHash Setting = "requestHashVersion"
)

// The recorded layout: the names the records' indexes and TTL live under
// (strings). The table's own key attributes are not among them: the
// settings item is stored under them, so a reader takes them from the
// table's key schema (tables.KeyAttributes) before it can read the record.
const (
	SettingAggregateIndex Setting = "aggregateIndex"       // Store.Layout.AggregateIndex
	SettingAggregatePK    Setting = "aggregatePkAttribute" // Store.Layout.AggregatePK
	SettingAggregateSK    Setting = "aggregateSkAttribute" // Store.Layout.AggregateSK
	SettingAttentionIndex Setting = "attentionIndex"       // Store.Layout.AttentionIndex
	SettingAttentionPK    Setting = "attentionPkAttribute" // Store.Layout.AttentionPK
	SettingAttentionSK    Setting = "attentionSkAttribute" // Store.Layout.AttentionSK
	SettingTTLAttribute   Setting = "ttlAttribute"         // Store.Layout.TTL
)

// settingLayout names the recorded layout as a whole in a *RecordedError
// (its names are usable one by one but not together: one named twice).
const settingLayout Setting = "layout"

// Settings lists the recorded settings in a stable order: the store's,
// then its layout's, then the request hash version. A record written
// before the layout was recorded holds only the first five; its readers
// use their own layout, as before.
func Settings() []Setting {
	return []Setting{SettingAttentionShards, SettingIndexProcessing, SettingCompletedTTL, SettingFailedTTL, SettingProcessingTTL,
		SettingAggregateIndex, SettingAggregatePK, SettingAggregateSK, SettingAttentionIndex, SettingAttentionPK, SettingAttentionSK,
		SettingTTLAttribute, SettingRequestHash}
}

// LayoutSettings lists the recorded layout's settings.
func LayoutSettings() []Setting { return Settings()[5:12] }

// IsLayout reports whether setting is one of the layout's names.
func (setting Setting) IsLayout() bool { return setting.layoutField(&tables.Layout{}) != nil }

// layoutField is the Layout field setting names, nil for a setting of the
// store's.
func (setting Setting) layoutField(l *tables.Layout) *string {
	switch setting {
	case SettingAggregateIndex:
		return &l.AggregateIndex
	case SettingAggregatePK:
		return &l.AggregatePK
	case SettingAggregateSK:
		return &l.AggregateSK
	case SettingAttentionIndex:
		return &l.AttentionIndex
	case SettingAttentionPK:
		return &l.AttentionPK
	case SettingAttentionSK:
		return &l.AttentionSK
	case SettingTTLAttribute:
		return &l.TTL
	}
	return nil
}

// HasLayout reports whether the record holds the whole layout (a record
// written before the layout was recorded holds none of it).
func (r Recorded) HasLayout() bool {
	for _, s := range LayoutSettings() {
		if !r.Has(s) {
			return false
		}
	}
	return true
}

// SettingsAPI is what reading and recording the settings needs of DynamoDB
// (a *dynamodb.Client has it).
type SettingsAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Recorded is what a table records of its inbox store.
type Recorded struct {
	// Store is the store it was read with, each recorded setting in place
	// of the store's own.
	Store Store
	// Settings are the settings the record holds: all of them, unless a
	// version that knew fewer wrote it.
	Settings []Setting
	// At and By are when (FormatTime) and by whom (a program@host) the
	// settings were recorded.
	At, By string
}

// Has reports whether the record holds setting.
func (r Recorded) Has(setting Setting) bool {
	for _, s := range r.Settings {
		if s == setting {
			return true
		}
	}
	return false
}

// RecordedError is a recorded setting that ReadRecorded cannot use: not
// of its attribute type, not a number, or not a valid value of its Store
// field.
type RecordedError struct {
	Table   string
	Setting Setting
	Value   string // as recorded
	Err     error
}

func (e *RecordedError) Error() string {
	return fmt.Sprintf("inbox: table %s records an unusable %s %s: %v", e.Table, e.Setting, e.Value, e.Err)
}

func (e *RecordedError) Unwrap() error { return e.Err }

// recordedKey is the key of the settings item under the store's layout.
func (s Store) recordedKey() map[string]types.AttributeValue {
	l := s.layout()
	return map[string]types.AttributeValue{
		l.PartitionKey: &types.AttributeValueMemberS{Value: recordedPK},
		l.SortKey:      &types.AttributeValueMemberS{Value: recordedSK},
	}
}

// ReadRecorded reads the settings s.Table records (a strongly consistent
// read). ok is false when the table records none; an unusable recorded
// value is a *RecordedError.
func ReadRecorded(ctx context.Context, api SettingsAPI, s Store) (rec Recorded, ok bool, err error) {
	rec.Store = s
	if s.Table == "" {
		return rec, false, errors.New("inbox: Store.Table is required")
	}
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: s.recordedKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return rec, false, fmt.Errorf("inbox: reading the store settings recorded in table %s: %w", s.Table, err)
	}
	if len(out.Item) == 0 {
		return rec, false, nil
	}
	for _, setting := range Settings() {
		av, held := out.Item[string(setting)]
		if !held {
			continue
		}
		if err := setting.apply(&rec.Store, av); err != nil {
			return Recorded{Store: s}, false, &RecordedError{Table: s.Table, Setting: setting, Value: show(av), Err: err}
		}
		rec.Settings = append(rec.Settings, setting)
	}
	if slices.ContainsFunc(rec.Settings, Setting.IsLayout) {
		if _, err := rec.Store.Layout.WithDefaults(); err != nil {
			return Recorded{Store: s}, false, &RecordedError{Table: s.Table, Setting: settingLayout, Value: layoutText(rec.Store.Layout), Err: err}
		}
	}
	if v, isS := out.Item[recordedAtAttr].(*types.AttributeValueMemberS); isS {
		rec.At = v.Value
	}
	if v, isS := out.Item[recordedByAttr].(*types.AttributeValueMemberS); isS {
		rec.By = v.Value
	}
	return rec, true, nil
}

// apply sets setting in s from its recorded attribute, checked by Store's
// own rules (on an otherwise default store, so that only this setting can
// be at fault).
func (setting Setting) apply(s *Store, av types.AttributeValue) error {
	if field := setting.layoutField(&s.Layout); field != nil {
		// Each name alone; ReadRecorded checks the names together.
		v, isS := av.(*types.AttributeValueMemberS)
		switch {
		case !isS:
			return errors.New("not a string")
		case v.Value == "" || len(v.Value) > 255:
			return errors.New("must be 1..255 characters")
		}
		*field = v.Value
		return nil
	}
	if setting == SettingRequestHash {
		v, isS := av.(*types.AttributeValueMemberS)
		switch {
		case !isS:
			return errors.New("not a string")
		case v.Value != "v2" && v.Value != "v3":
			return errors.New(`must be "v2" or "v3"`)
		}
		s.RequestHashVersion = int(v.Value[1] - '0')
		return nil
	}
	if setting == SettingIndexProcessing {
		b, isBool := av.(*types.AttributeValueMemberBOOL)
		if !isBool {
			return errors.New("not a boolean")
		}
		s.IndexProcessing = b.Value
		return nil
	}
	n, isNum := av.(*types.AttributeValueMemberN)
	if !isNum {
		return errors.New("not a number")
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	switch {
	case err != nil:
		return errors.New("not a whole number")
	case v <= 0 || v > math.MaxInt32:
		return fmt.Errorf("must be within 1..%d", math.MaxInt32)
	}
	put := func(dst *Store) {
		switch setting {
		case SettingAttentionShards:
			dst.AttentionShards = int(v)
		case SettingCompletedTTL:
			dst.TTL.Completed = time.Duration(v) * time.Second
		case SettingFailedTTL:
			dst.TTL.Failed = time.Duration(v) * time.Second
		case SettingProcessingTTL:
			dst.TTL.Processing = time.Duration(v) * time.Second
		}
	}
	one := Store{Table: "t"}
	put(&one)
	if _, err := one.WithDefaults(); err != nil {
		return err
	}
	put(s)
	return nil
}

// attribute is setting's value in s as the record holds it.
func (setting Setting) attribute(s Store) types.AttributeValue {
	secs := func(d time.Duration) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(d/time.Second), 10)}
	}
	if field := setting.layoutField(&s.Layout); field != nil {
		return &types.AttributeValueMemberS{Value: *field}
	}
	switch setting {
	case SettingAttentionShards:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(s.AttentionShards)}
	case SettingIndexProcessing:
		return &types.AttributeValueMemberBOOL{Value: s.IndexProcessing}
	case SettingRequestHash:
		return &types.AttributeValueMemberS{Value: SettingRequestHash.Value(s)}
	case SettingCompletedTTL:
		return secs(s.TTL.Completed)
	case SettingFailedTTL:
		return secs(s.TTL.Failed)
	default:
		return secs(s.TTL.Processing)
	}
}

// layoutText shows a layout's recorded names for an error.
func layoutText(l tables.Layout) string {
	return fmt.Sprintf("aggregate index %s (%s, %s), attention index %s (%s, %s), TTL %s",
		l.AggregateIndex, l.AggregatePK, l.AggregateSK, l.AttentionIndex, l.AttentionPK, l.AttentionSK, l.TTL)
}

// show renders a recorded attribute for an error.
func show(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberS:
		return strconv.Quote(v.Value)
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return fmt.Sprintf("%T", av)
}

// RecordSettings writes s's settings into s.Table, replacing any recorded
// ones (`tables create`). by names who records them (e.g.
// "ddbworker@host"). An invalid s (WithDefaults) is an error.
func RecordSettings(ctx context.Context, api SettingsAPI, s Store, by string) error {
	_, err := record(ctx, api, s, by, false)
	return err
}

// RecordSettingsIfMissing writes s's settings into s.Table unless it
// records some already (a worker's first start); it reports whether it
// wrote them.
func RecordSettingsIfMissing(ctx context.Context, api SettingsAPI, s Store, by string) (bool, error) {
	return record(ctx, api, s, by, true)
}

func record(ctx context.Context, api SettingsAPI, s Store, by string, onlyIfMissing bool) (bool, error) {
	s, err := s.WithDefaults()
	if err != nil {
		return false, err
	}
	item := s.recordedKey()
	for _, setting := range Settings() {
		item[string(setting)] = setting.attribute(s)
	}
	item[recordedAtAttr] = &types.AttributeValueMemberS{Value: FormatTime(time.Now())}
	item[recordedByAttr] = &types.AttributeValueMemberS{Value: by}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: item}
	if onlyIfMissing {
		cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.Layout.PartitionKey))).Build()
		if err != nil {
			return false, fmt.Errorf("inbox: recording the store settings: %w", err)
		}
		in.ConditionExpression, in.ExpressionAttributeNames = cond.Condition(), cond.Names()
	}
	if _, err := api.PutItem(ctx, in); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, nil
		}
		return false, fmt.Errorf("inbox: recording the store settings in table %s: %w", s.Table, err)
	}
	return true, nil
}

// Merge is the store every writer and reader of the records must share: s,
// with each setting the table records in place of s's own — unless s was
// given it explicitly (given reports which), in which case a different
// value is a mismatch, returned in Settings() order. A caller names the
// flag or variable of each mismatch and refuses to run with them.
func (r Recorded) Merge(s Store, given func(Setting) bool) (merged Store, mismatches []Setting) {
	merged = s
	for _, setting := range Settings() {
		if !r.Has(setting) {
			continue
		}
		recorded := setting.attribute(r.Store)
		if given(setting) {
			if show(setting.attribute(s)) != show(recorded) {
				mismatches = append(mismatches, setting)
			}
			continue
		}
		_ = setting.apply(&merged, recorded) // read back from a valid record: it applies
	}
	return merged, mismatches
}

// Value is setting's value in s, as a person reads it (840h0m0s, 16,
// true, GSI1).
func (setting Setting) Value(s Store) string {
	if field := setting.layoutField(&s.Layout); field != nil {
		return *field
	}
	switch setting {
	case SettingAttentionShards:
		return strconv.Itoa(s.AttentionShards)
	case SettingIndexProcessing:
		return strconv.FormatBool(s.IndexProcessing)
	case SettingRequestHash:
		v := s.RequestHashVersion
		if v == 0 {
			v = DefaultRequestHashVersion
		}
		return "v" + strconv.Itoa(v)
	case SettingCompletedTTL:
		return s.TTL.Completed.String()
	case SettingFailedTTL:
		return s.TTL.Failed.String()
	default:
		return s.TTL.Processing.String()
	}
}
