package devcmd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// The tests run against the emulators that testenv.Main provides.
func TestMain(m *testing.M) { testenv.Main(m) }

// The extension adds the development tools to the daemon's command line
// and the fault flags, hidden, to run and relay; without it (a team's
// binary, the production ddbworker) there are none of either.
func TestExtensionAddsTheDevelopmentTools(t *testing.T) {
	devTools := []string{"demo", "bench", "chaos", "explore", "send", "emulators", "faultproxy"}
	faultFlagNames := []string{"fault-seed", "fault-throttle", "fault-conflict", "fault-timeout", "fault-lost-response",
		"fault-sqs-delete", "fault-delay", "fault-delay-duration", "failpoint-kill"}
	for _, tc := range []struct {
		name string
		app  daemon.App
		has  bool
	}{{"with the extension", daemon.App{Extension: Extension()}, true}, {"without", daemon.App{}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			root := daemon.Command(tc.app)
			for _, tool := range devTools {
				cmd, _, err := root.Find([]string{tool})
				require.Equal(t, tc.has, err == nil && cmd != root, tool)
			}
			for _, name := range []string{"run", "relay"} {
				cmd, _, err := root.Find([]string{name})
				require.NoError(t, err)
				for _, flag := range faultFlagNames {
					f := cmd.Flags().Lookup(flag)
					require.Equal(t, tc.has, f != nil, "%s --%s", name, flag)
					if f != nil {
						require.True(t, f.Hidden, "%s --%s is hidden", name, flag)
					}
				}
			}
			added := len(root.Commands()) - len(daemon.Command(daemon.App{}).Commands())
			if tc.has {
				require.Equal(t, len(devTools), added, "the extension adds the development tools, nothing else")
			} else {
				require.Zero(t, added)
			}
		})
	}
}
