package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/testenv"
)

// The tests run against the emulators that testenv.Main provides.
func TestMain(m *testing.M) { testenv.Main(m) }

// Flags come from DDBWORKER_* variables unless given on the command line.
func TestEnvBinding(t *testing.T) {
	t.Setenv("DDBWORKER_CONCURRENCY", "7")
	t.Setenv("DDBWORKER_TABLE", "from-env")
	root := newRootCmd(App{})
	run, _, err := root.Find([]string{"run"})
	require.NoError(t, err)
	require.NoError(t, run.ParseFlags([]string{"--table", "from-flag"}))
	require.NoError(t, bindEnv(run))
	c, _ := run.Flags().GetInt("concurrency")
	require.Equal(t, 7, c)
	tbl, _ := run.Flags().GetString("table")
	require.Equal(t, "from-flag", tbl, "the command line wins over the environment")

	t.Setenv("DDBWORKER_MAX_ATTEMPTS", "many")
	run2, _, _ := newRootCmd(App{}).Find([]string{"run"})
	require.ErrorContains(t, bindEnv(run2), "DDBWORKER_MAX_ATTEMPTS")
}
