//go:build ddbworker_dev

package daemon

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/example/caseflow"
	"github.com/ddbworker/ddbworker/internal/dev/testenv"
)

// The demo, small: it must pass its own invariant check.
func TestDemoHoldsInvariant(t *testing.T) {
	ddbEndpoint, sqsEndpoint := testenv.Endpoints(t)
	g := &globals{ddbEndpoint: ddbEndpoint, sqsEndpoint: sqsEndpoint, logLevel: "info"}
	f := &demoFlags{scenario: caseflow.ScenarioConfig{Messages: 300, Seed: 11}, concurrency: 8, visibility: 3 * time.Second, timeout: 2 * time.Minute}
	var out, errw bytes.Buffer
	err := runDemo(context.Background(), g, f, &out, &errw)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errw.String())
	require.Contains(t, out.String(), "exactly-once invariant  HOLDS")
	require.Contains(t, out.String(), "terminal IDEMPOTENCY_HASH_MISMATCH")
	require.NotRegexp(t, `FAILED \(\d+\)`, out.String(), "no invariant check failed")
}

// buildBinary builds the production ddbworker (no development tools, no
// fault injection), as the Dockerfile does.
