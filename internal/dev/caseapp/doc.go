// Package caseapp is ddbworker's own service as a daemon.App: the example
// case domain (internal/caseflow) with its three flags, --fused,
// --single-write and --track-applications. cmd/ddbworker runs it as it ships;
// internal/dev/cmd/ddbworker-dev runs the same service with the development tools
// added, so the chaos harness's worker processes are the product's worker.
package caseapp
