package devcmd

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make demo` installs only what the demo uses — the emulators (their npm
// packages, Java) and the binaries — and `make test` still installs
// everything. Read from `make -n -B` (every recipe printed, none run).
// Old behaviour: demo depended on deps, which also installed the
// TypeScript producer's packages, boto3 and the Lambda Runtime Interface
// Emulator (about 35 s on a fresh checkout).
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
	uses := []string{"bin/emulators-check java", "bin/emulators-check\n", "go build -o bin/ddbworker-dev ./cmd/ddbworker-dev"}
	unused := []string{"example/producers/typescript", "npm ci", "aws-lambda-rie", "boto3"}

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
		for _, s := range unused {
			require.NotContains(t, out, s, "make %s does not use it", target)
		}
	}

	test := recipes("test")
	for _, s := range append(uses, "cd example/producers/typescript && npm ci", "aws-lambda-rie", "import boto3", "emulators exec") {
		require.True(t, strings.Contains(test, s), "make test installs and runs %q:\n%s", s, test)
	}
}
