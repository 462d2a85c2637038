package emulators

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireEnv names the environment variable that makes unavailable
// emulators a failure instead of a skip: set it (1, true) in CI, where a
// skipped integration test would pass unnoticed.
const RequireEnv = "DDBWORKER_REQUIRE_EMULATORS"

// forTestTimeout bounds ForTest's install and start.
const forTestTimeout = 10 * time.Minute

// Required reports whether DDBWORKER_REQUIRE_EMULATORS asks for the
// emulators: any value but "", "0" and "false".
func Required() bool {
	v := os.Getenv(RequireEnv)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// ForTest starts a pair of emulators for t with the zero Config and stops
// them when t ends. See Config.ForTest.
func ForTest(t testing.TB) *Env { return Config{}.ForTest(t) }

// ForTest starts a pair of emulators for t (installing the npm packages on
// first use, see Install) and stops them when t and its subtests end.
// When they cannot run here (ErrUnavailable: no Java 17+, no Node.js 22,
// no npm) it skips t with one line that says what to install — unless
// DDBWORKER_REQUIRE_EMULATORS is set, which makes that a failure; any other
// error fails t. A pair takes about two seconds to start: share one among
// a package's tests from TestMain with Start when they are many.
func (c Config) ForTest(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), forTestTimeout)
	defer cancel()
	env, err := Start(ctx, c)
	if errors.Is(err, ErrUnavailable) && !Required() {
		t.Skipf("%v (set %s=1 to fail instead)", err, RequireEnv)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("%v", err)
		}
	})
	if !env.Runtimes.Loopback {
		t.Logf("emulators: %s has no jdk.compiler module to compile the loopback launcher: DynamoDB Local listens on every interface, not only 127.0.0.1", env.Runtimes.Java.Path)
	}
	return env
}

// UniqueName returns prefix, a dash and 12 random hex digits: a valid
// table or queue name no other test uses.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.TrimSuffix(prefix, "-") + "-" + hex.EncodeToString(b[:])
}
