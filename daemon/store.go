package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
)

// The inbox store's settings are recorded in the table itself, in one item
// (PK DDBWORKER#CONFIG, SK INBOX) that `tables create` writes and `run`
// writes when it is missing. Every command reads it: a setting not given
// on the command line or in the environment is taken from the record, and
// one given differently is an error naming the flag — so a sweeper or an
// `inbox list` can never silently read with other shards, index or TTLs
// than the workers write with.

const (
	configPK = "DDBWORKER#CONFIG"
	configSK = "INBOX"
)

// Recorded settings (attribute names of the config item).
const (
	cfgShards          = "attentionShards"
	cfgIndexProcessing = "indexProcessing"
	cfgCompletedTTL    = "completedTtlSeconds"
	cfgFailedTTL       = "failedTtlSeconds"
	cfgProcessingTTL   = "processingTtlSeconds"
	cfgRecordedAt      = "recordedAt"
	cfgRecordedBy      = "recordedBy"
)

// recorded is a store setting as the table records it and as the flags give
// it.
type recorded struct {
	flag  string
	attr  string
	get   func(s *inbox.Store) string
	apply func(s *inbox.Store, v string) error
}

func storeSettings() []recorded {
	dur := func(d *time.Duration, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		*d = time.Duration(n) * time.Second
		return err
	}
	secs := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
	return []recorded{
		{"attention-shards", cfgShards, func(s *inbox.Store) string { return strconv.Itoa(s.AttentionShards) },
			func(s *inbox.Store, v string) (err error) { s.AttentionShards, err = strconv.Atoi(v); return err }},
		{"index-processing", cfgIndexProcessing, func(s *inbox.Store) string { return strconv.FormatBool(s.IndexProcessing) },
			func(s *inbox.Store, v string) (err error) { s.IndexProcessing, err = strconv.ParseBool(v); return err }},
		{"completed-ttl", cfgCompletedTTL, func(s *inbox.Store) string { return secs(s.TTL.Completed) },
			func(s *inbox.Store, v string) error { return dur(&s.TTL.Completed, v) }},
		{"failed-ttl", cfgFailedTTL, func(s *inbox.Store) string { return secs(s.TTL.Failed) },
			func(s *inbox.Store, v string) error { return dur(&s.TTL.Failed, v) }},
		{"processing-ttl", cfgProcessingTTL, func(s *inbox.Store) string { return secs(s.TTL.Processing) },
			func(s *inbox.Store, v string) error { return dur(&s.TTL.Processing, v) }},
	}
}

// storeAPI is what the store record needs of DynamoDB.
type storeAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

func configKey(s inbox.Store) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		s.Layout.PartitionKey: &types.AttributeValueMemberS{Value: configPK},
		s.Layout.SortKey:      &types.AttributeValueMemberS{Value: configSK},
	}
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
func (g *globals) resolveStore(ctx context.Context, api storeAPI) (inbox.Store, error) {
	s, _, err := g.mergeStore(ctx, api, true)
	return s, err
}

// mergeStore combines the flags and the table's record: a setting given
// explicitly wins (strict: differing from the record is an error), any
// other comes from the record. It also reports the settings an explicit
// flag changed against the record.
func (g *globals) mergeStore(ctx context.Context, api storeAPI, strict bool) (inbox.Store, []string, error) {
	s, err := g.store()
	if err != nil {
		return s, nil, err
	}
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: configKey(s), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return s, nil, fmt.Errorf("reading the inbox settings recorded in table %s: %w", s.Table, err)
	}
	if len(out.Item) == 0 {
		return s, nil, nil
	}
	var problems []string
	for _, r := range storeSettings() {
		av, ok := out.Item[r.attr]
		if !ok {
			continue
		}
		var v string
		switch a := av.(type) {
		case *types.AttributeValueMemberN:
			v = a.Value
		case *types.AttributeValueMemberBOOL:
			v = strconv.FormatBool(a.Value)
		default:
			continue
		}
		if explicitFlag(g.cmd, r.flag) {
			flagVal := r.get(&s)
			recVal := s
			if err := r.apply(&recVal, v); err == nil && r.get(&recVal) != flagVal {
				problems = append(problems, fmt.Sprintf("--%s (%s) is %s but table %s records %s", r.flag, envName(r.flag), flagVal, s.Table, r.get(&recVal)))
			}
			continue
		}
		if err := r.apply(&s, v); err != nil {
			return s, nil, fmt.Errorf("table %s records an unreadable %s %q: %w", s.Table, r.attr, v, err)
		}
	}
	if strict && len(problems) > 0 {
		return s, nil, fmt.Errorf("the inbox settings differ from the ones recorded in the table, which every worker and operator command must share: %s. Leave the flags unset to use the recorded ones, or record new ones with `%s tables create` (only while no worker runs)",
			strings.Join(problems, "; "), g.app.name())
	}
	s, err = s.WithDefaults()
	return s, problems, err
}

// recordStore writes the store's settings into the table: always
// (overwrite, from `tables create`) or only when none are recorded (from
// `run`).
func (g *globals) recordStore(ctx context.Context, api storeAPI, s inbox.Store, overwrite bool) error {
	item := configKey(s)
	for _, r := range storeSettings() {
		v := r.get(&s)
		if r.attr == cfgIndexProcessing {
			item[r.attr] = &types.AttributeValueMemberBOOL{Value: s.IndexProcessing}
			continue
		}
		item[r.attr] = &types.AttributeValueMemberN{Value: v}
	}
	host, _ := os.Hostname()
	item[cfgRecordedAt] = &types.AttributeValueMemberS{Value: inbox.FormatTime(time.Now())}
	item[cfgRecordedBy] = &types.AttributeValueMemberS{Value: g.app.name() + "@" + host}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: item}
	if !overwrite {
		cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.Layout.PartitionKey))).Build()
		if err != nil {
			return fmt.Errorf("recording the inbox settings: %w", err)
		}
		in.ConditionExpression, in.ExpressionAttributeNames = cond.Condition(), cond.Names()
	}
	_, err := api.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("recording the inbox settings in table %s: %w", s.Table, err)
	}
	return nil
}
