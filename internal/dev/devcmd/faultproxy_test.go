package devcmd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/internal/ddbproxy"
)

func TestParseSchedule(t *testing.T) {
	got, err := parseSchedule("pass 10s, throttle 2m,5xx 30s, hang 1s, pass")
	require.NoError(t, err)
	require.Equal(t, []phase{{ddbproxy.Pass, 10 * time.Second}, {ddbproxy.Throttle, 2 * time.Minute}, {ddbproxy.ServerError, 30 * time.Second},
		{ddbproxy.Hang, time.Second}, {ddbproxy.Pass, 0}}, got)
	for _, bad := range []string{"", "slow 1s", "throttle 1s, pass, hang 1s", "pass -1s", "pass 1s 2s", "pass 1s,"} {
		_, err := parseSchedule(bad)
		require.Error(t, err, bad)
	}
}
