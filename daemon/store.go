package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

// The inbox store's settings and layout are recorded in the table itself
// (package inbox owns the record: inbox.ReadRecorded, inbox.RecordSettings;
// the table's key attributes, under which the record is stored, come from
// its key schema). Every command reads them: a setting not given on the
// command line or in the environment is taken from the record, and one
// given differently is an error naming the flag and both values — so a
// sweeper or an `inbox list` can never silently read with other shards,
// indexes or TTLs than the workers write with.

// storeFlag is a recorded setting and the flag that sets it.
type storeFlag struct {
	flag    string
	setting inbox.Setting
	value   func(inbox.Store) any                   // the setting's value in a store
	take    func(dst *inbox.Store, src inbox.Store) // sets dst's setting to src's
}

// layoutStoreFlag is the storeFlag of a recorded layout name.
func layoutStoreFlag(flag string, setting inbox.Setting, field func(*tables.Layout) *string) storeFlag {
	return storeFlag{flag, setting, func(s inbox.Store) any { return *field(&s.Layout) },
		func(d *inbox.Store, s inbox.Store) { *field(&d.Layout) = *field(&s.Layout) }}
}

func storeFlags() []storeFlag {
	return []storeFlag{
		{"attention-shards", inbox.SettingAttentionShards, func(s inbox.Store) any { return s.AttentionShards },
			func(d *inbox.Store, s inbox.Store) { d.AttentionShards = s.AttentionShards }},
		{"index-processing", inbox.SettingIndexProcessing, func(s inbox.Store) any { return s.IndexProcessing },
			func(d *inbox.Store, s inbox.Store) { d.IndexProcessing = s.IndexProcessing }},
		{"completed-ttl", inbox.SettingCompletedTTL, func(s inbox.Store) any { return s.TTL.Completed },
			func(d *inbox.Store, s inbox.Store) { d.TTL.Completed = s.TTL.Completed }},
		{"failed-ttl", inbox.SettingFailedTTL, func(s inbox.Store) any { return s.TTL.Failed },
			func(d *inbox.Store, s inbox.Store) { d.TTL.Failed = s.TTL.Failed }},
		{"processing-ttl", inbox.SettingProcessingTTL, func(s inbox.Store) any { return s.TTL.Processing },
			func(d *inbox.Store, s inbox.Store) { d.TTL.Processing = s.TTL.Processing }},
		{"request-hash-version", inbox.SettingRequestHash, func(s inbox.Store) any { return inbox.SettingRequestHash.Value(s) },
			func(d *inbox.Store, s inbox.Store) { d.RequestHashVersion = s.RequestHashVersion }},
		layoutStoreFlag("aggregate-index", inbox.SettingAggregateIndex, func(l *tables.Layout) *string { return &l.AggregateIndex }),
		layoutStoreFlag("aggregate-pk-attribute", inbox.SettingAggregatePK, func(l *tables.Layout) *string { return &l.AggregatePK }),
		layoutStoreFlag("aggregate-sk-attribute", inbox.SettingAggregateSK, func(l *tables.Layout) *string { return &l.AggregateSK }),
		layoutStoreFlag("attention-index", inbox.SettingAttentionIndex, func(l *tables.Layout) *string { return &l.AttentionIndex }),
		layoutStoreFlag("attention-pk-attribute", inbox.SettingAttentionPK, func(l *tables.Layout) *string { return &l.AttentionPK }),
		layoutStoreFlag("attention-sk-attribute", inbox.SettingAttentionSK, func(l *tables.Layout) *string { return &l.AttentionSK }),
		layoutStoreFlag("ttl-attribute", inbox.SettingTTLAttribute, func(l *tables.Layout) *string { return &l.TTL }),
	}
}

// parseRequestHash is --request-hash-version's value: v2 or v3 (2 and 3
// too; "" is the store's default).
func parseRequestHash(s string) (int, error) {
	switch strings.TrimPrefix(s, "v") {
	case "":
		return 0, nil
	case "2":
		return 2, nil
	case "3":
		return 3, nil
	}
	return 0, fmt.Errorf("--request-hash-version (%s) %q: must be v2 or v3", envName("request-hash-version"), s)
}

// newTableHash gives a table that records no settings yet — one this
// release creates or adopts — request hash v3 unless the flag says
// otherwise: the workers that will share it read v3. A table recorded by
// an earlier release keeps writing what it records, or v2, until the
// operator moves it (`tables adopt --request-hash-version v3`).
func (g *globals) newTableHash(m *merged) {
	if !m.recorded && !explicitFlag(g.cmd, "request-hash-version") {
		m.store.RequestHashVersion = 3
	}
}

// keyFlags are the table's key attributes' flags: the table's key schema
// says them (the settings item is stored under them), so they are never
// recorded.
func keyFlags() []storeFlag {
	return []storeFlag{
		layoutStoreFlag("pk-attribute", "", func(l *tables.Layout) *string { return &l.PartitionKey }),
		layoutStoreFlag("sk-attribute", "", func(l *tables.Layout) *string { return &l.SortKey }),
	}
}

// flagOf is the flag of a recorded setting.
func flagOf(setting inbox.Setting) (storeFlag, bool) {
	for _, f := range storeFlags() {
		if f.setting == setting {
			return f, true
		}
	}
	return storeFlag{}, false
}

// explicitFlag reports whether the flag was given on the command line or
// in the environment.
func explicitFlag(cmd *cobra.Command, name string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return true
		}
	}
	_, ok := os.LookupEnv(envName(name))
	return ok
}

// storeAPI is what reading the store's record needs: the table's
// description (its key attributes, its indexes) and the settings item.
type storeAPI interface {
	inbox.SettingsAPI
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// resolveStore returns the store the flags describe, with the settings the
// table records — its layout too — in place of those not given
// explicitly; a setting given explicitly that differs from the record is
// an error naming the flag. An operator command reads through the store's
// indexes: one the table lacks, or keys on other attributes (an
// application's index of the same name), is an *inbox.IndexError naming
// the flag that fixes it, so a command never answers from an index that is
// not the inbox's.
func (g *globals) resolveStore(ctx context.Context, api storeAPI) (inbox.Store, error) {
	m, err := g.mergeStore(ctx, api, true)
	if err != nil {
		return m.store, err
	}
	if bad := m.store.CheckIndexes(m.table); len(bad) > 0 {
		errs := make([]error, len(bad))
		for i, ie := range bad {
			ie.Fix = g.indexFix(ie, m.layoutRecorded)
			errs[i] = ie
		}
		return m.store, errors.Join(errs...)
	}
	return m.store, nil
}

// indexFix names what fixes an index of the layout that is missing or
// not the inbox's.
func (g *globals) indexFix(ie *inbox.IndexError, recorded bool) string {
	flag := "attention-index"
	if ie.Role == inbox.RoleAggregate {
		flag = "aggregate-index"
	}
	if recorded {
		return fmt.Sprintf("the table records this layout, so its index is gone or was replaced: restore it (`%s tables adopt --dry-run` shows what that takes), or point --table (DDBWORKER_TABLE) at the inbox's table",
			g.app.name())
	}
	return fmt.Sprintf("name the inbox's index with --%s NAME (%s) and its key attributes with --%s-pk-attribute and --%[3]s-sk-attribute, or record the layout in the table with `%[4]s tables adopt` (an existing table) or `%[4]s tables create`",
		flag, envName(flag), strings.TrimSuffix(flag, "-index"), g.app.name())
}

// merged is the store the flags and the table's record make together.
type merged struct {
	store inbox.Store
	// changed says, for a person, each setting given explicitly that
	// differs from the record, or replaces an unusable one.
	changed []string
	// recorded reports that the table records settings, and complete
	// that it records a usable value of every one.
	recorded, complete bool
	// layoutRecorded reports that the record holds the layout.
	layoutRecorded bool
	// table is the table's description.
	table *types.TableDescription
}

// mergeStore combines the flags and the table's record: the table's key
// attributes come from its key schema (an explicit --pk-attribute or
// --sk-attribute that differs is an error); then a setting given
// explicitly wins (strict: differing from the record is an error), any
// other comes from the record. The layout is never changed against the
// record, strict or not: the records already written live under its names.
// It also reports the settings an explicit flag changed against the
// record. A missing table is the SDK's *types.ResourceNotFoundException,
// wrapped.
func (g *globals) mergeStore(ctx context.Context, api storeAPI, strict bool) (merged, error) {
	s, err := g.store()
	if err != nil {
		return merged{store: s}, err
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return merged{store: s}, fmt.Errorf("table %q does not exist: `%s tables create` makes it, or set --table (DDBWORKER_TABLE): %w", s.Table, g.app.name(), err)
	case err != nil:
		return merged{store: s}, fmt.Errorf("reading the description of table %s: %w", s.Table, err)
	}
	pk, sk, composite := tables.KeyAttributes(desc.Table)
	if !composite {
		// No inbox fits it, and no record can be stored in it: the table
		// checks (run, tables create, tables adopt) say what differs.
		if strict {
			return merged{store: s, table: desc.Table}, fmt.Errorf("table %s has no sort key: it holds no inbox records; point --table (DDBWORKER_TABLE) at the inbox's table", s.Table)
		}
		return merged{store: s, table: desc.Table}, nil
	}
	var keyProblems []string
	for _, f := range keyFlags() {
		table := inbox.Store{Layout: tables.Layout{PartitionKey: pk, SortKey: sk}}
		if explicitFlag(g.cmd, f.flag) && f.value(s) != f.value(table) {
			keyProblems = append(keyProblems, fmt.Sprintf("--%s (%s) is %v but table %s's key is (%s, %s)", f.flag, envName(f.flag), f.value(s), s.Table, pk, sk))
			continue
		}
		f.take(&s, table)
	}
	if len(keyProblems) > 0 {
		return merged{store: s, table: desc.Table}, fmt.Errorf("%s: leave the flag unset, the table's key schema names them", strings.Join(keyProblems, "; "))
	}
	rec, ok, err := inbox.ReadRecorded(ctx, api, s)
	var unusable *inbox.RecordedError
	switch {
	case errors.As(err, &unusable) && !strict:
		// `tables create` records the flags' settings in place of a record
		// it cannot use.
		if s, err = s.WithDefaults(); err != nil {
			return merged{store: s, table: desc.Table}, err
		}
		replaced := fmt.Sprintf("%v; the flags' value recorded in its place", unusable)
		if f, ok := flagOf(unusable.Setting); ok {
			replaced = fmt.Sprintf("%v; --%s %v recorded in its place", unusable, f.flag, f.value(s))
		}
		return merged{store: s, changed: []string{replaced}, recorded: true, table: desc.Table}, nil
	case errors.As(err, &unusable):
		return merged{store: s, table: desc.Table}, fmt.Errorf("%w: record valid settings with `%s tables create` (only while no worker runs)", err, g.app.name())
	case err != nil || !ok:
		return merged{store: s, table: desc.Table}, err
	}
	var problems, layoutProblems []string
	for _, f := range storeFlags() {
		if !rec.Has(f.setting) {
			continue
		}
		if !explicitFlag(g.cmd, f.flag) {
			f.take(&s, rec.Store)
			continue
		}
		if given, recorded := f.value(s), f.value(rec.Store); given != recorded {
			p := fmt.Sprintf("--%s (%s) is %v but table %s records %v", f.flag, envName(f.flag), given, s.Table, recorded)
			if f.setting.IsLayout() {
				layoutProblems = append(layoutProblems, p)
			} else {
				problems = append(problems, p)
			}
		}
	}
	if len(layoutProblems) > 0 {
		return merged{store: s, table: desc.Table}, fmt.Errorf("the inbox layout differs from the one recorded in the table, under which the workers write the records: %s. Leave the layout flags and DDBWORKER_* layout variables unset to use the recorded layout (recording another would move none of the records written under it)",
			strings.Join(layoutProblems, "; "))
	}
	if strict && len(problems) > 0 {
		return merged{store: s, table: desc.Table}, fmt.Errorf("the inbox settings differ from the ones recorded in the table, which every worker and operator command must share: %s. Leave the flags unset to use the recorded ones, or record new ones with `%s tables create` (only while no worker runs)",
			strings.Join(problems, "; "), g.app.name())
	}
	s, err = s.WithDefaults()
	return merged{store: s, changed: problems, recorded: true, complete: len(rec.Settings) == len(inbox.Settings()),
		layoutRecorded: rec.HasLayout(), table: desc.Table}, err
}

// recordStore writes the store's settings and layout into the table:
// always (overwrite, from `tables create` and `tables adopt`) or only
// when none are recorded (from `run`).
func (g *globals) recordStore(ctx context.Context, api inbox.SettingsAPI, s inbox.Store, overwrite bool) error {
	host, _ := os.Hostname()
	by := g.app.name() + "@" + host
	if overwrite {
		return inbox.RecordSettings(ctx, api, s, by)
	}
	_, err := inbox.RecordSettingsIfMissing(ctx, api, s, by)
	return err
}
