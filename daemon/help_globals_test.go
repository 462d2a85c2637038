package daemon

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/daemonext"
)

// helpOf runs `ddbworker PATH… --help` and returns what it printed.
func helpOf(t *testing.T, path ...string) string {
	t.Helper()
	root := newRootCmd(App{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(path, "--help"))
	require.NoError(t, root.Execute())
	return out.String()
}

// globalFlagsShown are the shared flags a help text lists.
func globalFlagsShown(help string) map[string]bool {
	shown := map[string]bool{}
	_, globals, _ := strings.Cut(help, "Global Flags:")
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(globals, -1) {
		if _, ok := globalGroups[m[1]]; ok {
			shown[m[1]] = true
		}
	}
	return shown
}

// Every command's help shows the shared flags it reads and no other: over
// the whole command tree, each command declares what it reads (itself or
// an ancestor), and its help lists exactly the shared flags of those
// groups. Old behaviour: every command listed all 20 (queues create
// --table, envelope hash --completed-ttl, dlq peek --pk-attribute…).
func TestHelpShowsOnlyTheFlagsACommandReads(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	var visit func(c *cobra.Command)
	checked := 0
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			path := strings.Fields(strings.TrimPrefix(sub.CommandPath(), sub.Root().Name()+" "))
			t.Run(strings.Join(path, "_"), func(t *testing.T) {
				declared := false
				for p := sub; p != nil; p = p.Parent() {
					_, ok := p.Annotations[daemonext.GlobalsAnnotation]
					declared = declared || ok
				}
				require.True(t, declared, "%s declares the shared flags it reads (daemonext.Uses)", sub.CommandPath())
				used := globalsUsed(sub)
				want := map[string]bool{}
				for name, grp := range globalGroups {
					if used[grp] {
						want[name] = true
					}
				}
				require.Equal(t, want, globalFlagsShown(helpOf(t, path...)))
			})
			checked++
			visit(sub)
		}
	}
	visit(newRootCmd(App{}))
	require.GreaterOrEqual(t, checked, 25, "the whole tree")

	for _, tc := range []struct {
		path     []string
		shown    []string
		notShown []string
	}{
		{[]string{"queues", "create"}, []string{"region", "sqs-endpoint"}, []string{"table", "pk-attribute", "completed-ttl", "dynamodb-endpoint", "log-level"}},
		{[]string{"dlq", "peek"}, []string{"sqs-endpoint"}, []string{"table", "aggregate-index", "dynamodb-endpoint"}},
		{[]string{"dlq", "discard"}, []string{"sqs-endpoint", "dynamodb-endpoint", "table", "failed-ttl"}, []string{"index-processing", "log-level"}},
		{[]string{"inbox", "get"}, []string{"table", "attention-shards", "dynamodb-endpoint"}, []string{"completed-ttl", "index-processing", "sqs-endpoint", "log-level"}},
		{[]string{"inbox", "reopen"}, []string{"table", "failed-ttl"}, []string{"index-processing", "sqs-endpoint", "log-level"}},
		{[]string{"envelope", "hash"}, nil, []string{"region", "table", "log-level"}},
		{[]string{"run"}, []string{"table", "log-level", "index-processing", "sqs-endpoint"}, nil},
	} {
		shown := globalFlagsShown(helpOf(t, tc.path...))
		for _, f := range tc.shown {
			require.True(t, shown[f], "%v shows --%s", tc.path, f)
		}
		for _, f := range tc.notShown {
			require.False(t, shown[f], "%v hides --%s", tc.path, f)
		}
	}
}

// A flag's default in help is what the command would run with: its
// DDBWORKER_* value when the environment sets one. Old behaviour: the
// built-in default, whatever the environment said.
func TestHelpDefaultsFromEnvironment(t *testing.T) {
	t.Setenv("DDBWORKER_TABLE", "orders-prod")
	t.Setenv("DDBWORKER_MAX", "3")
	help := helpOf(t, "inbox", "get")
	require.Regexp(t, `--table string\s+.*\(set by DDBWORKER_TABLE\) \(default "orders-prod"\)`, help)
	help = helpOf(t, "dlq", "redrive")
	require.Regexp(t, `--max int\s+.*\(set by DDBWORKER_MAX\) \(default 3\)`, help)
}
