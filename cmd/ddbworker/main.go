// Command ddbworker is the daemon and operator CLI of ddbworker: run the
// worker, create tables and queues, send example traffic, run the demo on
// local emulators. Logic lives in the library packages; this command only
// wires flags, clients and output.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		var exit *exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "ddbworker:", err)
		os.Exit(1)
	}
}

// exitError ends the process with code after the command printed its own
// explanation.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
