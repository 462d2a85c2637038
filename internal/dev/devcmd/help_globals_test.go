package devcmd

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
)

// The development commands' help shows the shared flags each reads: the
// emulators none (they start their own endpoints), send the endpoints and
// --table, none of them the inbox's layout or TTLs. Old behaviour: every
// one listed the daemon's 20 shared flags.
func TestDevHelpShowsOnlyTheFlagsACommandReads(t *testing.T) {
	help := func(path ...string) string {
		root := daemon.Command(daemon.App{Extension: Extension()})
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(path, "--help"))
		require.NoError(t, root.Execute())
		return out.String()
	}
	for _, path := range [][]string{{"emulators"}, {"emulators", "exec"}, {"emulators", "start"}} {
		h := help(path...)
		for _, f := range []string{"--region", "--dynamodb-endpoint", "--table", "--pk-attribute", "--completed-ttl", "--log-level"} {
			require.NotContains(t, h, f, "%v reads no shared flag", path)
		}
	}
	send := help("send")
	require.Contains(t, send, "--table")
	require.Contains(t, send, "--sqs-endpoint")
	require.NotContains(t, send, "--pk-attribute")
	require.NotContains(t, send, "--completed-ttl")
	demo := help("demo")
	require.NotContains(t, demo, "--attention-shards")
}
