// Command check finds the runtimes the emulators need the way
// emulators.Start does (package ddbworkertest/emulators), so the Makefile
// and Start agree on them.
//
//	go run ./internal/dev/emulators/check        Java 17+, the npm packages (installed into the user cache when missing) and Node.js >= 22.5
//	go run ./internal/dev/emulators/check java   Java 17+ only
//
// It prints what it found, or one line saying what to install, and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	switch {
	case len(os.Args) == 2 && os.Args[1] == "java":
		java, err := emulators.FindJava(ctx, emulators.Config{})
		exitOn(err)
		fmt.Printf("emulators: java %s\n", java)
	case len(os.Args) == 1:
		rt, err := emulators.Resolve(ctx, emulators.Config{Log: os.Stdout}) // Java first, then the install
		exitOn(err)
		dir, err := emulators.Install(ctx, emulators.Config{})
		exitOn(err)
		fmt.Printf("emulators: installed in %s; node %s, java %s\n", dir, rt.Node, rt.Java)
	default:
		exitOn(fmt.Errorf("usage: check [java]"))
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
