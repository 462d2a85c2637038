package testenv

import (
	"bytes"
	"os/exec"
	"testing"
)

// Python returns a Python 3 interpreter that imports boto3, for the tests
// that run the Python producer examples. Without one it skips t with a line
// saying what to install, or, under DDBWORKER_REQUIRE_EMULATORS (make
// test, whose deps install python3-boto3 on Debian and Ubuntu), fails it.
func Python(t testing.TB) string {
	t.Helper()
	var tried []string
	// The python3 on PATH (a pyenv or Homebrew one, where pip installs),
	// then the system's, where apt's python3-boto3 installs (make deps).
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+": not found")
			continue
		}
		out, err := exec.Command(path, "-c", "import boto3").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, path+": "+string(bytes.TrimSpace(out)))
	}
	msg := "no python3 with boto3 (make deps installs python3-boto3 on Debian/Ubuntu; elsewhere pip install boto3)"
	if required() {
		t.Fatalf("%s is set: %s; tried %q", RequireEnv, msg, tried)
	}
	t.Skipf("%s; tried %q", msg, tried)
	return ""
}
