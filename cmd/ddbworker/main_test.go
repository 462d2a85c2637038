package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
)

// buildBinary builds this command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ddbworker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// The operator command line registers no handlers: run refuses (after its
// startup checks) instead of consuming a queue it cannot handle, and the
// operator commands are all there. The example service and its tests are
// the development module's (internal/dev/cmd/ddbworker-dev).
func TestOperatorCommandLine(t *testing.T) {
	reg := ddbworker.NewRegistry()
	require.ErrorIs(t, app().Register(reg, daemon.Env{}), errNoHandlers)

	help, err := exec.Command(buildBinary(t), "--help").CombinedOutput()
	require.NoError(t, err, string(help))
	for _, cmd := range []string{"run", "tables", "queues", "inbox", "dlq", "sweep", "relay", "effects"} {
		require.Contains(t, string(help), "\n  "+cmd+" ", "the operator command %s", cmd)
	}
}
