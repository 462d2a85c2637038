package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
)

// The inbox store's settings are recorded in the table itself (package
// inbox owns the record: inbox.ReadRecorded, inbox.RecordSettings). Every
// command reads them: a setting not given on the command line or in the
// environment is taken from the record, and one given differently is an
// error naming the flag — so a sweeper or an `inbox list` can never
// silently read with other shards, index or TTLs than the workers write
// with.

// storeFlag is a recorded setting and the flag that sets it.
type storeFlag struct {
	flag    string
	setting inbox.Setting
	value   func(inbox.Store) any                   // the setting's value in a store
	take    func(dst *inbox.Store, src inbox.Store) // sets dst's setting to src's
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

// resolveStore returns the store the flags describe, with the settings the
// table records in place of those not given explicitly; a setting given
// explicitly that differs from the record is an error naming the flag.
func (g *globals) resolveStore(ctx context.Context, api inbox.SettingsAPI) (inbox.Store, error) {
	m, err := g.mergeStore(ctx, api, true)
	return m.store, err
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
}

// mergeStore combines the flags and the table's record: a setting given
// explicitly wins (strict: differing from the record is an error), any
// other comes from the record. It also reports the settings an explicit
// flag changed against the record.
func (g *globals) mergeStore(ctx context.Context, api inbox.SettingsAPI, strict bool) (merged, error) {
	s, err := g.store()
	if err != nil {
		return merged{store: s}, err
	}
	rec, ok, err := inbox.ReadRecorded(ctx, api, s)
	var unusable *inbox.RecordedError
	switch {
	case errors.As(err, &unusable) && !strict:
		// `tables create` records the flags' settings in place of a record
		// it cannot use.
		if s, err = s.WithDefaults(); err != nil {
			return merged{store: s}, err
		}
		replaced := fmt.Sprintf("%v; the flags' value recorded in its place", unusable)
		if f, ok := flagOf(unusable.Setting); ok {
			replaced = fmt.Sprintf("%v; --%s %v recorded in its place", unusable, f.flag, f.value(s))
		}
		return merged{store: s, changed: []string{replaced}, recorded: true}, nil
	case errors.As(err, &unusable):
		return merged{store: s}, fmt.Errorf("%w: record valid settings with `%s tables create` (only while no worker runs)", err, g.app.name())
	case err != nil || !ok:
		return merged{store: s}, err
	}
	var problems []string
	for _, f := range storeFlags() {
		if !rec.Has(f.setting) {
			continue
		}
		if !explicitFlag(g.cmd, f.flag) {
			f.take(&s, rec.Store)
			continue
		}
		if given, recorded := f.value(s), f.value(rec.Store); given != recorded {
			problems = append(problems, fmt.Sprintf("--%s (%s) is %v but table %s records %v", f.flag, envName(f.flag), given, s.Table, recorded))
		}
	}
	if strict && len(problems) > 0 {
		return merged{store: s}, fmt.Errorf("the inbox settings differ from the ones recorded in the table, which every worker and operator command must share: %s. Leave the flags unset to use the recorded ones, or record new ones with `%s tables create` (only while no worker runs)",
			strings.Join(problems, "; "), g.app.name())
	}
	s, err = s.WithDefaults()
	return merged{store: s, changed: problems, recorded: true, complete: len(rec.Settings) == len(inbox.Settings())}, err
}

// recordStore writes the store's settings into the table: always
// (overwrite, from `tables create`) or only when none are recorded (from
// `run`).
func (g *globals) recordStore(ctx context.Context, api inbox.SettingsAPI, s inbox.Store, overwrite bool) error {
	host, _ := os.Hostname()
	by := g.app.name() + "@" + host
	if overwrite {
		return inbox.RecordSettings(ctx, api, s, by)
	}
	_, err := inbox.RecordSettingsIfMissing(ctx, api, s, by)
	return err
}
