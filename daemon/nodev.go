//go:build !ddbworker_dev

package daemon

import "github.com/spf13/cobra"

// devCommands: the production build has none (see dev.go).
func devCommands(*globals) []*cobra.Command { return nil }
