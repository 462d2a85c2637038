//go:build race

package envelope

// raceEnabled: sync.Pool drops items at random under the race detector,
// so pooled buffers (jsontext's) allocate now and then.
const raceEnabled = true
