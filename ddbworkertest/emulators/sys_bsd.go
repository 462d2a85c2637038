//go:build unix && !linux

package emulators

import "syscall"

// procAttr starts an emulator in its own process group; Stop signals the
// group. There is no parent-death signal outside Linux: an emulator
// outlives a test binary that dies without calling Stop (SIGKILL, a
// -timeout panic).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
