//go:build unix

package emulators

import "syscall"

// signal sends SIGTERM (SIGKILL when kill) to p's process group.
func (p *proc) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// supported reports whether Start can run here: on every Unix.
func supported() error { return nil }
