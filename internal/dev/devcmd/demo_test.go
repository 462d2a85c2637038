package devcmd

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/testenv"
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

	// The outcomes add up to the messages sent: a delivery whose message
	// came back (in_flight) is counted apart, not as an outcome; and the
	// summary says how the stream's totals settle. Old behaviour: in_flight
	// was listed among the outcomes (more outcomes than messages) and the
	// stream's totals were left to disagree with them.
	text := out.String()
	require.Regexp(t, `messages settled \(each once\)\s+300\b`, text)
	sum := 0
	for _, k := range []string{"applied", "duplicate", "superseded", "terminal"} {
		if m := regexp.MustCompile(`(?m)^\s+` + k + `\s+(\d+)\s*$`).FindStringSubmatch(text); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
	}
	require.Equal(t, 300, sum, "the settled outcomes add up to the messages sent:\n%s", text)
	require.NotRegexp(t, `(?m)^\s+in_flight\s+\d+\s*$`, text, "in_flight is no outcome")
	require.Contains(t, text, "the stream settles as:")
}
