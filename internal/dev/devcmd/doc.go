// Package devcmd owns the development binary's commands (internal/dev/cmd/ddbworker-dev):
// demo (the example end to end on local emulators, with its invariant
// check), bench, chaos, send (example traffic), emulators (start them, or
// run a command under them) and faultproxy (outage drills), and the hidden
// fault-injection flags of run and relay (--fault-*, --failpoint-kill).
//
// It plugs them into package daemon's command line through the sealed seam
// internal/daemonext (Extension): a team's binary, and the production
// ddbworker, never compile any of it. The harnesses behind the commands
// live beside it (internal/dev/{bench,chaos,ddbproxy,faults,emulators}).
package devcmd
