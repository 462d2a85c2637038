package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

func newTablesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tables", Short: "Manage the DynamoDB table"}
	var wait time.Duration
	var stream bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create the table (keys, aggregate and attention indexes, TTL) if missing; a no-op when it exists",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.awsConfig(cmd.Context())
			if err != nil {
				return err
			}
			ddb, _ := g.clients(cfg, nil, nil)
			// An existing table's recorded layout is the one it is checked
			// against (a flag that disagrees is refused): `tables create`
			// with no layout flags on a table that records its own changes
			// nothing.
			layout := g.layout
			var notFound *types.ResourceNotFoundException
			if m, err := g.mergeStore(cmd.Context(), ddb, false); err == nil {
				layout = m.store.Layout
			} else if !errors.As(err, &notFound) {
				return err
			}
			if err := tables.Ensure(cmd.Context(), ddb, tables.Config{Name: g.table, Layout: layout, WaitTimeout: wait}); err != nil {
				if errors.Is(err, tables.ErrIncompatible) {
					return fmt.Errorf("%w. `%s tables adopt --dry-run` shows what adding the indexes and TTL to this table takes, or what forbids it", err, g.app.name())
				}
				return err
			}
			// Settings given explicitly are recorded; the others keep what
			// the table records (re-running with defaults changes nothing).
			m, err := g.mergeStore(cmd.Context(), ddb, false)
			if err != nil {
				return err
			}
			g.newTableHash(&m)
			store := m.store
			if err := g.recordStore(cmd.Context(), ddb, store, true); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "table %s is ACTIVE with indexes %s, %s and TTL on %q\n", g.table, store.Layout.AggregateIndex, store.Layout.AttentionIndex, store.Layout.TTL)
			fmt.Fprintf(out, "inbox settings recorded in the table: %s\n", settingsFlags(store))
			fmt.Fprintf(out, "inbox layout recorded in the table (every command reads it; give no layout flag): %s\n", recordedLayoutFlags(store.Layout))
			for _, c := range m.changed {
				fmt.Fprintf(out, "changed: %s — restart every worker so that all of them use the new settings\n", c)
			}
			if stream {
				arn, err := tables.EnableStream(cmd.Context(), ddb, g.table, wait)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "stream on (NEW_IMAGE) for the outbox relay: %s\n", arn)
			}
			return nil
		},
	}
	create.Flags().DurationVar(&wait, "wait", tables.DefaultWaitTimeout, "how long to wait for the table to become ACTIVE")
	create.Flags().BoolVar(&stream, "stream", false, "also turn the table's DynamoDB Stream on (NEW_IMAGE), for `relay` (the outbox)")
	cmd.AddCommand(create, newAdoptCmd(g))
	return cmd
}

// settingsFlags shows the store's recorded settings as the flags that set
// them.
func settingsFlags(s inbox.Store) string {
	return fmt.Sprintf("--attention-shards %d --index-processing=%t --completed-ttl %s --failed-ttl %s --processing-ttl %s --request-hash-version %s",
		s.AttentionShards, s.IndexProcessing, s.TTL.Completed, s.TTL.Failed, s.TTL.Processing, inbox.SettingRequestHash.Value(s))
}

// recordedLayoutFlags shows the store's recorded layout as the flags that
// set it.
func recordedLayoutFlags(l tables.Layout) string {
	return fmt.Sprintf("--aggregate-index %s --aggregate-pk-attribute %s --aggregate-sk-attribute %s"+
		" --attention-index %s --attention-pk-attribute %s --attention-sk-attribute %s --ttl-attribute %s",
		l.AggregateIndex, l.AggregatePK, l.AggregateSK, l.AttentionIndex, l.AttentionPK, l.AttentionSK, l.TTL)
}

func newQueuesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "Manage the SQS queues"}
	var qc worker.QueueConfig
	create := &cobra.Command{
		Use:   "create",
		Short: "Create the work queue, its DLQ and the redrive policy between them",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.awsConfig(cmd.Context())
			if err != nil {
				return err
			}
			_, q := g.clients(cfg, nil, nil)
			out, err := worker.CreateQueues(cmd.Context(), q, qc)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "DDBWORKER_QUEUE_URL=%s\nDDBWORKER_DLQ_URL=%s\n", out.URL, out.DLQURL)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&qc.Name, "queue", g.app.name()+"-work", "work queue name (FIFO names end in .fifo)")
	f.StringVar(&qc.DLQName, "dlq", "", "DLQ name (default: <queue>-dlq)")
	f.BoolVar(&qc.FIFO, "fifo", false, "create FIFO queues")
	f.DurationVar(&qc.VisibilityTimeout, "visibility-timeout", worker.DefaultVisibilityTimeout, "work queue visibility timeout; keep it equal to the worker's --visibility-timeout")
	f.IntVar(&qc.MaxReceiveCount, "max-receive-count", worker.DefaultMaxReceiveCount, "receives before SQS moves a message to the DLQ")
	cmd.AddCommand(create)
	return cmd
}
