//go:build ddbworker_dev

package main

import "github.com/spf13/cobra"

// devCommands are the development build's extra commands: tools that need
// the fault flags (faults.go) or inject faults themselves.
func devCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newChaosCmd(g), newFaultProxyCmd(g)}
}
