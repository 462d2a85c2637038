//go:build !ddbworker_dev

package bench

import "context"

// ThrottleAvailable reports whether this build runs the throttled scenario:
// the production build does not (see throttle_run.go).
const ThrottleAvailable = false

func runThrottled(context.Context, Env, Config, bool) ([]ThrottledResult, error) {
	return nil, errNoThrottle
}
