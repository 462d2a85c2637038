//go:build ddbworker_dev

package daemon

import "github.com/spf13/cobra"

// devCommands are the development build's tools — the demo, the benchmark,
// the chaos run, example traffic, the local emulators and the fault proxy —
// which the production build (and a team's binary) does not contain.
func devCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newDemoCmd(g), newBenchCmd(g), newChaosCmd(g), newSendCmd(g), newEmulatorsCmd(), newFaultProxyCmd(g)}
}
