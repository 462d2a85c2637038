package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The binary says what it is: --version, and (in TestDaemonSIGTERMAndRestart)
// the ddbworker_build_info metric.
func TestVersion(t *testing.T) {
	out, err := exec.Command(buildBinary(t), "--version").CombinedOutput()
	require.NoError(t, err, string(out))
	require.True(t, strings.HasPrefix(string(out), "ddbworker version "), "%q", out)
}
