package devcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

// `emulators exec --emulators-dir` with a relative directory starts the
// emulators and gives the command their environment, AWS_DEFAULT_REGION
// included (for boto3). Old behaviour: `fork/exec …: no such file or
// directory` (the relative paths were taken from the emulators' own working
// directories), and no AWS_DEFAULT_REGION.
func TestEmulatorsExecRelativeDir(t *testing.T) {
	testenv.SkipWithoutRuntimes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := emulators.Install(ctx, emulators.Config{})
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, dir)
	require.NoError(t, err)

	out := filepath.Join(t.TempDir(), "env")
	root := daemon.Command(daemon.App{Name: "ddbworker-dev", Extension: Extension()})
	root.SetArgs([]string{"emulators", "exec", "--emulators-dir", rel, "--", "sh", "-c", "env > " + out})
	root.SetErr(&strings.Builder{})
	require.NoError(t, root.ExecuteContext(ctx))

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	require.Equal(t, emulators.Region, env["AWS_DEFAULT_REGION"])
	require.Equal(t, emulators.Region, env["AWS_REGION"])
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, env["AWS_ENDPOINT_URL_DYNAMODB"])
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, env["AWS_ENDPOINT_URL_SQS"])
	require.NotEqual(t, os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), env["AWS_ENDPOINT_URL_DYNAMODB"], "its own pair, not the test's")
}
