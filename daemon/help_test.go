package daemon_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
)

// A team's binary speaks in its own name: every example and help text
// names the app, not ddbworker; --table's help says it is required when
// the app gives it no default (and shows the default when it does); the
// queue `queues create` makes by default is named after the app. Old
// behaviour: `ddbworker inbox get …` in invoice-worker's help, --table
// without a word about being required, and a default queue ddbworker-work.
func TestHelpNamesTheApp(t *testing.T) {
	command := regexp.MustCompile(`\bddbworker (run|tables|queues|inbox|dlq|sweep|effects|relay|envelope)\b`)
	for _, tc := range []struct {
		app   daemon.App
		table string // --table's default
	}{
		{daemon.App{Name: "invoice-worker"}, ""},
		{daemon.App{Name: "ledger", Table: "ledger-table"}, "ledger-table"},
	} {
		t.Run(tc.app.Name, func(t *testing.T) {
			root := daemon.Command(tc.app)
			examples := 0
			var visit func(c *cobra.Command)
			visit = func(c *cobra.Command) {
				for _, text := range []string{c.Long, c.Short, c.Example} {
					require.NotRegexp(t, command, text, "%s: a help text names ddbworker as the command", c.CommandPath())
				}
				for _, line := range strings.Split(c.Example, "\n") {
					if line == "" {
						continue
					}
					examples++
					require.True(t, strings.HasPrefix(line, "  "+tc.app.Name+" "), "%s: example %q does not run %s", c.CommandPath(), line, tc.app.Name)
				}
				for _, sub := range c.Commands() {
					visit(sub)
				}
			}
			visit(root)
			require.Greater(t, examples, 10, "the commands have examples")

			table := root.PersistentFlags().Lookup("table")
			require.Equal(t, tc.table, table.DefValue)
			if tc.table == "" {
				require.Contains(t, table.Usage, "required (no default)")
			} else {
				require.NotContains(t, table.Usage, "required")
			}

			create, _, err := root.Find([]string{"queues", "create"})
			require.NoError(t, err)
			require.Equal(t, tc.app.Name+"-work", create.Flags().Lookup("queue").DefValue)

			sweep, _, err := root.Find([]string{"sweep"})
			require.NoError(t, err)
			require.Contains(t, sweep.Long, `"`+tc.app.Name+` inbox list --status FAILED_TERMINAL --code LEASE_ABANDONED"`)
		})
	}
}
