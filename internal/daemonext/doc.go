// Package daemonext is the seam through which this module's own binaries
// extend package daemon's command line: the development binary
// (internal/dev/cmd/ddbworker-dev, through internal/dev/devcmd) adds its commands and
// the fault-injection flags of run and relay. It owns the Extension, what
// an extension's commands see of the daemon's shared flags (Globals), and
// the error that ends the process with a given exit code (ExitError).
//
// It is sealed twice over: the package is internal, so no code outside
// this module can import it, and an Extension's fields are unexported, so
// the only Extension such code could get hold of is the zero one, which
// adds nothing. A team's binary built with daemon.Main therefore has
// exactly the commands that ship, and no flag or environment variable
// reaches fault injection in it.
package daemonext
