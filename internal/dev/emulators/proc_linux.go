package emulators

import "syscall"

// procAttr starts an emulator in its own process group (Stop signals the
// group) and has the kernel SIGKILL it when this process dies, so a killed
// test binary leaves no JVM behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
