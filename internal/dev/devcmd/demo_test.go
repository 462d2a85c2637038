package devcmd

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
)

// The demo, small, as `ddbworker-dev demo` runs it on the test's
// emulators: it must pass its own invariant check.
func TestDemoHoldsInvariant(t *testing.T) {
	ddbEndpoint, sqsEndpoint := testenv.Endpoints(t)
	root := daemon.Command(daemon.App{Name: "ddbworker-dev", Extension: Extension()})
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs([]string{"demo", "--dynamodb-endpoint", ddbEndpoint, "--sqs-endpoint", sqsEndpoint,
		"--count", "300", "--seed", "11", "--concurrency", "8", "--visibility-timeout", "3s", "--timeout", "2m"})
	err := root.ExecuteContext(context.Background())
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errw.String())
	require.Contains(t, out.String(), "exactly-once invariant  HOLDS")
	require.Contains(t, out.String(), "terminal IDEMPOTENCY_HASH_MISMATCH")
	require.NotRegexp(t, `FAILED \(\d+\)`, out.String(), "no invariant check failed")
}
