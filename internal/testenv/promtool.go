package testenv

import (
	"os/exec"
	"testing"
)

// Promtool returns Prometheus's promtool, for the tests of the shipped
// alert rules (deploy/prometheus). Without it, it skips t with a line
// saying what to install, or, under DDBWORKER_REQUIRE_EMULATORS (make
// test, whose deps install apt's prometheus on Debian and Ubuntu), fails
// it.
func Promtool(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	msg := "promtool is not installed (make deps installs apt's prometheus on Debian/Ubuntu; elsewhere https://prometheus.io/download/ or brew install prometheus)"
	if required() {
		t.Fatalf("%s is set: %s", RequireEnv, msg)
	}
	t.Skip(msg)
	return ""
}
