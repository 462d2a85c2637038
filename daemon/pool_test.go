package daemon

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The SDK's default transport keeps 10 idle connections per host; a worker
// with more messages in flight would open and close connections on every
// call. poolFor sizes it to the concurrency and the pollers.
func TestPoolSizedToConcurrency(t *testing.T) {
	for _, conc := range []int{1, 16, 64, 500} {
		var tr http.Transport
		poolFor(conc)(&tr)
		require.GreaterOrEqual(t, tr.MaxIdleConnsPerHost, conc+1, "concurrency %d", conc)
		require.GreaterOrEqual(t, tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	}
}
