package devcmd

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make demo` installs and builds only what the demo uses — the emulators
// (their npm packages, Java) and bin/ddbworker-dev, the one binary it runs
// (bench and chaos alike) — and `make test` still installs and builds
// everything. Read from `make -n -B` (every recipe printed, none run).
// Old behaviour: demo depended on deps, which also installed the
// TypeScript producer's packages, boto3 and the Lambda Runtime Interface
// Emulator (about 35 s on a fresh checkout), and on build, which also
// built the production bin/ddbworker.
func TestMakeDemoInstallsOnlyWhatItUses(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	recipes := func(target string) string {
		t.Helper()
		cmd := exec.Command(mk, "-n", "-B", target)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make -n -B %s: %s", target, out)
		return string(out)
	}
	uses := []string{"bin/emulators-check java", "bin/emulators-check\n", "go build -o bin/ddbworker-dev ./internal/dev/cmd/ddbworker-dev"}
	production := "go build -o bin/ddbworker ./cmd/ddbworker\n"
	unused := []string{"example/producers/typescript", "npm ci", "aws-lambda-rie", "boto3", production}

	demo := recipes("demo")
	for _, s := range uses {
		require.Contains(t, demo, s)
	}
	require.Contains(t, demo, "bin/ddbworker-dev demo")
	for _, s := range unused {
		require.NotContains(t, demo, s, "make demo does not use it")
	}
	for _, target := range []string{"bench", "chaos"} {
		out := recipes(target)
		require.Contains(t, out, "go build -o bin/ddbworker-dev ./internal/dev/cmd/ddbworker-dev")
		for _, s := range unused {
			require.NotContains(t, out, s, "make %s does not use it", target)
		}
	}

	test := recipes("test")
	for _, s := range append(uses, production, "cd example/producers/typescript && npm ci", "aws-lambda-rie", "import boto3", "emulators exec") {
		require.True(t, strings.Contains(test, s), "make test installs and runs %q:\n%s", s, test)
	}
}
