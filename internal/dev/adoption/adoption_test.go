package adoption

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/testenv"
)

// module is the go.mod of the team's module: its own path, ddbworker
// required and replaced by this checkout, and so the modules of it the
// team's code imports (daemon, the emulator kit) and those they require
// (internal/telemetry, internal/daemonext, internal/prommetrics). go mod
// tidy adds the rest.
const module = `module example.com/shop

go 1.26.0

require github.com/ddbworker/ddbworker v0.0.0

replace github.com/ddbworker/ddbworker => %[1]s

replace github.com/ddbworker/ddbworker/daemon => %[2]s

replace github.com/ddbworker/ddbworker/ddbworkertest/emulators => %[3]s

replace github.com/ddbworker/ddbworker/internal/telemetry => %[4]s

replace github.com/ddbworker/ddbworker/internal/daemonext => %[5]s

replace github.com/ddbworker/ddbworker/internal/prommetrics => %[6]s
`

// moduleSums are the go.sum files of the modules module replaces: every
// sum the team's module needs is in theirs.
var moduleSums = []string{"go.sum", "daemon/go.sum", "ddbworkertest/emulators/go.sum", "internal/telemetry/go.sum", "internal/daemonext/go.sum", "internal/prommetrics/go.sum"}

// TestTeamModule writes testdata/shop into a new module outside the
// repository, fills its go.sum from the local module cache (GOPROXY=off:
// nothing is downloaded), and runs its tests, which must pass and must
// not skip (DDBWORKER_REQUIRE_EMULATORS=1).
func TestTeamModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the repository and runs its integration test: not with -short")
	}
	testenv.SkipWithoutRuntimes(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	goBin := goCommand(t, root)
	t.Logf("go command: %s; module: %s", goBin, root)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), fmt.Appendf(nil, module, modPath(root), modPath(filepath.Join(root, "daemon")),
		modPath(filepath.Join(root, "ddbworkertest", "emulators")), modPath(filepath.Join(root, "internal", "telemetry")), modPath(filepath.Join(root, "internal", "daemonext")),
		modPath(filepath.Join(root, "internal", "prommetrics"))), 0o644))
	var sums []byte
	for _, f := range moduleSums {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		sums = append(sums, b...)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644))
	files, err := filepath.Glob(filepath.Join("testdata", "shop", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
	}

	// The same go for every step and for the go build the module's test
	// runs (first on PATH); the user's build and module caches; no
	// workspace, no toolchain switch, no network.
	env := append(os.Environ(),
		"PATH="+filepath.Dir(goBin)+string(filepath.ListSeparator)+os.Getenv("PATH"),
		"GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod",
		testenv.RequireEnv+"=1")
	start := time.Now()
	goCmd(t, dir, env, 2*time.Minute, goBin, "mod", "tidy", "-e")
	t.Logf("go mod tidy: %s", time.Since(start).Round(time.Millisecond))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(gomod), "replace github.com/ddbworker/ddbworker => "+modPath(root), "go mod tidy kept the replace")

	start = time.Now()
	out := goCmd(t, dir, append(env, "GOFLAGS=-mod=readonly"), 6*time.Minute, goBin, "test", "-count=1", "-v", "-timeout", "5m", "./...")
	t.Logf("go test ./... in the module: %s", time.Since(start).Round(time.Millisecond))
	require.Contains(t, out, "--- PASS: TestShopWorker", "the module's integration test ran and passed")
	require.NotContains(t, out, "--- SKIP", "nothing skipped")
}

// modPath is dir as go.mod writes a path: quoted when it holds a space or
// a quote.
func modPath(dir string) string {
	if strings.ContainsAny(dir, " \t\"'`") {
		return strconv.Quote(dir)
	}
	return dir
}

// goCommand is the go command of the toolchain this repository's go.mod
// selects (a go on PATH may switch to another one): $(go env GOROOT)/bin/go,
// asked in root.
func goCommand(t *testing.T, root string) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err, "no go command on PATH")
	cmd := exec.CommandContext(t.Context(), p, "env", "GOROOT", "GOVERSION")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go env GOROOT GOVERSION")
	lines := strings.Fields(string(out))
	require.Len(t, lines, 2, "go env GOROOT GOVERSION: %s", out)
	goBin := filepath.Join(lines[0], "bin", "go")
	_, err = os.Stat(goBin)
	require.NoError(t, err)
	if lines[1] != runtime.Version() {
		t.Logf("%s is %s, this test was built by %s: the build cache is shared less", goBin, lines[1], runtime.Version())
	}
	return goBin
}

// goCmd runs the go command in dir, each line of its output logged as it
// comes, and returns the output; it fails the test with the error when
// the command fails (the output is above it in the log).
func goCmd(t *testing.T, dir string, env []string, timeout time.Duration, goBin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second
	var all bytes.Buffer
	lw := &lineLogger{t: t, prefix: "go " + args[0] + ": "}
	cmd.Stdout = io.MultiWriter(&all, lw)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	lw.flush()
	require.NoError(t, err, "go %s in %s (its output is above)", strings.Join(args, " "), dir)
	return all.String()
}

// lineLogger logs each complete line written to it.
type lineLogger struct {
	t       *testing.T
	prefix  string
	mu      sync.Mutex
	partial []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(l.prefix + string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.t.Log(l.prefix + string(l.partial))
		l.partial = nil
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}
