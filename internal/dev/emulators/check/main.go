// Command check finds the runtimes the emulators need the way
// emulators.Start does, so the Makefile and Start agree on them.
//
//	go run ./internal/dev/emulators/check        npm packages, Node.js >= 22.5 and Java 17+
//	go run ./internal/dev/emulators/check java   Java 17+ only (before `npm ci`)
//
// It prints what it found, or one line saying what to install, and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ddbworker/ddbworker/internal/dev/emulators"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch {
	case len(os.Args) == 2 && os.Args[1] == "java":
		java, err := emulators.FindJava(ctx, emulators.Config{})
		exitOn(err)
		fmt.Printf("emulators: java %s\n", java)
	case len(os.Args) == 1:
		rt, err := emulators.Resolve(ctx, emulators.Config{})
		exitOn(err)
		fmt.Printf("emulators: node %s, java %s\n", rt.Node, rt.Java)
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
