package emulators

import "syscall"

// procAttr starts an emulator in its own process group (Stop signals the
// group) and has the kernel SIGKILL it when the thread that started it
// dies with its process, so a killed test binary leaves no JVM behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
