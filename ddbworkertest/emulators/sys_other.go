//go:build !unix

package emulators

import (
	"context"
	"errors"
	"os"
	"runtime"
	"syscall"
)

// supported reports that Start cannot run here: it manages the emulators
// as Unix process groups.
func supported() error {
	return &unavailableError{"emulators: not supported on " + runtime.GOOS + " (Linux and macOS only)"}
}

func procAttr() *syscall.SysProcAttr { return nil }

func (p *proc) signal(bool) { _ = p.cmd.Process.Signal(os.Kill) }

func lockFile(context.Context, string) (func(), error) {
	return nil, errors.New("emulators: not supported on " + runtime.GOOS)
}
